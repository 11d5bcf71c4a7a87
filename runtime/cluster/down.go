package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"
)

// Down stops the processes the cluster started, in reverse start order (SIGTERM, then SIGKILL after
// grace), also after a half-failed Up. With purge it removes the state dir.
func Down(ctx context.Context, root, name string, purge bool, out io.Writer) error {
	if root == "" {
		r, err := StateRoot()
		if err != nil {
			return err
		}
		root = r
	}
	s, exists, err := Load(root, name)
	if err != nil {
		return err
	}
	if !exists {
		if _, err := os.Stat(s.Dir); err != nil {
			return fmt.Errorf("no cluster %q under %s", name, root)
		}
	}
	var errs []error
	order := slices.Clone(Components())
	slices.Reverse(order)
	bins := s.matchers()
	for _, n := range order {
		stopped, err := s.stop(ctx, n, bins[n], 15*time.Second)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if stopped {
			fmt.Fprintf(out, "  stopped %s\n", n)
		}
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
