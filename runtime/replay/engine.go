package replay

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// Capability is something a replay may ask of its engine beyond replaying a trace through Kueue.
type Capability string

// The optional capabilities. The cluster engine has them all; the sim engine runs Kueue's
// workload reconciler on its virtual clock (waitForPodsReady) but plays no fault injector, no
// processes to lose, and no cluster of its own.
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
	results.EngineSim:     {KueueTimers: true},
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

// Engine is a back end that replays a trace: the cluster engine (runtime/runner) or the sim
// engine (runtime/sim). What is particular to one engine (a cluster and its agent, virtual
// timing) is in its own value; what every engine replays is Inputs. Run it through Run, which
// refuses the capabilities it lacks.
type Engine interface {
	// Name is the engine's name in results (summary.json's engine).
	Name() results.Engine
	// Replay runs the inputs and writes the results files in Inputs.OutDir; its error is
	// Outcome's once those were written.
	Replay(ctx context.Context, in Inputs) (*Result, error)
}

// Inputs are what a replay is about, the same whichever engine runs it.
type Inputs struct {
	// Trace is the trace in memory, or TracePath the trace file (an engine that streams it reads
	// it as it goes). TraceName labels the results (default TracePath).
	Trace     *trace.Trace
	TracePath string
	TraceName string
	Spec      *rcluster.Spec
	// Mapping picks the kind per family (nil: render.DefaultMapping).
	Mapping render.Mapping
	// Seed drives the placer's GPU-family choice and Katib's parameter sampling.
	Seed uint64
	// Faults are the faults to inject (nil or empty: none); they ask for Faults.
	Faults *fault.Spec
	// Asks are the capabilities the caller's setup asks for beyond the inputs' own (a cluster of
	// the user's own, Kueue's wall-clock timers).
	Asks []Capability
	// OutDir receives the results files (created if missing).
	OutDir string
	// Timeout bounds the run's wall time (0: none).
	Timeout time.Duration
	// Progress receives the progress display (nil: none); TTY selects the bar.
	Progress io.Writer
	TTY      bool
	// Out receives setup messages, the summary table and the engine's account of its own work
	// (nil: discarded).
	Out io.Writer
}

// Needs lists the capabilities the inputs ask of their engine.
func (in *Inputs) Needs() []Capability {
	needs := slices.Clone(in.Asks)
	if !in.Faults.Empty() {
		needs = append(needs, Faults)
	}
	return needs
}

// Result is what a run measured besides the results files.
type Result struct {
	Summary results.Summary
}

// Check returns nil when engine e has every capability the inputs ask, else the MissingError of
// the first one it lacks. Run checks; a front end calls it too when its own setup (a trace to
// generate, a cluster to start) comes before the inputs are complete, to refuse at once.
func Check(e results.Engine, in *Inputs) error { return Require(e, in.Needs()...) }

// Run replays the inputs on engine e once Check has passed.
func Run(ctx context.Context, e Engine, in Inputs) (*Result, error) {
	if err := Check(e.Name(), &in); err != nil {
		return nil, err
	}
	return e.Replay(ctx, in)
}
