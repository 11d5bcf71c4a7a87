package scenario

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// simSlow are the library's scenarios the sim engine accepts but the unit tests leave out, and why.
var simSlow = map[string]string{
	"scalability": "1,000 workloads take about 4 min on the sim engine on 2 cores",
}

// TestLibraryOnSimEngine runs every scenario of examples/scenarios that the sim engine can model
// (no faults, no Kueue timers) on it, and requires every expected outcome: Kueue's scheduler in
// virtual time must show the policies' documented effects as the real cluster does (the e2e tests
// run the same scenarios there). A few seconds for the whole library.
func TestLibraryOnSimEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("replays the scenario library on the sim engine")
	}
	entries, err := List(filepath.Join("..", "..", "examples", "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		t.Run(en.Name, func(t *testing.T) {
			if en.Err != nil {
				t.Fatal(en.Err)
			}
			if why := simSlow[en.Name]; why != "" {
				t.Skipf("not on the sim engine in the unit tests: %s", why)
			}
			s, err := Load(en.Dir)
			if err != nil {
				t.Fatal(err)
			}
			e := s.Experiment
			for i := range e.Variants {
				v := &e.Variants[i]
				if !e.FaultsOf(v).Empty() {
					t.Skipf("variant %s injects faults, which the sim engine does not model", v.Name)
				}
				if _, err := sim.KueueConfigFromFields(v.KueueConfig.Fields()); err != nil {
					t.Skipf("variant %s: %v", v.Name, err)
				}
			}
			e.Engine = results.EngineSim
			var out bytes.Buffer
			res, err := Run(t.Context(), s, Options{OutDir: filepath.Join(t.TempDir(), "out"), Out: &out})
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			for _, r := range res.Results {
				if !r.Pass {
					t.Errorf("FAIL %s: %s, expected %s %s", r.Name, r.Measured, r.Expected, r.Err)
				}
			}
			if t.Failed() {
				t.Log(out.String())
			}
		})
	}
}
