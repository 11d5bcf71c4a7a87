// Package sim is the sim engine: it replays a trace through Kueue v0.19.2's own admission code
// (runtime/sim/kueuelib) in a discrete-event loop over virtual time (runtime/sim/des), with no
// API server and no processes, and records the run in the same results files as the cluster
// engine (runtime/results).
//
// The loop plays the parts Kueue's scheduler depends on, one small role each:
//   - submitter (submit.go): at each workload's submit time, renders it with render (what run
//     would create), turns every job object into its Kueue Workload with the kind's own
//     GenericJob, and plays Katib's part for HPO experiments as the runner does;
//   - cycler (cycle.go): runs Kueue's scheduling cycle whenever it has heads, each cycle taking a
//     configurable virtual duration, behind Kueue's own 1–100 ms backoff when a cycle admits
//     nothing;
//   - lifecycle (lifecycle.go): what Kueue's workload and job controllers do with the scheduler's
//     decisions — delivers every Workload write to the workload controller's event handlers,
//     starts the pods of admitted workloads, stops evicted ones and releases their quota,
//     finishes workloads whose pods are done;
//   - pods (pods.go): the simplified kube-scheduler (runtime/sim/kubesched) that binds pods to
//     the spec's nodes, and the agent's physics engine (runtime/agent/engine) that advances
//     their work and energy from event to event;
//   - sampler (sample.go): the time series.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/des"
	"github.com/kueuelab/kueuelab/runtime/sim/kubesched"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// Config is one sim run.
type Config struct {
	// Trace is the trace in memory, or TracePath the trace file, which the sim then reads twice,
	// as it goes (workloads are rendered at their submission), so a trace of a million workloads
	// needs no more memory than the workloads alive at a time. TraceName labels the results
	// (default TracePath).
	Trace     *trace.Trace
	TracePath string
	TraceName string
	Spec      *rcluster.Spec
	// Mapping picks the kind per family (nil: render.DefaultMapping).
	Mapping render.Mapping
	// Seed drives the placer's GPU-family choice and the kube-scheduler's ties.
	Seed uint64
	// Kueue is the Kueue configuration (fair sharing, admission fair sharing).
	Kueue KueueConfig
	// Timing is how long the control plane takes for the steps the sim models.
	Timing Timing
	// ControlPlane is the control-plane model (nil: none, Kueue infinitely fast): Kueue's writes
	// wait for its client's tokens and are seen a write latency later, a cycle waits for its own
	// writes, and a cycle computes for the model's time instead of Timing.CycleSec. Its rate
	// limit, when it sets none, is Kueue's (Kueue.ClientConnection).
	ControlPlane *controlplane.Model
	// Scoring is the kube-scheduler's NodeResourcesFit scoring strategy; when its Type is empty,
	// the spec's (its scheduler section, render/cluster Spec.Scoring), as the local cluster's
	// kube-scheduler is configured from the same section.
	Scoring kubesched.Strategy
	// SampleStep is the time series step in trace seconds (0: at most 5000 samples over the
	// trace's submissions plus a day, and at least 60 s).
	SampleStep float64
	// MaxTraceSec stops the run at that trace time (0: when every workload is done).
	MaxTraceSec float64
	// StateOut, with MaxTraceSec, receives the run's state at MaxTraceSec (model/state: the
	// workloads alive then and those still to come, and the cluster spec), for a forecast or a
	// resumed run to start from.
	StateOut string
	// Resume starts the run from a state instead of an empty cluster (resume.go); the trace must
	// be in memory and hold the state's workloads and those to come.
	Resume *state.State
	// StopWhenAdmitted, when set, stops the run once each of these trace workloads has been
	// admitted (a forecast needs nothing after).
	StopWhenAdmitted []string
	// RecordWaits records Kueue's reasons a Workload does not fit (results.EvWaiting events).
	RecordWaits bool
	// Timeout bounds the run's wall time (0: none).
	Timeout time.Duration
	// WallClock reads the wall time the summary reports (nil: time.Now); tests fix it, so that
	// a run's files are byte-identical.
	WallClock func() time.Time
	// OutDir receives the results files (created if missing).
	OutDir string
	// Progress receives the progress display (nil: none); TTY selects the bar.
	Progress io.Writer
	TTY      bool
	// Out receives the summary table (nil: discarded).
	Out io.Writer
}

// Timing holds the durations the sim gives the control plane's steps, in trace seconds.
type Timing struct {
	// CycleSec is one scheduling cycle of Kueue: from taking the queues' heads to its decisions
	// (admissions, preemptions) being written. Kueue tries one head per ClusterQueue per cycle, so
	// a deep queue waits CycleSec (or Kueue's backoff, when cycles admit nothing) per position.
	CycleSec float64
	// PodStartSec is from a workload's admission to its pods being placed and running (job and
	// operator controllers, kube-scheduler, kubelet).
	PodStartSec float64
}

// DefaultTiming is the timing of the local cluster engine, measured (see the sim's docs).
var DefaultTiming = Timing{CycleSec: 0.01, PodStartSec: 0}

// Result is what a run measured besides the results files.
type Result struct {
	Summary results.Summary
	// Events is the number of loop events run; Cycles the scheduling cycles.
	Events uint64
	Cycles int64
	// KueueWrites is the number of writes through Kueue's client and WaitedSec their total wait
	// for its tokens (0 without a control-plane model).
	KueueWrites int64
	WaitedSec   float64
	// CycleWritesSec is the time the scheduling cycles waited for their own writes, in all.
	CycleWritesSec float64
	// WallSec is the run's wall time, setup included.
	WallSec float64
}

func (c *Config) check() error {
	var errs []error
	switch {
	case (c.Trace == nil) == (c.TracePath == ""):
		errs = append(errs, errors.New("give exactly one of a trace in memory and a trace file"))
	case c.Trace != nil && len(c.Trace.Workloads) == 0:
		errs = append(errs, errors.New("trace: no workloads"))
	}
	if c.TraceName == "" {
		c.TraceName = c.TracePath
	}
	if c.Spec == nil {
		errs = append(errs, errors.New("no cluster spec"))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("no output directory"))
	}
	if c.Mapping == nil {
		c.Mapping = render.DefaultMapping()
	}
	if c.Timing.CycleSec < 0 || c.Timing.PodStartSec < 0 || math.IsNaN(c.Timing.CycleSec+c.Timing.PodStartSec) {
		errs = append(errs, fmt.Errorf("timing %+v: durations must be ≥ 0", c.Timing))
	}
	if c.SampleStep < 0 || c.MaxTraceSec < 0 {
		errs = append(errs, fmt.Errorf("sample step %g, max trace time %g: must be ≥ 0", c.SampleStep, c.MaxTraceSec))
	}
	if err := c.Kueue.check(); err != nil {
		errs = append(errs, err)
	}
	if c.Spec != nil {
		if _, err := c.Kueue.withSpec(c.Spec); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ControlPlane != nil {
		if err := c.ControlPlane.Check(); err != nil {
			errs = append(errs, fmt.Errorf("control plane %s: %w", c.ControlPlane.Name, err))
		}
	}
	if c.StateOut != "" && c.MaxTraceSec <= 0 {
		errs = append(errs, errors.New("a state is written at the trace time limit: give MaxTraceSec"))
	}
	if c.Resume != nil && c.MaxTraceSec > 0 && c.MaxTraceSec < c.Resume.NowSec {
		errs = append(errs, fmt.Errorf("trace time limit %gs is before the resumed state's instant %gs", c.MaxTraceSec, c.Resume.NowSec))
	}
	if err := c.checkResume(); err != nil {
		errs = append(errs, err)
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return errors.Join(errs...)
}

// sim is one run's state. Everything runs on the loop's goroutine.
type sim struct {
	cfg   *Config
	loop  *des.Loop
	clk   des.Clock
	kq    *kueuelib.Kueue
	kueue *results.KueueMeta // the summary's account of kq
	rec   *results.Recorder
	evlog *results.EventLog

	plan   *plan
	items  []*item                       // trace workloads in submit order, nil once submitted
	next   int                           // the index in items of the next submission
	wls    map[types.NamespacedName]*kwl // live Kueue Workloads
	cyc    *cycler
	cp     *writes // Kueue's writes through the control-plane model; nil without one
	pods   *podRole
	lqc    *lqController // nil unless admission fair sharing is on
	sample *sampler

	created uint64 // Workloads created, for unique creation timestamps
	// lastResumed is the last creation timestamp a resumed Workload got, and lqs the LocalQueues
	// added once the resumed Workloads exist (resume.go).
	lastResumed time.Time
	lqs         []client.Object
	lostJ       map[string]float64
	failure     error             // the first internal error; stops the run
	done        int               // trace workloads done (or unrunnable)
	guard       results.LoopGuard // sees every event emitted: a preemption loop ends the run (lifecycle.go)
	// waitFor holds the workloads of Config.StopWhenAdmitted not admitted yet.
	waitFor map[string]bool
}

// Run replays cfg.Trace. It returns the summary; the error wraps replay.ErrIncomplete when the run
// ended (MaxTraceSec, timeout, ctx cancelled) before every workload was done. Results files are
// written in every case where the run started.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	wall := cfg.WallClock
	if wall == nil {
		wall = time.Now
	}
	t0 := wall()
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	release, err := kueuelib.SetFeatureGates(cfg.Kueue.FeatureGates)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	defer release()
	s, err := newSim(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer s.plan.src.close()
	series, err := results.CreateSeries(filepath.Join(cfg.OutDir, results.TimeSeriesFile))
	if err != nil {
		return nil, errors.Join(err, s.evlog.Close())
	}
	s.sample.out = series
	var prog *results.Progress
	if cfg.Progress != nil {
		prog = results.NewProgress(cfg.Progress, len(s.items), cfg.TTY, 10*time.Second)
	}
	runCtx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	incomplete := s.run(runCtx, prog)
	var stateErr error
	if cfg.StateOut != "" && incomplete != "" && s.loop.Now() == cfg.MaxTraceSec && s.failure == nil {
		stateErr = s.saveState()
	}
	if incomplete != "" && ctx.Err() == nil && runCtx.Err() != nil {
		incomplete = fmt.Sprintf("timeout %s reached: %s", cfg.Timeout, incomplete)
	}
	if prog != nil {
		prog.Done(results.Status{Counts: s.rec.Counts(), TraceSec: s.loop.Now()})
	}
	s.recordLostEnergy()
	meta := results.Meta{Engine: results.EngineSim, Trace: cfg.TraceName, Cluster: replay.SpecName(cfg.Spec),
		WallSec: wall().Sub(t0).Seconds(), TraceSec: s.loop.Now(), GPUCapacity: s.plan.cluster.GPUCapacity, PartitionedGPUs: s.plan.cluster.PartitionedGPUs, TimeSlicedGPUs: s.plan.cluster.TimeSlicedGPUs, Incomplete: incomplete,
		States: s.rec.Counts().States, Kueue: s.kueue}
	// The records are handed over, not copied: nothing records after this.
	s.items, s.plan.items, s.plan.records = nil, nil, nil
	recs, rerr := s.rec.Release()
	if rerr != nil {
		s.fail(rerr)
	}
	for i := range recs {
		if recs[i].State == results.StateRejected {
			if meta.Rejected++; meta.FirstRejection == "" {
				meta.FirstRejection = recs[i].ID + ": " + recs[i].Error
			}
		}
	}
	var loopErr error
	if errors.Is(s.failure, ErrPreemptionLoop) {
		loopErr, s.failure = s.failure, nil
	}
	res := &Result{Events: s.loop.Events(), Cycles: s.kq.Cycles() + s.cyc.skipped}
	if s.cp != nil {
		res.KueueWrites, res.WaitedSec = s.cp.client.Writes()
		res.CycleWritesSec = s.cyc.writesSec
	}
	var werr error
	res.Summary, werr = replay.Finish(replay.End{OutDir: cfg.OutDir, Records: recs, Meta: meta, Events: s.evlog, Loop: loopErr, Out: cfg.Out})
	werr = errors.Join(werr, series.Close())
	res.WallSec = wall().Sub(t0).Seconds()
	if s.failure != nil {
		return res, fmt.Errorf("sim: %w", s.failure)
	}
	werr = errors.Join(werr, stateErr)
	if werr != nil {
		return res, werr
	}
	return res, replay.Outcome(meta, loopErr)
}

func newSim(ctx context.Context, cfg *Config) (*sim, error) {
	p, err := newPlan(ctx, cfg)
	if err != nil {
		return nil, err
	}
	scheme, err := kueuelib.NewScheme()
	if err != nil {
		return nil, err
	}
	start := 0.0
	if cfg.Resume != nil {
		start = cfg.Resume.NowSec
	}
	loop := des.New(start)
	kc, err := cfg.Kueue.withSpec(cfg.Spec)
	if err != nil {
		return nil, err
	}
	kopts, err := kc.options()
	if err != nil {
		return nil, err
	}
	kopts.Scheme, kopts.Clock, kopts.Seed = scheme, loop.Clock(), cfg.Seed
	kq, err := kueuelib.New(kopts)
	if err != nil {
		return nil, err
	}
	objs, lqs := p.kueueObjs, []client.Object(nil)
	if cfg.Resume != nil {
		// The LocalQueues come after the restored Workloads (resume.go).
		objs, lqs = splitLocalQueues(objs)
	}
	if err := kq.AddObjects(objs); err != nil {
		return nil, fmt.Errorf("sim: cluster spec %s: %w", replay.SpecName(cfg.Spec), err)
	}
	if bad := kq.InactiveClusterQueues(); len(bad) > 0 {
		return nil, fmt.Errorf("sim: cluster spec %s: Kueue does not activate ClusterQueues %v (a flavor they name is missing?)", replay.SpecName(cfg.Spec), bad)
	}
	cat, err := hw.DefaultCatalog()
	if err != nil {
		return nil, err
	}
	scoring := cfg.Scoring
	if scoring.Type == "" {
		scoring = specScoring(cfg.Spec.Scoring())
	}
	pr, err := newPodRole(p.nodes, p.deviceClasses, p.resourceSlices, cat, scoring, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("sim: cluster spec %s: %w", replay.SpecName(cfg.Spec), err)
	}
	evlog, err := results.CreateEventLog(filepath.Join(cfg.OutDir, results.EventsFile), time.Second)
	if err != nil {
		return nil, err
	}
	rec, err := results.NewRecorder(p.records, evlog)
	if err != nil {
		return nil, errors.Join(err, evlog.Close())
	}
	s := &sim{cfg: cfg, loop: loop, clk: loop.Clock(), kq: kq, kueue: kueueMeta(kopts, cfg.Kueue.FeatureGates), rec: rec, evlog: evlog, plan: p, items: p.items, lqs: lqs,
		wls: map[types.NamespacedName]*kwl{}, pods: pr, lostJ: map[string]float64{}}
	for _, r := range p.records {
		if r.Terminal() {
			s.done++
		}
	}
	pr.sim = s
	s.guard.Horizon = s.horizon
	s.guard.Stall(p.records)
	if len(cfg.StopWhenAdmitted) > 0 {
		s.waitFor = map[string]bool{}
		for _, id := range cfg.StopWhenAdmitted {
			s.waitFor[id] = true
		}
	}
	qps, burst := cfg.Kueue.clientRate()
	s.kueue.ClientQPS, s.kueue.ClientBurst = qps, burst
	cycleSec := func() float64 { return cfg.Timing.CycleSec }
	if m := cfg.ControlPlane; m != nil {
		mm := m.WithClient(qps, burst)
		client, err := mm.NewClient()
		if err != nil {
			return nil, errors.Join(err, evlog.Close())
		}
		s.cp = newWrites(s, &mm, client)
		s.kueue.ControlPlane = &mm
		cycleSec = func() float64 { return mm.CycleSec(kq.Heads()) }
	}
	s.cyc = newCycler(loop, kq, cycleSec, s.drain, s.fail)
	s.cyc.unchanged, s.cyc.queued, s.cyc.heads = func() bool { return !kq.Store.HasChanges() }, kq.Queued, kq.HeadsState
	s.cyc.limit = cfg.MaxTraceSec
	s.sample = newSampler(s)
	s.lqc = newLQController(s)
	return s, nil
}

// run schedules the submissions and the first sample and runs the loop; it returns why the run
// is incomplete ("" when it is not).
func (s *sim) run(ctx context.Context, prog *results.Progress) string {
	// The submissions are queued one at a time, each by the one before, in places reserved now:
	// they run as if all were queued at the start, without a million-event queue.
	first, err := s.restore()
	if err != nil {
		s.fail(err)
	}
	s.submitFrom(first, s.loop.Reserve(len(s.items)-first))
	if s.cfg.StateOut != "" {
		// The run stops at the limit itself, so the state is the state then.
		s.loop.At(s.cfg.MaxTraceSec, func() {})
	}
	s.sample.start()
	s.lqc.start()
	total := len(s.plan.records)
	lastProg := time.Now()
	for n := 0; ; n++ {
		if s.failure != nil {
			if errors.Is(s.failure, ErrPreemptionLoop) {
				return describe(s.rec, s.failure.Error())
			}
			return describe(s.rec, "internal error: "+s.failure.Error())
		}
		if s.done >= total {
			return ""
		}
		if s.waitFor != nil && len(s.waitFor) == 0 {
			return describe(s.rec, "every workload the run waited for is admitted")
		}
		if n&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return describe(s.rec, "interrupted")
			}
			if prog != nil && time.Since(lastProg) > 100*time.Millisecond {
				lastProg = time.Now()
				prog.Update(results.Status{Counts: s.rec.Counts(), TraceSec: s.loop.Now()})
			}
		}
		if next, ok := s.loop.Next(); !ok {
			return describe(s.rec, "nothing left to happen (a workload that can never be admitted or placed)")
		} else if s.cfg.MaxTraceSec > 0 && next > s.cfg.MaxTraceSec {
			return describe(s.rec, fmt.Sprintf("trace time limit %gs reached", s.cfg.MaxTraceSec))
		}
		s.loop.Step()
		s.afterEvent()
	}
}

// submitFrom queues the submission of s.items[i] in the loop's place seq; when it runs, it queues
// the next one and lets go of the item (its Workloads hold it while they live).
func (s *sim) submitFrom(i int, seq uint64) {
	s.next = i
	if i >= len(s.items) {
		return
	}
	it := s.items[i]
	s.loop.AtReserved(it.offset, seq, func() {
		s.items[i] = nil
		s.submitFrom(i+1, seq+1)
		s.submit(it)
	})
}

// afterEvent brings the roles up to date with what the event changed: Kueue's writes reach its
// handlers and the lifecycle, the next pod completion is predicted again, and a blocked
// scheduler wakes when a queue has a head.
func (s *sim) afterEvent() {
	s.drain()
	s.lqc.notified()
	s.cyc.wake()
	// Events at one instant (a cycle's admissions, their pods) are many; the next completion is
	// predicted once, after the last of them.
	if next, ok := s.loop.Next(); !ok || next > s.loop.Now() {
		s.pods.reschedule()
	}
}

// fail records the first internal error; the run stops after the current event.
func (s *sim) fail(err error) {
	if s.failure == nil {
		s.failure = err
	}
}

func (s *sim) emit(e results.Event) {
	done, err := s.rec.Record(e) // a failing event log reports its error at Close
	if errors.Is(err, results.ErrSealed) {
		s.fail(err)
	}
	if done {
		s.done++
	}
	if e.Type == results.EvAdmitted && s.waitFor != nil {
		delete(s.waitFor, e.Workload)
	}
	if err := s.guard.Observe(&e); err != nil && s.failure == nil {
		s.loopFound(err, &e)
	}
}

// seal lets the recorder keep only the results row of a workload that is done with no Workload
// left and no lost energy still to book (recordLostEnergy): nothing records for it any more.
func (s *sim) seal(it *item) {
	if it.rec == nil || it.open > 0 || !it.rec.Terminal() {
		return
	}
	if _, ok := s.lostJ[it.id]; ok {
		return
	}
	if err := s.rec.Seal(it.id); err != nil {
		s.fail(err)
	}
	it.rec = nil
}

// recordLostEnergy books, per workload, the energy of its pods deleted before they finished, as
// the cluster engine's agent reports it at the end of a run.
func (s *sim) recordLostEnergy() {
	for _, id := range slices.Sorted(maps.Keys(s.lostJ)) {
		if j := s.lostJ[id]; j > 0 {
			s.emit(results.Event{T: s.loop.Now(), Workload: id, Type: results.EvLostEnergy, EnergyJ: j})
		}
	}
}

func describe(rec *results.Recorder, why string) string {
	c := rec.Counts()
	return fmt.Sprintf("%s: %d of %d workloads unfinished (%d never submitted, %d submitted but never admitted)",
		why, c.Total-c.Finished(), c.Total, c.Total-c.Submitted, c.Submitted-c.Admitted)
}

func keyOf(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// specScoring is a cluster spec's scoring strategy for the sim's kube-scheduler (the same fields:
// upstream's NodeResourcesFitArgs.scoringStrategy). Plugins a scheduler config file enables or
// disables besides NodeResourcesFit are not reflected (Spec.Scoring reads only that plugin's args).
func specScoring(st rcluster.ScoringStrategy) kubesched.Strategy {
	out := kubesched.Strategy{Type: st.Type}
	for _, r := range st.Resources {
		out.Resources = append(out.Resources, kubesched.ResourceSpec{Name: r.Name, Weight: r.Weight})
	}
	if r := st.RequestedToCapacityRatio; r != nil {
		for _, p := range r.Shape {
			out.Shape = append(out.Shape, kubesched.ShapePoint{Utilization: p.Utilization, Score: p.Score})
		}
	}
	return out
}
