package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

const simHelp = `The sim engine's control-plane timing: --sim-cycle is the
virtual duration of one Kueue scheduling cycle (Kueue tries one head per ClusterQueue per
cycle, so a deep queue waits that long per position), --sim-pod-start the time from admission
to running pods. --control-plane charges Kueue's own speed in trace time: "none" (the default:
Kueue infinitely fast), "kueue" (the built-in model) or a control-plane file
(examples/control-plane/); with a model, Kueue's writes wait for its client's rate limit
(clientConnection of its Configuration, or the file's) and a cycle's time is the model's, not
--sim-cycle. --sim-max-trace stops the replay at a trace time; --state-out then writes the
state there (the workloads alive and still to come, the cluster spec) for kueuelab forecast.
Flags of the cluster engine (--speedup, --kubeconfig, --qps, --keep,
--keep-cluster, --stall-timeout, --name) do not apply.`

type simFlags struct {
	cycle, podStart time.Duration
	maxTrace        time.Duration
	stateOut        string
	controlPlane    string
	model           *controlplane.Model // controlPlane resolved by check
}

func (s *simFlags) register(fl *pflag.FlagSet) {
	fl.DurationVar(&s.cycle, "sim-cycle", time.Duration(sim.DefaultTiming.CycleSec*float64(time.Second)), "sim engine: virtual duration of a Kueue scheduling cycle")
	fl.DurationVar(&s.podStart, "sim-pod-start", time.Duration(sim.DefaultTiming.PodStartSec*float64(time.Second)), "sim engine: virtual time from admission to running pods")
	fl.DurationVar(&s.maxTrace, "sim-max-trace", 0, "sim engine: stop at this trace time (0: when every workload is done)")
	fl.StringVar(&s.stateOut, "state-out", "", "sim engine: with --sim-max-trace, write the state at that trace time to this directory (for kueuelab forecast)")
	fl.StringVar(&s.controlPlane, "control-plane", controlplane.NoneName, `sim engine: control-plane model, "none", "kueue" or a control-plane file`)
}

// check refuses flags that belong to the other engine.
func (s *simFlags) check(engine results.Engine, fl *pflag.FlagSet) error {
	var errs []error
	simOnly := []string{"sim-cycle", "sim-pod-start", "sim-max-trace", "state-out", "control-plane"}
	clusterOnly := []string{"speedup", "qps", "keep", "keep-cluster", "stall-timeout", "name", "clock-trace"}
	bad := clusterOnly
	if engine == results.EngineCluster {
		bad = simOnly
	}
	for _, n := range bad {
		if fl.Changed(n) {
			errs = append(errs, fmt.Errorf("--%s does not apply to --engine %s", n, engine))
		}
	}
	if s.stateOut != "" && s.maxTrace <= 0 {
		errs = append(errs, errors.New("--state-out: the state is taken at --sim-max-trace (or --until); give it"))
	}
	if s.cycle < 0 || s.podStart < 0 || s.maxTrace < 0 {
		errs = append(errs, errors.New("--sim-cycle, --sim-pod-start and --sim-max-trace must be ≥ 0"))
	}
	if engine == results.EngineSim {
		m, err := controlplane.Resolve(s.controlPlane)
		if err != nil {
			errs = append(errs, fmt.Errorf("--control-plane: %w", err))
		}
		if m != nil && fl.Changed("sim-cycle") {
			errs = append(errs, errors.New("--sim-cycle: with a control-plane model the model gives the cycle's time"))
		}
		s.model = m
	}
	return errors.Join(errs...)
}

// engine is the sim engine of the flags.
func (s *simFlags) engine() *sim.Engine {
	return &sim.Engine{Timing: sim.Timing{CycleSec: s.cycle.Seconds(), PodStartSec: s.podStart.Seconds()}, MaxTraceSec: s.maxTrace.Seconds(),
		StateOut: s.stateOut, ControlPlane: s.model}
}
