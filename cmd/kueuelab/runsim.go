package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

const simHelp = `The sim engine's control-plane timing: --sim-cycle is the
virtual duration of one Kueue scheduling cycle (Kueue tries one head per ClusterQueue per
cycle, so a deep queue waits that long per position), --sim-pod-start the time from admission
to running pods. Flags of the cluster engine (--speedup, --kubeconfig, --qps, --keep,
--keep-cluster, --stall-timeout, --name) do not apply.`

type simFlags struct {
	cycle, podStart time.Duration
	maxTrace        time.Duration
}

func (s *simFlags) register(fl *pflag.FlagSet) {
	fl.DurationVar(&s.cycle, "sim-cycle", time.Duration(sim.DefaultTiming.CycleSec*float64(time.Second)), "sim engine: virtual duration of a Kueue scheduling cycle")
	fl.DurationVar(&s.podStart, "sim-pod-start", time.Duration(sim.DefaultTiming.PodStartSec*float64(time.Second)), "sim engine: virtual time from admission to running pods")
	fl.DurationVar(&s.maxTrace, "sim-max-trace", 0, "sim engine: stop at this trace time (0: when every workload is done)")
}

// check refuses flags that belong to the other engine.
func (s *simFlags) check(engine results.Engine, fl *pflag.FlagSet) error {
	var errs []error
	simOnly := []string{"sim-cycle", "sim-pod-start", "sim-max-trace"}
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
	if s.cycle < 0 || s.podStart < 0 || s.maxTrace < 0 {
		errs = append(errs, errors.New("--sim-cycle, --sim-pod-start and --sim-max-trace must be ≥ 0"))
	}
	return errors.Join(errs...)
}

// engine is the sim engine of the flags.
func (s *simFlags) engine() *sim.Engine {
	return &sim.Engine{Timing: sim.Timing{CycleSec: s.cycle.Seconds(), PodStartSec: s.podStart.Seconds()}, MaxTraceSec: s.maxTrace.Seconds()}
}
