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
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/sim"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

type runFlags struct {
	tracePath, specPath, kubeconfig, out, mapping, name string
	faults, clockTrace, kueueVersion                    string
	featureGates                                        map[string]bool
	engine                                              results.Engine
	sim                                                 simFlags
	speedup                                             results.Speedup
	qps                                                 float64
	timeout, stall, until                               time.Duration
	keep, keepCluster                                   bool
	genJobs                                             int
	genSpan                                             time.Duration
	seed                                                uint64
	remote                                              remoteFlags
}

// clockTraceEnv is --clock-trace's default, for runs started by scripts.
const clockTraceEnv = "KUEUELAB_CLOCK_TRACE"

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run",
		Short: "Replay a trace on a cluster through Kueue and record every workload's life",
		Long: `Applies the cluster spec (namespaces, priority classes, flavors, queues, KWOK nodes), submits each
workload of the trace at its submit time ÷ speedup (bounded by --qps), and watches Kueue Workloads
and pods until every workload has finished, --timeout passes or Ctrl-C. Results go to --out:
events.jsonl, workloads.csv, timeseries.csv and summary.json, and a summary table is printed.

Without --kubeconfig the local cluster is used (tools built and the cluster started if needed).
With --kubeconfig the run uses that cluster (prepare it once with ` + "`kueuelab cluster install`" + `). Either
way the simulation agent runs in this process by default and shares the trace clock, so results
are exact on any cluster: the runner reads that cluster's Kueue and kube-scheduler metrics (found
through a port-forward to their pods, as kind and kubeadm run them, or given with
--kueue-metrics / --scheduler-metrics) and refuses to start without them unless --inexact.
--agent in-cluster instead relies on the agent Deployment of charts/kueuelab-agent (for a
long-lived installation): trace time is then wall time × --speedup.

Katib: with no suggestion service on KWOK, the runner plays Katib's part for hpo_experiment
workloads. It creates each Experiment's trial Jobs from its trial template (queue and priority
labels included, named <experiment>-trial-<n>), at most parallelTrialCount at a time up to
maxTrialCount, and does not create the Experiment object itself.

Trace time is event-driven: whenever the control plane owes no step, it jumps straight to the
next event (the next submission, the next pod completion the agent's physics predicts, the next
time-series row, the next Kueue timer); while the control plane owes a step the runner has seen
begin (a created job without its Workload, Kueue not yet caught up with its queues, reserved quota
whose pods are not all running, finished pods whose Workload is not Finished, ...) it stands still.
So a workload alone on an idle cluster takes exactly its work's time, and results do not depend on
how fast the machine is. --speedup max (the default) replays as fast as the control plane settles;
--speedup S caps trace time at S seconds per wall second between events. The run prints how long
the clock stood still and whether any step escaped the holds (summary.json: lateSteps).
With --agent in-cluster the agent cannot share the clock, and trace time is wall time × S (a
number is then required).

The local cluster: without --kubeconfig, run starts kueuelab's local cluster if it is not running
and stops it at the end (--keep-cluster leaves it running); a cluster that was already running is
left running. Queues, flavors and nodes of another cluster spec on it are replaced.

A run exits non-zero when a workload was rejected by the API server (the first rejection is
named), when it stopped before every workload finished (--timeout, --until, Ctrl-C, or a stall:
nothing changed for --stall-timeout), or when results could not be written.

--until T stops the replay at trace time T, once everything due then has happened, and leaves
the cluster in that state: the objects stay (--keep), and the trace clock's ConfigMap says where
the replay stopped, so that kueuelab snapshot reads the state at T on the trace clock and a
forecast from it can be scored (forecast --score) against a run of the same trace to the end.
Kueue stays on the trace clock, standing still at T. It needs kueuelab's local cluster (whose
Kueue runs on the trace clock) and --keep-cluster. On the sim engine it is --sim-max-trace (with
--state-out for the state).

--gen-jobs N generates an N-workload trace with the default profile (saved as trace.jsonl in --out)
instead of reading --trace; --gen-span spreads its submissions over that much trace time.

--faults FILE injects faults at exact trace times: explicit ones ({at: 36h, node: h100-003, for:
2h}; {at: 3h, workload: ID}; {at: 1h, node: N, gpu: 3}) and random ones by mean time between
failures per GPU-hour and node-hour (defaults from Meta's Llama 3 report, in the hardware
catalog), seeded. A node goes NotReady, its pods stop and are evicted after evictAfter (5m); a pod
fails (restart policy Never) or restarts in place (OnFailure); the workload's owner then acts by
its own failure policy (the trace's maxRestarts) and Kueue follows. faults.jsonl lists each fault.
The sim engine does not model faults: --faults needs --engine cluster.

--engine sim replays the same trace, cluster spec and mapping through Kueue v0.19.2's own
scheduler, imported as a library, in virtual time: no cluster, no processes, the same results
files. --kueue-version v0.15.0, v0.17.1 or v0.18.3 replays it through that release's code
instead: a kueuelab binary linking it, built from this source tree into the cache on first use
(the Go toolchain on PATH; a few minutes the first time, ~2 s to check afterwards). ` + simHelp,
		Example: `  kueuelab run --gen-jobs 300 --gen-span 12h --seed 1 --cluster examples/clusters/teams.yaml
  kueuelab run --trace trace.jsonl --cluster examples/clusters/teams.yaml --out results/base
  kueuelab cluster install --kubeconfig ~/.kube/config --cluster spec.yaml
  kueuelab run --trace trace.jsonl --cluster spec.yaml --kubeconfig ~/.kube/config
  kueuelab run --trace trace.jsonl --cluster spec.yaml --kubeconfig ~/.kube/config --agent in-cluster --speedup 100 --keep
  kueuelab run --engine sim --gen-jobs 100000 --seed 1 --cluster examples/clusters/teams.yaml --out results/sim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRun(cmd, &f) },
	}
	fl := c.Flags()
	fl.StringVar(&f.tracePath, "trace", "", "trace file (JSON Lines, schema v2)")
	fl.StringVar(&f.specPath, "cluster", "", "cluster spec (required)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "run on this cluster instead of the local one")
	fl.StringVar(&f.name, "name", localcluster.DefaultName, "local cluster name (without --kubeconfig)")
	fl.Var(&f.speedup, "speedup", `cap on trace seconds per wall second between events, or "max" (default max)`)
	fl.StringVar(&f.clockTrace, "clock-trace", os.Getenv(clockTraceEnv), "cluster engine: write every hold and jump of the trace clock to this file (hack/clocktrace.py summarises it; default $"+clockTraceEnv+")")
	fl.StringVar(&f.out, "out", "", "results directory (default results/<time>)")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the run after this wall time (0: no limit)")
	fl.BoolVar(&f.keep, "keep", false, "leave the submitted objects on the cluster")
	fl.BoolVar(&f.keepCluster, "keep-cluster", false, "leave a local cluster this run started running at the end")
	fl.DurationVar(&f.until, "until", 0, "stop the replay at this trace time and leave the cluster in that state (for kueuelab snapshot); sim engine: --sim-max-trace")
	fl.DurationVar(&f.stall, "stall-timeout", 5*time.Minute, "end the run when nothing changed for this wall time while work is pending")
	fl.StringVar(&f.mapping, "mapping", "", "mapping file choosing the kind per family")
	fl.Float64Var(&f.qps, "qps", 50, "create calls per second the runner may make")
	fl.IntVar(&f.genJobs, "gen-jobs", 0, "generate a trace of this many workloads instead of --trace")
	fl.DurationVar(&f.genSpan, "gen-span", 0, "trace time the --gen-jobs submissions cover, e.g. 24h (default: the profile's mean inter-arrival of 30s)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of --gen-jobs, the placer and Katib's parameter sampling")
	f.remote.register(fl)
	fl.StringVar(&f.faults, "faults", "", "fault spec to inject: node, GPU and pod faults, explicit or random (see examples/scenarios/fault-tolerance); cluster engine only")
	f.engine = results.EngineCluster
	fl.Var(&f.engine, "engine", "cluster (a real Kueue on a cluster) or sim (Kueue's scheduler in virtual time)")
	f.sim.register(fl)
	fl.StringVar(&f.kueueVersion, "kueue-version", kueuever.Default, kueueVersionHelp)
	fl.Var(cliflag.NewMapStringBool(&f.featureGates), "feature-gates", "Kueue feature gates, Name=true,Name=false (as Kueue's Configuration sets them; both engines)")
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
	if f.until < 0 {
		return fmt.Errorf("--until %s: want a trace time > 0", f.until)
	}
	if f.until > 0 && f.engine == results.EngineSim {
		if cmd.Flags().Changed("sim-max-trace") {
			return errors.New("--until and --sim-max-trace are one limit: give one")
		}
		f.sim.maxTrace = f.until
	}
	if f.until > 0 && f.engine == results.EngineCluster {
		switch {
		case f.kubeconfig != "":
			return errors.New("--until: the state is read on the replay's trace clock, which only the local cluster's Kueue runs on (a cluster behind --kubeconfig keeps wall time)")
		case !f.keepCluster:
			return errors.New("--until leaves the local cluster in the state at that time for a snapshot: give --keep-cluster too")
		}
	}
	if err := f.sim.check(f.engine, cmd.Flags()); err != nil {
		return err
	}
	if v, here, err := pickKueue(f.kueueVersion, f.engine); err != nil {
		return err
	} else if !here {
		return runThroughRelease(ctx, v, os.Args[1:], out, cmd.ErrOrStderr())
	}
	in := replay.Inputs{Seed: f.seed, Timeout: f.timeout, Out: out}
	if f.faults != "" {
		in.Asks = append(in.Asks, replay.Faults)
	}
	if f.kubeconfig != "" {
		in.Asks = append(in.Asks, replay.RemoteCluster)
	}
	if err := replay.Check(f.engine, &in); err != nil {
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
	in.Spec, in.Mapping, in.OutDir = spec, render.DefaultMapping(), f.out
	if f.mapping != "" {
		if in.Mapping, err = render.LoadMapping(f.mapping, render.DefaultRegistry()); err != nil {
			return err
		}
	}
	if f.faults != "" {
		if in.Faults, err = fault.Load(f.faults); err != nil {
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
	in.TracePath = f.tracePath
	in.Progress = cmd.ErrOrStderr()
	if fd, ok := in.Progress.(interface{ Fd() uintptr }); ok {
		in.TTY = term.IsTerminal(int(fd.Fd()))
	}
	var eng replay.Engine
	if f.engine == results.EngineSim {
		defer tuneGCForSim()()
		se := f.sim.engine()
		se.Kueue.FeatureGates = f.featureGates
		if err := sim.CheckKueueConfig(se.Kueue); err != nil {
			return fmt.Errorf("--feature-gates: %w", err)
		}
		eng = se
	} else {
		// The cluster engine replays the trace from memory: read it before the cluster starts.
		if in.Trace, err = trace.LoadWorkloads(ctx, f.tracePath, trace.Options{}); err != nil {
			return err
		}
		in.TraceName = f.tracePath
		ce, done, err := f.clusterEngine(cmd, spec)
		if err != nil {
			return err
		}
		defer done()
		eng = ce
	}
	res, err := replay.Run(ctx, eng, in)
	// Stopped there, not before it (a timeout, Ctrl-C), nor done before it.
	if f.until > 0 && f.engine == results.EngineCluster && res != nil && res.Summary.Incomplete != "" && res.Summary.TraceSec >= f.until.Seconds() {
		kc := f.kubeconfig
		if kc == "" {
			kc = "$(kueuelab cluster kubeconfig --name " + f.name + ")"
		}
		fmt.Fprintf(out, "the cluster holds the state at trace time %s: `kueuelab snapshot --kubeconfig %s --out DIR` reads it\n", f.until, kc)
	}
	return err
}

// clusterEngine readies the cluster side of a cluster-engine run: the local cluster (started if
// needed, stopped by done unless it was running or --keep-cluster), or the cluster behind
// --kubeconfig and its metrics.
func (f *runFlags) clusterEngine(cmd *cobra.Command, spec *rcluster.Spec) (eng *runner.Engine, done func(), err error) {
	ctx, out := cmd.Context(), cmd.OutOrStdout()
	eng = &runner.Engine{Cluster: runner.InProcess{Speedup: f.speedup, ClockTrace: f.clockTrace},
		StallTimeout: f.stall, Keep: f.keep, QPS: f.qps, UntilSec: f.until.Seconds()}
	done = func() {}
	if f.kubeconfig == "" {
		for _, fl := range []string{"agent", "kueue-metrics", "scheduler-metrics", "inexact"} {
			if cmd.Flags().Changed(fl) {
				return nil, nil, fmt.Errorf("--%s: only with --kubeconfig (the local cluster's agent and metrics are this process's own)", fl)
			}
		}
		// Kueue v0.19's defaults (waitForPodsReady on) in trace time, as a variant without
		// kueueConfig of an experiment runs them.
		kc := (&experiment.KueueConfig{FeatureGates: f.featureGates}).WithKueueDefaults(kueuever.MustLookup(tools.KueueVersion))
		cl, err := localCluster(ctx, f.name, spec, kc.Fields(), out)
		if err != nil {
			return nil, nil, err
		}
		eng.Cluster.Timers, eng.Cluster.Kueue = kc.Timers(), kc.Meta()
		if len(cl.Started) > 0 && !f.keepCluster {
			done = func() {
				fmt.Fprintf(out, "stopping the local cluster %s this run started (--keep-cluster leaves it running)\n", f.name)
				if err := localcluster.Down(context.Background(), "", f.name, true, io.Discard); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "cluster down: %v\n", err)
				}
			}
		} else {
			fmt.Fprintf(out, "the local cluster %s stays running: stop it with `kueuelab cluster down --name %s`\n", f.name, f.name)
		}
		eng.Cluster.REST, eng.Cluster.Local, eng.Cluster.Prune = cl.Config, cl.State, true
		return eng, done, nil
	}
	if spec.Scheduler != nil {
		return nil, nil, fmt.Errorf("%s: the scheduler section sets up the local cluster's kube-scheduler; the cluster behind --kubeconfig keeps its own (`kueuelab cluster install --kubeconfig` shows it): leave the section out to run there", f.specPath)
	}
	if eng.AgentInCluster, err = f.remote.agentInClusterMode(); err != nil {
		return nil, nil, err
	}
	if eng.Cluster.REST, err = cluster.RESTConfig(f.kubeconfig); err != nil {
		return nil, nil, err
	}
	if err := cluster.CheckInstalled(ctx, eng.Cluster.REST); err != nil {
		return nil, nil, err
	}
	if eng.AgentInCluster {
		return eng, done, nil
	}
	r, err := connectRemote(ctx, eng.Cluster.REST, &f.remote, out)
	if err != nil {
		return nil, nil, err
	}
	eng.Cluster.KueueMetrics, eng.Cluster.SchedulerMetrics, eng.Cluster.Timers, eng.Cluster.Kueue = r.kueue, r.scheduler, r.timers, r.meta
	return eng, r.close, nil
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
// objects instead of the default nodes, and Kueue with the given Configuration fields.
func localCluster(ctx context.Context, name string, spec *rcluster.Spec, kueue map[string]any, out io.Writer) (*localcluster.Cluster, error) {
	set := tools.Pinned()
	bin, err := tools.BinDir("", set)
	if err != nil {
		return nil, err
	}
	if _, err := tools.Locate(bin, set); err != nil {
		fmt.Fprintf(out, "%v\nbuilding the tools (once; about 40 minutes on 2 cores)\n", err)
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
	if kueue, err = spec.WithKueueResources(kueue); err != nil {
		return nil, err
	}
	return localcluster.Up(ctx, localcluster.Options{Name: name, BinDir: bin, Objects: objs, KueueConfig: kueue, Scheduler: spec.KubeSchedulerConfiguration(), Out: out})
}
