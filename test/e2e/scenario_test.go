package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/scenario"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// ScenariosEnv selects the scenarios TestScenarios runs: unset, those marked ci (small enough for
// make test); "all", every one; else a comma-separated list of names.
const ScenariosEnv = "KUEUELAB_E2E_SCENARIOS"

// TestScenarios runs the scenario library (examples/scenarios) and requires every expected outcome
// to hold. A scenario whose variants change Kueue's configuration runs on fresh local clusters
// (loopback ports of their own); the others on the shared cluster, reset between variants.
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
			o := scenario.Options{OutDir: filepath.Join(t.TempDir(), "out"), Out: &out}
			if s.NeedsFreshClusters() {
				set := tools.Pinned()
				bin, err := tools.BinDir("", set)
				if err != nil {
					t.Fatal(err)
				}
				base, err := freePortBlock(28400, 17)
				if err != nil {
					t.Fatal(err)
				}
				o.Local = experiment.LocalCluster{Root: t.TempDir(), Name: "scenario-" + e.Name, BinDir: bin, PortBase: base}
			} else {
				if o.REST, err = cluster.RESTConfig(shared.kubeconfig); err != nil {
					t.Fatal(err)
				}
				o.State = shared.state
			}
			t0 := time.Now()
			res, err := scenario.Run(t.Context(), s, o)
			t.Logf("%s in %s (fresh clusters: %v)\n%s", e.Name, time.Since(t0).Round(time.Second), s.NeedsFreshClusters(), out.String())
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
