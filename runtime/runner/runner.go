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
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	// UntilSec, when > 0, ends the replay at that trace time, once everything due then has
	// happened: nothing later is submitted or driven, and the objects stay as they are (it needs
	// Keep), so that a snapshot reads the cluster's state at that instant on the trace clock
	// the run publishes.
	UntilSec float64
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
	// Kueue, when known, is the Kueue the run replays on, for the summary.
	Kueue *results.KueueMeta
	// KueueTimers are the settings of a Kueue that runs on wall time (KueueClock ""), so that its
	// timers fire at their trace times on the event-driven clock.
	KueueTimers KueueTimers
	// ControlPlane is the state dir of kueuelab's local cluster whose supervisor the run follows
	// ("": another cluster, not followed): while a component is down or not ready the trace clock
	// holds, restarts and outages are recorded, and a crash-looping component ends the run.
	ControlPlane string
	// KueueClock is the local Kueue's trace-clock file (runtime/kueueclock; "": Kueue keeps wall
	// time and KueueTimers place its timers).
	KueueClock string
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
	switch {
	case c.UntilSec < 0 || math.IsNaN(c.UntilSec) || math.IsInf(c.UntilSec, 0):
		errs = append(errs, fmt.Errorf("until %g: want a trace time > 0", c.UntilSec))
	case c.UntilSec > 0 && !c.Keep:
		errs = append(errs, errors.New("until: the state at that time is the cluster's objects, which the run then leaves: it needs Keep"))
	case c.UntilSec > 0 && c.Clock != nil && !c.Clock.HoldsEnabled():
		errs = append(errs, errors.New("until: a clock on wall time (an agent in the cluster) does not stop at a trace time"))
	case c.UntilSec > 0 && c.KueueClock == "":
		errs = append(errs, errors.New("until: this cluster's Kueue keeps wall time, so the state it leaves is not on the replay's trace clock: kueuelab's local cluster only"))
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
	r, err := setUpCluster(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	// The pods are driven until the run has cleaned up after itself, whatever ends it.
	driverErr, stopDriver, err := r.driver.start(ctx, r.c)
	defer stopDriver()
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if err := r.openResults(); err != nil {
		return nil, err
	}
	if err := r.startWatching(runCtx); err != nil {
		return nil, r.closeResults(err)
	}
	res := &Result{SetupSec: time.Since(setupStart).Seconds()}
	incomplete, loopErr := r.replay(runCtx, ctx, cancelRun, driverErr)
	ss := r.sub.stats()
	res.Submitted, res.SubmitWallSec = ss.Submitted, ss.WallSec
	var meta results.Meta
	var werr error
	res.Summary, meta, werr = r.finish(incomplete, loopErr, ss)
	if werr != nil {
		return res, werr
	}
	return res, replay.Outcome(meta, loopErr)
}

// run is one replay's state from phase to phase of Run.
type run struct {
	cfg    *Config
	plan   *plan
	scheme *runtime.Scheme
	rc     *rest.Config
	c      client.Client
	clk    *simclock.Clock

	// The modes of the run, chosen once by setUpCluster.
	driver podDriver
	follow follower
	faults faultMode

	evlog  *results.EventLog
	rec    *results.Recorder
	series *results.SeriesWriter
	sub    *submitter
	w      *watcher
	cache  cache.Cache
}

// setUpCluster applies the cluster side of the spec and waits until Kueue, the nodes and
// kube-scheduler are ready for the first submission, and chooses the run's modes.
func setUpCluster(ctx context.Context, cfg *Config) (*run, error) {
	plan, err := newPlan(cfg)
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
	r := &run{cfg: cfg, plan: plan, scheme: scheme, rc: rc, c: c, clk: cfg.Clock,
		driver: newPodDriver(cfg.Agent), faults: newFaultMode(cfg.Faults)}

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
	sched, err := newSchedulerView(ctx, cfg.SchedulerMetrics, rc, len(nodes) > 0, nodesChanged)
	if err != nil {
		return nil, err
	}
	r.follow = newFollower(cfg, sched)
	return r, nil
}

// openResults creates the event log, the recorder and the time series.
func (r *run) openResults() error {
	evlog, err := results.CreateEventLog(filepath.Join(r.cfg.OutDir, results.EventsFile), time.Second)
	if err != nil {
		return err
	}
	rec, err := results.NewRecorder(r.plan.records, evlog)
	if err != nil {
		return errors.Join(err, evlog.Close())
	}
	series, err := results.CreateSeries(filepath.Join(r.cfg.OutDir, results.TimeSeriesFile))
	if err != nil {
		return errors.Join(err, evlog.Close())
	}
	r.evlog, r.rec, r.series = evlog, rec, series
	return nil
}

// closeResults closes what openResults opened, for a run that ends before it replays.
func (r *run) closeResults(err error) error {
	return errors.Join(err, r.evlog.Close(), r.series.Close())
}

// startWatching builds the submitter, starts the watches of Kueue Workloads and pods, readies the
// fault injector and the clock's followers.
func (r *run) startWatching(ctx context.Context) error {
	r.sub = newSubmitter(r.c, r.plan, r.rec, r.clk, r.cfg.QPS, r.cfg.Burst, r.cfg.Seed)
	r.w = newWatcher(r.plan, r.rec, r.clk, r.sub.trials)
	if err := r.faults.prepare(ctx, r); err != nil {
		return err
	}
	r.follow.prepare(r.w)
	r.w.resync = newResyncer(ctx, r.c, r.clk, r.w.orphaned)
	informers, err := r.w.start(ctx, r.rc, r.scheme)
	if err != nil {
		return err
	}
	r.cache = informers
	r.faults.watching(informers)
	return r.follow.watching(ctx, r.w)
}

// replay runs the clock and the run's goroutines (followers, submitter, injector, sampler) until
// every workload is terminal or the run must stop, then stops them. It returns why the run is
// incomplete ("" when it is not) and the preemption loop that ended it, if one did.
func (r *run) replay(runCtx, parent context.Context, cancelRun context.CancelFunc, driverErr <-chan error) (string, error) {
	var bg sync.WaitGroup
	r.follow.start(runCtx, &bg, r.evlog)
	smp := &sampler{plan: r.plan, cache: r.cache, clk: r.clk, out: r.series, step: r.cfg.SampleStep, nodePower: r.driver.nodePower()}
	// The first alarms are armed before the clock starts (submitter.arm): the clock jumps to the
	// earliest alarm armed, and one armed late would find it past its time.
	r.sub.arm()
	smp.arm()
	r.faults.arm()
	var until <-chan struct{}
	if r.cfg.UntilSec > 0 {
		// Fired, it keeps the clock at its time until the clock stops.
		a := r.clk.NewAlarm("until", simclock.OrderLimit)
		a.Set(r.cfg.UntilSec)
		until = a.C()
	}
	r.clk.Start(runCtx)
	if r.cfg.Timeout > 0 {
		var cancelT context.CancelFunc
		runCtx, cancelT = context.WithTimeout(runCtx, r.cfg.Timeout)
		defer cancelT()
	}
	bg.Add(2)
	go func() { defer bg.Done(); r.sub.run(runCtx) }()
	r.faults.start(runCtx, &bg)
	go func() { defer bg.Done(); smp.run(runCtx) }()

	prog := r.cfg.progress(len(r.plan.records))
	incomplete, loopErr := waitDone(runCtx, parent, r.cfg, r.rec, prog, r.clk, driverErr, r.w.loop, r.follow.controlPlane(), until)
	r.clk.Stop()
	cancelRun()
	bg.Wait()
	if prog != nil {
		prog.Done(results.Status{Counts: r.rec.Counts(), TraceSec: r.clk.Now()})
	}
	return incomplete, loopErr
}

// progress is the run's progress display (nil: none).
func (c *Config) progress(workloads int) *results.Progress {
	if c.Progress == nil {
		return nil
	}
	return results.NewProgress(c.Progress, workloads, c.TTY, 10*time.Second)
}

// finish books what the pod driver and the injector know, writes the results files and the
// run's account, and deletes what the run created (unless Keep). It returns the summary, the
// run's facts and the error of writing the results or cleaning up.
func (r *run) finish(incomplete string, loopErr error, ss submitStats) (results.Summary, results.Meta, error) {
	cfg, plan, clk := r.cfg, r.plan, r.clk
	r.driver.book(plan, r.rec, clk.Now())
	recs := r.rec.Records()
	meta := clockMeta(clk)
	faultErr := r.faults.finish(&meta)
	meta.Trace, meta.Cluster, meta.Engine = cfg.TraceName, replay.SpecName(cfg.Spec), results.EngineCluster
	meta.GPUCapacity, meta.PartitionedGPUs, meta.TimeSlicedGPUs, meta.Incomplete = plan.cluster.GPUCapacity, plan.cluster.PartitionedGPUs, plan.cluster.TimeSlicedGPUs, incomplete
	meta.LateSteps, meta.LateMaxSec, meta.LateWorst = r.w.lateness()
	meta.Resyncs = r.w.resync.count()
	meta.SubmitRetries, meta.Rejected, meta.FirstRejection = ss.Retries, ss.Rejected+len(plan.unrunnable), ss.FirstReject
	if meta.FirstRejection == "" && len(plan.unrunnable) > 0 {
		meta.FirstRejection = plan.unrunnable[0]
	}
	meta.States = r.rec.Counts().States
	meta.Kueue = cfg.Kueue
	r.follow.meta(&meta)
	reportClock(cfg.Out, clk, &meta)
	r.follow.report(cfg.Out)
	summary, werr := replay.Finish(replay.End{OutDir: cfg.OutDir, Records: recs, Meta: meta, Events: r.evlog, Loop: loopErr, Out: cfg.Out})
	werr = errors.Join(werr, r.series.Close(), faultErr)

	if !cfg.Keep {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := cleanup(cctx, r.c, r.sub.created()); err != nil {
			werr = errors.Join(werr, fmt.Errorf("cleanup: %w", err))
		}
		cancel()
	}
	return summary, meta, werr
}

// reportClock prints how the trace clock went: its holds, the control plane's outages and the
// steps seen late.
func reportClock(out io.Writer, clk *simclock.Clock, meta *results.Meta) {
	cs := clk.Stats()
	if cs.Placed > 0 {
		fmt.Fprintf(out, "trace clock: %d jumps over %.0f trace s; held %.1fs of %.1fs wall by %d holds while the control plane owed a step (%s); %d reached their limit %v\n",
			cs.Jumps, cs.Jumped, cs.Held.Seconds(), meta.WallSec, cs.Placed, byKind(cs.ByKind), cs.ExpiredTotal(), cs.Expired)
		if len(cs.FirstExpired) > 0 {
			fmt.Fprintf(out, "holds that reached their limit (the first %d): %s\n", len(cs.FirstExpired), strings.Join(cs.FirstExpired, "; "))
		}
	}
	if k := meta.KueueClock; k != nil {
		fmt.Fprintf(out, "kueue on the trace clock: %d stops at its timers (%d not acknowledged within the limit, longest wait %.1fs); %d waits for it to take in a Workload change (%d reached the limit)\n",
			k.Timers, k.LateAcks, k.LongestAckSec, k.WorkloadWaits, k.LateWorkloadWaits)
	}
	if meta.Outages > 0 || len(meta.Restarts) > 0 {
		var rs []string
		for _, k := range slices.Sorted(maps.Keys(meta.Restarts)) {
			rs = append(rs, fmt.Sprintf("%s %d", k, meta.Restarts[k]))
		}
		fmt.Fprintf(out, "control plane: %d outages held the trace clock for %.1fs of wall time; restarts: %s\n",
			meta.Outages, meta.OutageWallSec, strings.Join(append(rs, "none")[:max(len(rs), 1)], ", "))
	}
	if meta.LateSteps > 0 {
		fmt.Fprintf(out, "residual: %d steps observed after their trace time (worst %.3f trace s: %s)\n", meta.LateSteps, meta.LateMaxSec, meta.LateWorst)
	}
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
	agentErr <-chan error, loop <-chan error, cp *controlPlane, until <-chan struct{}) (string, error) {
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
		case <-until:
			return describe(rec, fmt.Sprintf("stopped at trace time %gs (until)", cfg.UntilSec)), nil
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
// (evicted, preempted), which no pod's energy annotation reports, and the compute those on
// time-sliced GPUs used. The agent keys it by pod
// namespace and the contract's workload id, which render sets to the trace's id verbatim on every
// pod template (trial Jobs copy it from the template).
func recordLostEnergy(lost, lostBusy map[string]float64, p *plan, rec *results.Recorder, now float64) {
	ids := make(map[string]string, len(p.items))
	for _, it := range p.items {
		ids[it.ns+"/"+it.id] = it.id
	}
	keys := maps.Clone(lost)
	maps.Copy(keys, lostBusy)
	for _, k := range slices.Sorted(maps.Keys(keys)) { // sorted: events.jsonl is reproducible
		if id, ok := ids[k]; ok && (lost[k] > 0 || lostBusy[k] > 0) {
			// A log write error is kept by the log and surfaces at its Close, as for the watcher's events.
			_, _ = rec.Record(results.Event{T: now, Workload: id, Type: results.EvLostEnergy, EnergyJ: lost[k], BusyGPUSec: lostBusy[k]})
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
