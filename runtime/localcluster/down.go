package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Down asks the cluster's supervisor to stop the components (reverse start order, SIGTERM, then
// SIGKILL after grace) and exit, then stops any component process still named by a PID file (left
// by a supervisor that died, or by a half-failed Up). With purge it removes the state dir.
func Down(ctx context.Context, root, name string, purge bool, out io.Writer) error {
	s, exists, err := Load(root, name)
	if err != nil {
		return err
	}
	if !exists {
		if _, err := os.Stat(s.Dir); err != nil {
			return fmt.Errorf("no cluster %q under %s", name, filepath.Dir(s.Dir))
		}
	}
	var errs []error
	if err := s.stopSupervisor(ctx, out); err != nil {
		errs = append(errs, err)
	}
	order := slices.Clone(Components())
	// Components a supervisor was asked for that the list does not name (yet) are stopped too.
	if d, _, err := readDesired(s.Dir); err == nil {
		for _, c := range d.Components {
			if !slices.Contains(order, c.Name) {
				order = append(order, c.Name)
			}
		}
	}
	slices.Reverse(order)
	bins := s.matchers()
	for _, n := range order {
		bin, ok := bins[n]
		if !ok {
			// A name this build does not know: its binary in the bin dir, as a supervisor of the
			// build that knew it ran it (an empty matcher would match any process).
			bin = filepath.Join(s.BinDir, n)
			if s.BinDir == "" {
				bin = n
			}
		}
		stopped, err := s.stop(ctx, n, bin, 15*time.Second)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if stopped {
			fmt.Fprintf(out, "  stopped %s\n", n)
		}
	}
	// A node killed before it could stop leaves its host side behind.
	if err := s.cleanupRealNode(ctx); err != nil {
		errs = append(errs, fmt.Errorf("real node: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster %s down: %v", name, errs)
	}
	if purge {
		if err := os.RemoveAll(s.Dir); err != nil {
			return fmt.Errorf("purge %s: %w", s.Dir, err)
		}
		fmt.Fprintf(out, "  removed %s\n", s.Dir)
	}
	return nil
}
