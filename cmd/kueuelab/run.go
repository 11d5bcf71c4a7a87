package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/simclock"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

type runFlags struct {
	tracePath, specPath, kubeconfig, out, mapping, name, engine string
	speedup, qps                                                float64
	timeout                                                     time.Duration
	keep, compensate                                            bool
	genJobs                                                     int
	genSpan                                                     time.Duration
	seed                                                        uint64
	sim                                                         simFlags
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run",
		Short: "Replay a trace on a cluster through Kueue and record every workload's life",
		Long: `Applies the cluster spec (namespaces, priority classes, flavors, queues, KWOK nodes), submits each
workload of the trace at its submit time ÷ speedup (bounded by --qps), and watches Kueue Workloads
and pods until every workload has finished, --timeout passes or Ctrl-C. Results go to --out:
events.jsonl, workloads.csv, timeseries.csv and summary.json, and a summary table is printed.

Without --kubeconfig the local cluster is used (tools built and the cluster started if needed) and
the simulation agent runs in this process; with --kubeconfig the cluster must run the agent from
charts/kueuelab-agent.

Katib: with no suggestion service on KWOK, the runner plays Katib's part for hpo_experiment
workloads. It creates each Experiment's trial Jobs from its trial template (queue and priority
labels included, named <experiment>-trial-<n>), at most parallelTrialCount at a time up to
maxTrialCount, and does not create the Experiment object itself.

Trace time: --speedup S runs trace time S times faster than wall time, except while the control
plane owes a step the runner has seen begin (a created job without a Kueue attempt, reserved quota
whose pods are not all Running, finished pods whose Workload is not Finished, Kueue's next cycle
after quota is released). Then trace time runs at real time, so control-plane latency costs what it
costs on a real cluster rather than S times as much, and results do not depend on S. The run prints
how long the clock was held. --compensate-lag=false turns this off. With --kubeconfig the agent runs
in the cluster, cannot share the clock, and trace time is always wall time × S.

--gen-jobs N generates an N-workload trace with the default profile (saved as trace.jsonl in --out)
instead of reading --trace; --gen-span spreads its submissions over that much trace time.

--engine sim replays the same trace, cluster spec and mapping through Kueue v0.15.0's own
scheduler, imported as a library, in virtual time: no cluster, no processes, the same results
files. ` + simHelp,
		Example: `  kueuelab run --gen-jobs 300 --gen-span 12h --seed 1 --cluster examples/clusters/teams.yaml --speedup 1000
  kueuelab run --trace trace.jsonl --cluster examples/clusters/teams.yaml --out results/base
  kueuelab run --trace trace.jsonl --cluster spec.yaml --kubeconfig ~/.kube/config --keep
  kueuelab run --engine sim --gen-jobs 100000 --seed 1 --cluster examples/clusters/teams.yaml --out results/sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.tracePath, "trace", "", "trace file (JSON Lines, schema v2)")
	fl.StringVar(&f.specPath, "cluster", "", "cluster spec (required)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "run on this cluster instead of the local one")
	fl.StringVar(&f.name, "name", cluster.DefaultName, "local cluster name (without --kubeconfig)")
	fl.Float64Var(&f.speedup, "speedup", 100, "trace seconds per wall second")
	fl.StringVar(&f.out, "out", "", "results directory (default results/<time>)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the run after this wall time (0: no limit)")
	fl.BoolVar(&f.keep, "keep", false, "leave the submitted objects on the cluster")
	fl.BoolVar(&f.compensate, "compensate-lag", true, "run trace time at real time while the control plane owes a step (local cluster only), so results do not depend on --speedup")
	fl.StringVar(&f.mapping, "mapping", "", "mapping file choosing the kind per family")
	fl.Float64Var(&f.qps, "qps", 50, "create calls per second the runner may make")
	fl.IntVar(&f.genJobs, "gen-jobs", 0, "generate a trace of this many workloads instead of --trace")
	fl.DurationVar(&f.genSpan, "gen-span", 0, "trace time the --gen-jobs submissions cover, e.g. 24h (default: the profile's mean inter-arrival of 30s)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of --gen-jobs, the placer and Katib's parameter sampling")
	fl.StringVar(&f.engine, "engine", "cluster", "cluster (a real Kueue on a cluster) or sim (Kueue's scheduler in virtual time)")
	f.sim.register(fl)
	return c
}

func runRun(cmd *cobra.Command, f *runFlags) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	if f.specPath == "" {
		return errors.New("--cluster is required (e.g. examples/clusters/small.yaml)")
	}
	if f.genSpan < 0 || (f.genSpan > 0 && f.genJobs == 0) {
		return fmt.Errorf("--gen-span %s: needs --gen-jobs and a positive duration", f.genSpan)
	}
	if (f.tracePath == "") == (f.genJobs == 0) {
		return errors.New("give exactly one of --trace and --gen-jobs")
	}
	if f.engine != "cluster" && f.engine != "sim" {
		return fmt.Errorf("--engine %q: want cluster or sim", f.engine)
	}
	if err := f.sim.check(f.engine, cmd.Flags()); err != nil {
		return err
	}
	if f.out == "" {
		f.out = filepath.Join("results", time.Now().Format("20060102-150405"))
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	spec, err := rcluster.Load(f.specPath)
	if err != nil {
		return err
	}
	mapping := render.DefaultMapping()
	if f.mapping != "" {
		if mapping, err = render.LoadMapping(f.mapping, render.DefaultRegistry()); err != nil {
			return err
		}
	}
	if f.genJobs > 0 {
		f.tracePath = filepath.Join(f.out, "trace.jsonl")
		if err := generate(ctx, f.tracePath, f.genJobs, f.seed, f.genSpan); err != nil {
			return err
		}
		fmt.Fprintf(out, "generated %d workloads (seed %d) into %s\n", f.genJobs, f.seed, f.tracePath)
	}
	if f.engine == "sim" {
		return runSim(cmd, f, spec, mapping)
	}
	tr, err := trace.LoadWorkloads(ctx, f.tracePath, trace.Options{})
	if err != nil {
		return err
	}

	var rc *rest.Config
	local := f.kubeconfig == ""
	if local {
		if rc, err = localCluster(ctx, f.name, spec, out); err != nil {
			return err
		}
	} else if rc, err = cluster.RESTConfig(f.kubeconfig); err != nil {
		return err
	}

	cfg := runner.Config{
		REST: rc, Trace: tr, TraceName: f.tracePath, Spec: spec, Mapping: mapping, Speedup: f.speedup,
		Timeout: f.timeout, OutDir: f.out, Keep: f.keep, QPS: f.qps, Seed: int64(f.seed), Out: out,
	}
	if local {
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		cfg.Clock = simclock.New(f.speedup, simclock.Options{Disabled: !f.compensate})
		a, err := agent.InProcess(cs, cfg.Clock, f.seed)
		if err != nil {
			return err
		}
		cfg.Agent = a
	}
	if fd, ok := cmd.ErrOrStderr().(interface{ Fd() uintptr }); ok {
		cfg.Progress, cfg.TTY = cmd.ErrOrStderr(), term.IsTerminal(int(fd.Fd()))
	} else {
		cfg.Progress = cmd.ErrOrStderr()
	}
	fmt.Fprintf(out, "replaying %d workloads at speedup %g\n", len(tr.Workloads), f.speedup)
	res, err := runner.Run(ctx, cfg)
	if res != nil {
		fmt.Fprintf(out, "submitted %d workloads in %.1fs wall (worst lag %.3fs); setup %.1fs\n",
			res.Submitted, res.SubmitWallSec, res.MaxLagSec, res.SetupSec)
	}
	return err
}

// generate writes an n-workload trace of the default profile; a positive span sets the mean
// inter-arrival time so that the submissions cover about that much trace time.
func generate(ctx context.Context, path string, n int, seed uint64, span time.Duration) error {
	p, err := gen.DefaultProfile()
	if err != nil {
		return err
	}
	if span > 0 {
		mean := 0.0
		for _, m := range p.Arrival.HourlyMultipliers {
			mean += float64(m) / float64(len(p.Arrival.HourlyMultipliers))
		}
		p.Arrival.MeanInterArrivalSec = span.Seconds() * mean / float64(n)
	}
	fw, err := trace.Create(path)
	if err != nil {
		return err
	}
	_, gerr := gen.Write(ctx, fw.Writer, gen.New(p, seed), gen.Options{Workloads: n, EmitWorkloadRecords: true})
	return errors.Join(gerr, fw.Close())
}

// localCluster builds the tools if missing and brings the local cluster up with the spec's
// objects instead of the default nodes.
func localCluster(ctx context.Context, name string, spec *rcluster.Spec, out io.Writer) (*rest.Config, error) {
	set := tools.Pinned()
	bin, err := tools.BinDir("", set)
	if err != nil {
		return nil, err
	}
	if _, err := tools.Locate(bin, set); err != nil {
		fmt.Fprintf(out, "%v\nbuilding the tools (once; about 20 minutes on 2 cores)\n", err)
		cacheDir, err := tools.CacheDir()
		if err != nil {
			return nil, err
		}
		if err := (tools.Installer{CacheDir: cacheDir, BinDir: bin, Out: out}).Install(ctx, set); err != nil {
			return nil, err
		}
	}
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		return nil, err
	}
	cl, err := cluster.Up(ctx, cluster.Options{Name: name, BinDir: bin, Objects: objs, Out: out})
	if err != nil {
		return nil, err
	}
	return cl.Config, nil
}
