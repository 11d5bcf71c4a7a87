// Package runner replays a trace on a cluster: it applies the cluster side of a spec, submits each
// workload's rendered objects at its submit time on the trace clock, plays Katib's part for HPO
// experiments, watches Kueue Workloads and pods, holds the trace clock while the control plane owes
// a step, and records every workload's life in results.
package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// AgentLabel selects the agent Deployment the Helm chart installs.
const AgentLabel = "app.kubernetes.io/name=kueuelab-agent"

// Agent is the simulation agent run in-process next to the runner (runtime/agent.Agent): the
// runner starts it, and reads its node power and lost energy through Snapshot.
type Agent interface {
	Run(ctx context.Context) error
	Snapshot() agent.Snapshot
}

// Config is one run.
type Config struct {
	REST *rest.Config
	// Trace is the trace in memory; TraceName labels the results.
	Trace     *trace.Trace
	TraceName string
	Spec      *rcluster.Spec
	// Mapping picks the kind per family (nil: render.DefaultMapping).
	Mapping render.Mapping
	// Clock is the trace clock (required): event-driven and shared with an in-process Agent, or
	// on wall time (simclock.Options.Disabled) when the agent runs in the cluster. NewLocal builds
	// clock, agent and settlers together.
	Clock *simclock.Clock
	// Timeout bounds the run's wall time after setup (0: none).
	Timeout time.Duration
	// StallTimeout ends a run in which no workload changed state and the trace clock did not move
	// for this much wall time while work was pending (default 5 minutes; negative: never).
	StallTimeout time.Duration
	// OutDir receives the results files (created if missing).
	OutDir string
	// Keep leaves the submitted objects on the cluster at the end.
	Keep bool
	// Prune deletes the cluster-side objects of other specs before applying this one (Kueue
	// queues, flavors and kueuelab's KWOK nodes): set for kueuelab's own local cluster only.
	Prune bool
	// QPS and Burst bound the runner's create calls (defaults 50 and 100).
	QPS   float64
	Burst int
	// Seed drives the placer's GPU-family choice and Katib's parameter sampling.
	Seed uint64
	// Agent, when set, runs in-process for the duration of the run; when nil the cluster must run
	// the agent Deployment of charts/kueuelab-agent (checked).
	Agent Agent
	// KueueMetrics and SchedulerMetrics read Kueue's and kube-scheduler's metrics, which the
	// runner compares with the API to know when they have caught up (nil: a shorter wait that
	// covers most steps, see settleWithout).
	KueueMetrics, SchedulerMetrics MetricsSource
	// KueueTimers are the local Kueue's wall-time settings, so their timers fire at their trace
	// times on the event-driven clock.
	KueueTimers KueueTimers
	// ControlPlane is the state dir of kueuelab's local cluster whose supervisor the run follows
	// ("": another cluster, not followed): while a component is down or not ready the trace clock
	// holds, restarts and outages are recorded, and a crash-looping component ends the run.
	ControlPlane string
	// SampleStep is the time series step in trace seconds (default 60).
	SampleStep float64
	// Faults are the faults to inject (nil: none; see faults.go).
	Faults *fault.Spec
	// Progress receives the progress display (nil: none); TTY selects the bar.
	Progress io.Writer
	TTY      bool
	// Out receives setup messages and the summary table (nil: discarded).
	Out io.Writer

	closers []func() error // run at the end of Run
}

// Result is what a run measured besides the results files.
type Result struct {
	Summary results.Summary
	// Submitted is the number of workloads whose creates went out; SubmitWallSec the wall time
	// from the first to the last submission.
	Submitted     int
	SubmitWallSec float64
	// SetupSec is the wall time of applying the cluster side and syncing watches.
	SetupSec float64
}

func (c *Config) check() error {
	var errs []error
	if c.REST == nil {
		errs = append(errs, errors.New("no rest config"))
	}
	if c.Trace == nil || len(c.Trace.Workloads) == 0 {
		errs = append(errs, errors.New("trace: no workloads"))
	}
	if c.Spec == nil {
		errs = append(errs, errors.New("no cluster spec"))
	}
	if c.Clock == nil {
		errs = append(errs, errors.New("no trace clock"))
	} else if c.Clock.HoldsEnabled() && c.Agent == nil {
		errs = append(errs, errors.New("clock: an event-driven clock needs the agent in this process; an agent in another process would not see it (use simclock.Options{Disabled: true})"))
	} else if !c.Clock.HoldsEnabled() && math.IsInf(c.Clock.MaxRate(), 1) {
		errs = append(errs, errors.New("clock: a clock without holds runs on wall time and needs a finite speedup"))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("no output directory"))
	}
	if c.QPS == 0 {
		c.QPS = 50
	}
	if c.Burst == 0 {
		c.Burst = int(math.Max(1, 2*c.QPS))
	}
	if c.QPS < 0 || c.Burst < 0 {
		errs = append(errs, fmt.Errorf("qps %g / burst %d: must be > 0", c.QPS, c.Burst))
	}
	if c.Mapping == nil {
		c.Mapping = render.DefaultMapping()
	}
	if c.SampleStep == 0 {
		c.SampleStep = 60
		if c.Clock != nil && !c.Clock.HoldsEnabled() {
			c.SampleStep = math.Max(60, c.Clock.MaxRate()/10) // at most every 100 ms of wall time
		}
	}
	if c.SampleStep < 0 {
		errs = append(errs, fmt.Errorf("sample step %g: must be > 0", c.SampleStep))
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 5 * time.Minute
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return errors.Join(errs...)
}

// Run replays cfg.Trace. It returns the summary; the error wraps replay.ErrIncomplete when the run
// ended (timeout, stall, ctx cancelled) before every workload was terminal, and replay.ErrRejected when
// a workload was refused. Results files are written in every case where the run started.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	defer func() {
		for _, f := range cfg.closers {
			_ = f() // a diagnostic log: its loss must not fail the run
		}
	}()
	setupStart := time.Now()
	plan, err := newPlan(&cfg)
	if err != nil {
		return nil, err
	}
	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	rc := rest.CopyConfig(cfg.REST)
	rc.QPS, rc.Burst = float32(math.Max(100, 2*cfg.QPS)), int(math.Max(200, 4*cfg.QPS))
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("run: client: %w", err)
	}
	clk := cfg.Clock

	if n := len(plan.unrunnable); n > 0 {
		fmt.Fprintf(cfg.Out, "%d workloads cannot run on this cluster and are recorded as rejected, e.g. %s\n", n, plan.unrunnable[0])
	}
	fmt.Fprintf(cfg.Out, "applying cluster spec %s: %d objects\n", replay.SpecName(cfg.Spec), len(plan.clusterObjs))
	if err := cluster.ReplaceObjects(ctx, rc, plan.clusterObjs, cfg.Prune, cfg.Out); err != nil {
		return nil, fmt.Errorf("run: apply cluster spec: %w", err)
	}
	if err := waitClusterQueuesActive(ctx, c, plan.cluster.Queues, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	// On a cluster whose API server taints new nodes (TaintNodesByCondition, on by default; the
	// local cluster turns it off), a node the spec just added keeps node.kubernetes.io/not-ready
	// for a moment after it is Ready; the first submissions come at once on the event-driven
	// clock and would all be placed on the nodes that were there before.
	var nodes []*corev1.Node
	for _, o := range plan.clusterObjs {
		if n, ok := o.(*corev1.Node); ok {
			nodes = append(nodes, n)
		}
	}
	nodesChanged, err := cluster.WaitNodesSchedulable(ctx, rc, nodes, 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("run: the spec's nodes: %w", err)
	}
	// One client for kube-scheduler's views: the node wait here and the unbound-pod view below.
	var schedCS kubernetes.Interface
	if cfg.SchedulerMetrics != nil {
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		schedCS = cs
		if len(nodes) > 0 {
			// kube-scheduler refreshes its cache-size gauge once a second: a reading taken sooner
			// after the nodes changed may predate them and match by coincidence (old nodes being
			// deleted as new ones come), and the scheduler then places every pod on whichever of two
			// new nodes it already knows.
			var fresh time.Time
			if time.Since(nodesChanged) < 5*time.Second {
				fresh = time.Now().Add(schedulerGaugePeriod)
			}
			if err := waitSchedulerNodes(ctx, cfg.SchedulerMetrics, schedCS, fresh, time.Minute); err != nil {
				return nil, fmt.Errorf("run: %w", err)
			}
		}
	}

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	agentCtx, stopAgent := context.WithCancel(context.Background())
	var agentWG sync.WaitGroup
	agentErr := make(chan error, 1)
	defer func() {
		stopAgent()
		agentWG.Wait()
	}()
	if cfg.Agent != nil {
		agentWG.Add(1)
		go func() {
			defer agentWG.Done()
			if err := cfg.Agent.Run(agentCtx); err != nil {
				agentErr <- err
			}
		}()
	} else if err := checkAgentDeployment(ctx, c); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}

	evlog, err := results.CreateEventLog(filepath.Join(cfg.OutDir, results.EventsFile), time.Second)
	if err != nil {
		return nil, err
	}
	rec, err := results.NewRecorder(plan.records, evlog)
	if err != nil {
		return nil, errors.Join(err, evlog.Close())
	}
	series, err := results.CreateSeries(filepath.Join(cfg.OutDir, results.TimeSeriesFile))
	if err != nil {
		return nil, errors.Join(err, evlog.Close())
	}

	sub := newSubmitter(c, plan, rec, clk, cfg.QPS, cfg.Burst, cfg.Seed)
	w := newWatcher(plan, rec, clk, sub.trials)
	var inj *injector
	if !cfg.Faults.Empty() {
		if inj, err = newInjector(cfg.Faults, plan, clk, c, rec, cfg.OutDir); err != nil {
			return nil, errors.Join(err, evlog.Close(), series.Close())
		}
		if err := inj.checkStage(ctx, cfg.Faults); err != nil {
			_, _ = inj.close()
			return nil, errors.Join(err, evlog.Close(), series.Close())
		}
		w.faults = inj
	}
	var settlers []*settler
	if clk.HoldsEnabled() {
		w.timers = newTimers(cfg.KueueTimers, clk)
		if cfg.KueueMetrics != nil {
			w.queues = newQueueView(w.lqToCQ)
		}
	}
	w.resync = newResyncer(runCtx, c, clk, w.orphaned)
	informers, err := w.start(runCtx, rc, scheme)
	if err != nil {
		return nil, errors.Join(err, evlog.Close(), series.Close())
	}
	if inj != nil {
		inj.reader = informers
	}
	if clk.HoldsEnabled() {
		kcheck, scheck := settleWithout(w), settleWithout(w)
		if w.queues != nil {
			if err := w.seedQueues(runCtx); err != nil {
				return nil, errors.Join(err, evlog.Close(), series.Close())
			}
			kcheck = kueueCheck(cfg.KueueMetrics, w.queues)
		}
		if schedCS != nil {
			pv, err := startPodView(runCtx, schedCS)
			if err != nil {
				return nil, errors.Join(err, evlog.Close(), series.Close())
			}
			scheck = schedulerCheck(cfg.SchedulerMetrics, pv)
		}
		w.kueue = newSettler("kueue", clk, simclock.KindKueue, settleInterval, kcheck)
		w.sched = newSettler("kube-scheduler", clk, simclock.KindSchedule, settleInterval, scheck)
		settlers = []*settler{w.kueue, w.sched}
	}
	res := &Result{SetupSec: time.Since(setupStart).Seconds()}

	var bg sync.WaitGroup
	for _, s := range settlers {
		bg.Add(1)
		go func() { defer bg.Done(); s.run(runCtx) }()
	}
	var cp *controlPlane
	if cfg.ControlPlane != "" && clk.HoldsEnabled() {
		cp = newControlPlane(cfg.ControlPlane, clk, evlog, cfg.Out)
		bg.Add(1)
		go func() { defer bg.Done(); cp.run(runCtx) }()
	}
	clk.Start(runCtx)
	if cfg.Timeout > 0 {
		var cancelT context.CancelFunc
		runCtx, cancelT = context.WithTimeout(runCtx, cfg.Timeout)
		defer cancelT()
	}
	bg.Add(2)
	go func() { defer bg.Done(); sub.run(runCtx) }()
	if inj != nil {
		bg.Add(1)
		go func() { defer bg.Done(); inj.run(runCtx) }()
	}
	smp := &sampler{plan: plan, cache: informers, clk: clk, out: series, step: cfg.SampleStep}
	if cfg.Agent != nil {
		smp.nodePower = func() map[string]float64 { return cfg.Agent.Snapshot().NodePowerW }
	}
	go func() { defer bg.Done(); smp.run(runCtx) }()

	var prog *results.Progress
	if cfg.Progress != nil {
		prog = results.NewProgress(cfg.Progress, len(plan.records), cfg.TTY, 10*time.Second)
	}
	incomplete, loopErr := waitDone(runCtx, ctx, &cfg, rec, prog, clk, agentErr, w.loop, cp)
	clk.Stop()
	cancelRun()
	bg.Wait()
	if prog != nil {
		prog.Done(results.Status{Counts: rec.Counts(), TraceSec: clk.Now()})
	}
	ss := sub.stats()
	res.Submitted, res.SubmitWallSec = ss.Submitted, ss.WallSec

	if cfg.Agent != nil {
		snap := cfg.Agent.Snapshot()
		recordLostEnergy(snap.LostEnergyJ, plan, rec, clk.Now())
		recordFaultCost(snap.Faults, plan, rec, clk.Now())
	}
	var faultErr error
	recs := rec.Records()
	meta := clockMeta(clk)
	if inj != nil {
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		inj.restore(rctx)
		cancel()
		fm, err := inj.close()
		meta.Faults, faultErr = &fm, err
	}
	meta.Trace, meta.Cluster, meta.Engine = cfg.TraceName, replay.SpecName(cfg.Spec), results.EngineCluster
	meta.GPUCapacity, meta.Incomplete = plan.cluster.GPUCapacity, incomplete
	meta.LateSteps, meta.LateMaxSec, meta.LateWorst = w.lateness()
	meta.Resyncs = w.resync.count()
	meta.SubmitRetries, meta.Rejected, meta.FirstRejection = ss.Retries, ss.Rejected+len(plan.unrunnable), ss.FirstReject
	if meta.FirstRejection == "" && len(plan.unrunnable) > 0 {
		meta.FirstRejection = plan.unrunnable[0]
	}
	meta.States = rec.Counts().States
	if cp != nil {
		cp.meta(&meta)
	}
	cs := clk.Stats()
	if cs.Placed > 0 {
		fmt.Fprintf(cfg.Out, "trace clock: %d jumps over %.0f trace s; held %.1fs of %.1fs wall by %d holds while the control plane owed a step (%s); %d reached their limit %v\n",
			cs.Jumps, cs.Jumped, cs.Held.Seconds(), meta.WallSec, cs.Placed, byKind(cs.ByKind), cs.ExpiredTotal(), cs.Expired)
		if len(cs.FirstExpired) > 0 {
			fmt.Fprintf(cfg.Out, "holds that reached their limit (the first %d): %s\n", len(cs.FirstExpired), strings.Join(cs.FirstExpired, "; "))
		}
	}
	if meta.Outages > 0 || len(meta.Restarts) > 0 {
		var rs []string
		for _, k := range slices.Sorted(maps.Keys(meta.Restarts)) {
			rs = append(rs, fmt.Sprintf("%s %d", k, meta.Restarts[k]))
		}
		fmt.Fprintf(cfg.Out, "control plane: %d outages held the trace clock for %.1fs of wall time; restarts: %s\n",
			meta.Outages, meta.OutageWallSec, strings.Join(append(rs, "none")[:max(len(rs), 1)], ", "))
	}
	if meta.LateSteps > 0 {
		fmt.Fprintf(cfg.Out, "residual: %d steps observed after their trace time (worst %.3f trace s: %s)\n", meta.LateSteps, meta.LateMaxSec, meta.LateWorst)
	}
	for _, s := range settlers {
		if st := s.stats(); st.Errors > 0 {
			fmt.Fprintf(cfg.Out, "%s settling: %d of %d reads failed (last: %s)\n", s.name, st.Errors, st.Polls, st.LastErr)
		}
	}
	var werr error
	res.Summary, werr = replay.Finish(replay.End{OutDir: cfg.OutDir, Records: recs, Meta: meta, Events: evlog, Loop: loopErr, Out: cfg.Out})
	werr = errors.Join(werr, series.Close(), faultErr)

	if !cfg.Keep {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := cleanup(cctx, c, sub.created()); err != nil {
			werr = errors.Join(werr, fmt.Errorf("cleanup: %w", err))
		}
		cancel()
	}
	if werr != nil {
		return res, werr
	}
	return res, replay.Outcome(meta, loopErr)
}

// settleInterval is how often a settler reads a component's metrics while it holds the clock.
const settleInterval = 2 * time.Millisecond

// settleWithout is the check used when a component's metrics cannot be read (a cluster that is not
// kueuelab's own): the component counts as caught up once the watcher has seen no change for a
// quiet period. Steps slower than that period are then recorded late (measured: LateSteps).
func settleWithout(w *watcher) func(ctx context.Context) (bool, string, error) {
	const quiet = 50 * time.Millisecond
	return func(context.Context) (bool, string, error) {
		since := time.Since(w.lastChange())
		return since >= quiet, fmt.Sprintf("last change %s ago", since.Round(time.Millisecond)), nil
	}
}

// clockMeta is the summary's account of the trace clock.
func clockMeta(clk *simclock.Clock) results.Meta {
	cs := clk.Stats()
	m := results.Meta{WallSec: clk.Wall().Seconds(), TraceSec: clk.Now(),
		HeldWallSec: cs.Held.Seconds(), Holds: cs.Placed, HoldsExpired: cs.ExpiredTotal(), Jumps: cs.Jumps, JumpedSec: cs.Jumped}
	if !math.IsInf(clk.MaxRate(), 1) {
		m.Speedup = results.Speedup(clk.MaxRate())
	}
	if len(cs.ByKind) > 0 {
		m.HeldByKindSec = make(map[string]float64, len(cs.ByKind))
		for k, d := range cs.ByKind {
			m.HeldByKindSec[string(k)] = d.Seconds()
		}
	}
	if len(cs.Expired) > 0 {
		m.ExpiredByKind = make(map[string]int, len(cs.Expired))
		for k, n := range cs.Expired {
			m.ExpiredByKind[string(k)] = n
		}
	}
	m.FirstExpired = cs.FirstExpired
	return m
}

// waitDone shows progress until every workload is terminal or the run must stop, and returns
// why the run is incomplete ("" when it is not), and the preemption loop that ended it, if one did.
func waitDone(runCtx, parent context.Context, cfg *Config, rec *results.Recorder, prog *results.Progress, clk *simclock.Clock,
	agentErr <-chan error, loop <-chan error, cp *controlPlane) (string, error) {
	var fatal <-chan error
	if cp != nil {
		fatal = cp.fatal
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	lastEvents, lastTrace, lastChange := -1, -1.0, time.Now()
	for {
		if rec.Pending() == 0 {
			return "", nil
		}
		select {
		case err := <-agentErr:
			return describe(rec, "the agent stopped: "+err.Error()), nil
		case err := <-fatal:
			return describe(rec, "the control plane failed: "+err.Error()), nil
		case err := <-loop:
			return describe(rec, err.Error()), err
		case <-runCtx.Done():
			why := "interrupted"
			if parent.Err() == nil && cfg.Timeout > 0 {
				why = fmt.Sprintf("timeout %s reached", cfg.Timeout)
			}
			return describe(rec, why), nil
		case <-t.C:
			now := clk.Now()
			if prog != nil {
				prog.Update(results.Status{Counts: rec.Counts(), TraceSec: now})
			}
			if ev := rec.Events(); ev != lastEvents || now != lastTrace {
				lastEvents, lastTrace, lastChange = ev, now, time.Now()
			} else if cfg.StallTimeout > 0 && time.Since(lastChange) >= cfg.StallTimeout {
				return describe(rec, stalled(rec, clk, cp, time.Since(lastChange))), nil
			}
		}
	}
}

// stalled diagnoses a run in which nothing happened for too long: which workloads are stuck in
// which state, what holds the clock, which components are unhealthy.
func stalled(rec *results.Recorder, clk *simclock.Clock, cp *controlPlane, quiet time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "stalled: no workload changed state and the trace clock stood at %.0f s for %s", clk.Now(), quiet.Round(time.Second))
	stuck := map[string][]string{}
	for _, r := range rec.Records() {
		if !r.Terminal() {
			stuck[r.State] = append(stuck[r.State], r.ID)
		}
	}
	for _, st := range results.States {
		if ids := stuck[st]; len(ids) > 0 {
			more := ""
			if len(ids) > 5 {
				ids, more = ids[:5], fmt.Sprintf(" and %d more", len(stuck[st])-5)
			}
			fmt.Fprintf(&b, "; %s: %s%s", st, strings.Join(ids, ", "), more)
		}
	}
	if act := clk.Active(); len(act) > 0 {
		fmt.Fprintf(&b, "; clock held by %v", act)
	}
	if cp != nil {
		if down := cp.unhealthy(); len(down) > 0 {
			fmt.Fprintf(&b, "; unhealthy: %s", strings.Join(down, ", "))
		}
	}
	return b.String()
}

func describe(rec *results.Recorder, why string) string {
	c := rec.Counts()
	var parts []string
	for _, st := range results.States {
		if n := c.States[st]; n > 0 && st != results.StateSucceeded && st != results.StateFailed {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return fmt.Sprintf("%s: %d of %d workloads did not finish (%s)", why, c.Total-c.Finished(), c.Total, strings.Join(parts, ", "))
}

// checkAgentDeployment looks for the chart's agent Deployment with a ready replica.
func checkAgentDeployment(ctx context.Context, c client.Client) error {
	var deps appsv1.DeploymentList
	sel, err := labelSelector(AgentLabel)
	if err != nil {
		return err
	}
	if err := c.List(ctx, &deps, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("look for the kueuelab agent Deployment (%s): %w", AgentLabel, err)
	}
	var found []string
	for _, d := range deps.Items {
		if d.Status.ReadyReplicas > 0 {
			return nil
		}
		found = append(found, d.Namespace+"/"+d.Name)
	}
	if len(found) > 0 {
		return fmt.Errorf("the kueuelab agent Deployment (%s) has no ready replica; pods would never finish", strings.Join(found, ", "))
	}
	return fmt.Errorf("no kueuelab agent on this cluster (no Deployment labelled %s): install charts/kueuelab-agent, or run without --kubeconfig to use the local cluster and the in-process agent", AgentLabel)
}

// kindOf names an object's kind (rendered objects carry their TypeMeta).
func kindOf(o runtime.Object) string { return o.GetObjectKind().GroupVersionKind().Kind }

// recordLostEnergy adds to each workload the energy of its pods deleted before they finished
// (evicted, preempted), which no pod's energy annotation reports. The agent keys it by pod
// namespace and the contract's workload id, which render sets to the trace's id verbatim on every
// pod template (trial Jobs copy it from the template).
func recordLostEnergy(lost map[string]float64, p *plan, rec *results.Recorder, now float64) {
	ids := make(map[string]string, len(p.items))
	for _, it := range p.items {
		ids[it.ns+"/"+it.id] = it.id
	}
	for _, k := range slices.Sorted(maps.Keys(lost)) { // sorted: events.jsonl is reproducible
		if id, ok := ids[k]; ok && lost[k] > 0 {
			// A log write error is kept by the log and surfaces at its Close, as for the watcher's events.
			_, _ = rec.Record(results.Event{T: now, Workload: id, Type: results.EvLostEnergy, EnergyJ: lost[k]})
		}
	}
}

// byKind formats the held time per hold kind, longest first.
func byKind(m map[simclock.Kind]time.Duration) string {
	kinds := slices.SortedFunc(maps.Keys(m), func(a, b simclock.Kind) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.1fs", k, m[k].Seconds())
	}
	return strings.Join(parts, ", ")
}
