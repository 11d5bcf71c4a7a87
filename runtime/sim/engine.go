package sim

import (
	"cmp"
	"context"
	"fmt"

	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// Engine is the sim engine behind replay.Engine: what is particular to a sim run; the trace, spec
// and outputs come with the replay's inputs.
type Engine struct {
	// Kueue is the Kueue configuration (fair sharing, admission fair sharing).
	Kueue KueueConfig
	// Timing is how long the control plane takes for the steps the sim models.
	Timing Timing
	// MaxTraceSec stops the run at that trace time (0: when every workload is done), and StateOut
	// then receives the state there (Config.StateOut).
	MaxTraceSec float64
	StateOut    string
	// ControlPlane is the control-plane model (nil: none).
	ControlPlane *controlplane.Model
}

// Name is the sim engine's.
func (e *Engine) Name() results.Engine { return results.EngineSim }

// Replay runs the inputs through Kueue's scheduler in virtual time.
func (e *Engine) Replay(ctx context.Context, in replay.Inputs) (*replay.Result, error) {
	cfg := e.config(in)
	if cfg.Out != nil {
		name := cmp.Or(in.TraceName, in.TracePath)
		cp := controlplane.NoneName + ": Kueue infinitely fast"
		if m := cfg.ControlPlane; m != nil {
			cp = m.Name
		}
		fmt.Fprintf(cfg.Out, "replaying %s through Kueue %s in virtual time (sim engine, control plane %s)\n", name, kueuelib.KueueVersion, cp)
	}
	res, err := Run(ctx, cfg)
	if res == nil {
		return nil, err
	}
	n := 0
	if len(res.Summary.Groups) > 0 {
		n = res.Summary.Groups[0].Workloads
	}
	if cfg.Out != nil {
		fmt.Fprintf(cfg.Out, "sim: %d workloads, %d events, %d scheduling cycles in %.1fs wall (%.0f workloads/s, %.0f trace s per wall s)\n",
			n, res.Events, res.Cycles, res.WallSec, float64(n)/res.WallSec, res.Summary.TraceSec/res.WallSec)
		if m := cfg.ControlPlane; m != nil {
			fmt.Fprintf(cfg.Out, "control plane %s: %d writes through Kueue's client, %.1f ms a write waiting for its tokens on average; a cycle waited %.0f ms on average for its own writes\n",
				m.Name, res.KueueWrites, 1000*res.WaitedSec/max(float64(res.KueueWrites), 1), 1000*res.CycleWritesSec/max(float64(res.Cycles), 1))
		}
	}
	return &replay.Result{Summary: res.Summary}, err
}

// config is the run's Config: the inputs with the engine's own settings.
func (e *Engine) config(in replay.Inputs) Config {
	return Config{Trace: in.Trace, TracePath: in.TracePath, TraceName: in.TraceName, Spec: in.Spec, Mapping: in.Mapping, Seed: in.Seed,
		Kueue: e.Kueue, Timing: e.Timing, ControlPlane: e.ControlPlane, MaxTraceSec: e.MaxTraceSec, StateOut: e.StateOut, Timeout: in.Timeout, OutDir: in.OutDir,
		Progress: in.Progress, TTY: in.TTY, Out: in.Out}
}
