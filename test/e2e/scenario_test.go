package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/scenario"
)

// ScenariosEnv selects the scenarios TestScenarios runs: unset, those marked ci (small enough for
// make test); "all", every one; else a comma-separated list of names.
const ScenariosEnv = "KUEUELAB_E2E_SCENARIOS"

// TestScenarios runs the scenario library (examples/scenarios) and requires every expected outcome
// to hold. Every scenario runs on the shared cluster, reset between variants; a variant that
// changes Kueue's configuration restarts the shared Kueue with it (reconfigureKueue), which is
// seconds where a fresh local cluster per variant is a minute or more.
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every ci scenario")
	}
	dir, err := filepath.Abs("../../examples/scenarios")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := scenario.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	sel := os.Getenv(ScenariosEnv)
	names := strings.Split(sel, ",")
	for _, e := range entries {
		t.Run(e.Name, func(t *testing.T) {
			if e.Err != nil {
				t.Fatal(e.Err)
			}
			if !(sel == "all" || slices.Contains(names, e.Name) || (sel == "" && e.CI)) {
				t.Skipf("not in make test (ci: false); run it with %s=all or %s=%s", ScenariosEnv, ScenariosEnv, e.Name)
			}
			s, err := scenario.Load(e.Dir)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			o := scenario.Options{OutDir: filepath.Join(t.TempDir(), "out"), Out: &out, State: shared.state}
			if o.REST, err = cluster.RESTConfig(shared.kubeconfig); err != nil {
				t.Fatal(err)
			}
			if s.NeedsFreshClusters() {
				o.ReconfigureKueue = reconfigureKueue(t)
			}
			t0 := time.Now()
			res, err := scenario.Run(t.Context(), s, o)
			t.Logf("%s in %s (Kueue reconfigured: %v)\n%s", e.Name, time.Since(t0).Round(time.Second), s.NeedsFreshClusters(), out.String())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Results {
				if !r.Pass {
					t.Errorf("FAIL %s: %s, expected %s %s", r.Name, r.Measured, r.Expected, r.Err)
				}
			}
		})
	}
}

// reconfigureKueue restarts the shared cluster's Kueue with a variant's configuration fields
// (localcluster.Up restarts a Kueue whose configuration changed, and does nothing otherwise), and
// gives the tests after t Kueue's default configuration back.
func reconfigureKueue(t *testing.T) func(ctx context.Context, fields map[string]any) error {
	t.Cleanup(func() {
		o := shared.up
		o.Out = &testWriter{t: t}
		if _, err := localcluster.Up(context.Background(), o); err != nil {
			t.Errorf("restore Kueue's default configuration: %v", err)
		}
	})
	return func(ctx context.Context, fields map[string]any) error {
		o := shared.up
		o.KueueConfig, o.Out = fields, &testWriter{t: t}
		_, err := localcluster.Up(ctx, o)
		return err
	}
}
