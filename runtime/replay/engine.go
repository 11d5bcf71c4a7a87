package replay

import (
	"fmt"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Capability is something a replay may ask of its engine beyond replaying a trace through Kueue.
type Capability string

// The optional capabilities. The cluster engine has them all; the sim engine none: it plays no
// fault injector, no wall-clock Kueue reconciler, no processes to lose, and no cluster of its own.
const (
	// Faults: node, GPU and pod faults injected during the run (--faults, an experiment's faults).
	Faults Capability = "faults"
	// KueueTimers: Kueue's wall-clock timers, scaled to trace time (waitForPodsReady).
	KueueTimers Capability = "waitForPodsReady"
	// Outages: control-plane components that crash, restart and hold the clock meanwhile.
	Outages Capability = "component outages"
	// RemoteCluster: a replay on a cluster of the user's own (--kubeconfig).
	RemoteCluster Capability = "a cluster of your own (--kubeconfig)"
)

// capabilities are each engine's.
var capabilities = map[results.Engine]map[Capability]bool{
	results.EngineCluster: {Faults: true, KueueTimers: true, Outages: true, RemoteCluster: true},
	results.EngineSim:     {},
}

// Has reports whether engine e has capability c.
func Has(e results.Engine, c Capability) bool { return capabilities[e][c] }

// Require returns nil when engine e has every capability asked for, else an error naming the
// first one missing and the engine that has it: the one wording every caller uses.
func Require(e results.Engine, cs ...Capability) error {
	for _, c := range cs {
		if !Has(e, c) {
			return &MissingError{Engine: e, Capability: c}
		}
	}
	return nil
}

// MissingError is Require's error.
type MissingError struct {
	Engine     results.Engine
	Capability Capability
}

func (m *MissingError) Error() string {
	for _, e := range results.Engines {
		if Has(e, m.Capability) {
			return fmt.Sprintf("the %s engine does not model %s: use the %s engine", m.Engine, m.Capability, e)
		}
	}
	return fmt.Sprintf("no engine models %s", m.Capability)
}
