package replay_test

import (
	"errors"
	"testing"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// TestRunRefusesWhatTheEngineLacks runs each engine through the interface with inputs that ask
// one capability each: the sim engine refuses every one with MissingError's wording before it
// starts; the cluster engine has them all and gets as far as its own setup, which fails on the
// empty inputs.
func TestRunRefusesWhatTheEngineLacks(t *testing.T) {
	faults := &fault.Spec{Random: &fault.Random{}}
	for _, tc := range []struct {
		name   string
		engine replay.Engine
		in     replay.Inputs
		want   string // MissingError's text; "" when the run must get past the check
	}{
		{"cluster, nothing asked", &runner.Engine{}, replay.Inputs{}, ""},
		{"cluster, faults", &runner.Engine{}, replay.Inputs{Faults: faults}, ""},
		{"cluster, Kueue timers", &runner.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.KueueTimers}}, ""},
		{"cluster, outages", &runner.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.Outages}}, ""},
		{"cluster, remote cluster", &runner.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.RemoteCluster}}, ""},
		{"sim, nothing asked", &sim.Engine{}, replay.Inputs{}, ""},
		{"sim, empty faults", &sim.Engine{}, replay.Inputs{Faults: &fault.Spec{}}, ""},
		{"sim, faults", &sim.Engine{}, replay.Inputs{Faults: faults},
			"the sim engine does not model faults: use the cluster engine"},
		{"sim, Kueue timers", &sim.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.KueueTimers}}, ""},
		{"sim, outages", &sim.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.Outages}},
			"the sim engine does not model component outages: use the cluster engine"},
		{"sim, remote cluster", &sim.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.RemoteCluster}},
			"the sim engine does not model a cluster of your own (--kubeconfig): use the cluster engine"},
		{"sim, the first missing of two", &sim.Engine{}, replay.Inputs{Asks: []replay.Capability{replay.RemoteCluster}, Faults: faults},
			"the sim engine does not model a cluster of your own (--kubeconfig): use the cluster engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := replay.Run(t.Context(), tc.engine, tc.in)
			var missing *replay.MissingError
			switch {
			case res != nil:
				t.Fatalf("a run on empty inputs returned a result: %+v", res)
			case err == nil:
				t.Fatal("a run on empty inputs succeeded")
			case tc.want == "" && errors.As(err, &missing):
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.As(err, &missing) || err.Error() != tc.want):
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
