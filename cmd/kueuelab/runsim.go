package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
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
	clusterOnly := []string{"speedup", "kubeconfig", "qps", "keep", "keep-cluster", "stall-timeout", "name", "clock-trace"}
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

func runSim(cmd *cobra.Command, f *runFlags, spec *rcluster.Spec, mapping render.Mapping) error {
	out := cmd.OutOrStdout()
	cfg := sim.Config{TracePath: f.tracePath, Spec: spec, Mapping: mapping, Seed: f.seed,
		Timing:  sim.Timing{CycleSec: f.sim.cycle.Seconds(), PodStartSec: f.sim.podStart.Seconds()},
		Timeout: f.timeout, MaxTraceSec: f.sim.maxTrace.Seconds(), OutDir: f.out, Out: out}
	if fd, ok := cmd.ErrOrStderr().(interface{ Fd() uintptr }); ok {
		cfg.Progress, cfg.TTY = cmd.ErrOrStderr(), term.IsTerminal(int(fd.Fd()))
	} else {
		cfg.Progress = cmd.ErrOrStderr()
	}
	fmt.Fprintf(out, "replaying %s through Kueue %s in virtual time (sim engine)\n", f.tracePath, kueuelib.KueueVersion)
	defer tuneGCForSim()()
	res, err := sim.Run(cmd.Context(), cfg)
	if res != nil {
		n := 0
		if len(res.Summary.Groups) > 0 {
			n = res.Summary.Groups[0].Workloads
		}
		fmt.Fprintf(out, "sim: %d workloads, %d events, %d scheduling cycles in %.1fs wall (%.0f workloads/s, %.0f trace s per wall s)\n",
			n, res.Events, res.Cycles, res.WallSec, float64(n)/res.WallSec, res.Summary.TraceSec/res.WallSec)
	}
	return err
}
