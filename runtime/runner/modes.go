package runner

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// The modes of a run, each chosen once from the Config: who drives the pods, what follows the
// control plane for the trace clock, and whether faults are injected. Run's phases call them
// without asking which one they have.

// podDriver is what drives the run's pods: the in-process agent or the cluster's agent Deployment.
type podDriver interface {
	// start starts driving the pods; errs reports a driver that stopped on its own, stop ends it.
	start(ctx context.Context, c client.Client) (errs <-chan error, stop func(), err error)
	// nodePower reads each node's power for the time series (nil: not known here).
	nodePower() func() map[string]float64
	// book records at the end of the run what only the driver knows: the energy of pods lost and
	// what faults cost each workload.
	book(p *plan, rec *results.Recorder, now float64)
}

func newPodDriver(a Agent) podDriver {
	if a == nil {
		return deploymentAgent{}
	}
	return inProcessAgent{a: a}
}

// inProcessAgent runs Config.Agent next to the runner.
type inProcessAgent struct{ a Agent }

// start runs the agent on a context of its own: it outlives the run's, so the pods the cleanup
// deletes are still seen.
func (d inProcessAgent) start(context.Context, client.Client) (<-chan error, func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.a.Run(ctx); err != nil {
			errs <- err
		}
	}()
	return errs, func() { cancel(); wg.Wait() }, nil
}

func (d inProcessAgent) nodePower() func() map[string]float64 {
	return func() map[string]float64 { return d.a.Snapshot().NodePowerW }
}

func (d inProcessAgent) book(p *plan, rec *results.Recorder, now float64) {
	snap := d.a.Snapshot()
	recordLostEnergy(snap.LostEnergyJ, snap.LostBusyGPUSec, p, rec, now)
	recordFaultCost(snap.Faults, p, rec, now)
}

// deploymentAgent is the agent Deployment of charts/kueuelab-agent, which must be ready.
type deploymentAgent struct{}

func (deploymentAgent) start(ctx context.Context, c client.Client) (<-chan error, func(), error) {
	return nil, func() {}, checkAgentDeployment(ctx, c)
}

func (deploymentAgent) nodePower() func() map[string]float64 { return nil }

func (deploymentAgent) book(*plan, *results.Recorder, float64) {}

// follower follows the control plane for the trace clock: on an event-driven clock it holds the
// clock while Kueue or kube-scheduler owe a step, fires Kueue's timers at their trace times and
// follows the local control plane's supervisor; a wall-time clock follows nothing.
type follower interface {
	// prepare sets the watcher's Kueue timers and queue view, before the watches start.
	prepare(w *watcher)
	// watching builds the settlers once the watches run.
	watching(ctx context.Context, w *watcher) error
	// start runs the settlers and the control-plane follower in bg.
	start(ctx context.Context, bg *sync.WaitGroup, evlog *results.EventLog)
	// controlPlane is the control-plane follower (nil: none).
	controlPlane() *controlPlane
	// meta adds the control plane's outages and restarts; report prints what went wrong reading
	// the components.
	meta(m *results.Meta)
	report(out io.Writer)
}

func newFollower(cfg *Config, sched kubernetes.Interface) follower {
	if !cfg.Clock.HoldsEnabled() {
		return wallClock{}
	}
	return &holdFollower{cfg: cfg, sched: sched}
}

// wallClock is the follower of a clock without holds.
type wallClock struct{}

func (wallClock) prepare(*watcher)                                          {}
func (wallClock) watching(context.Context, *watcher) error                  { return nil }
func (wallClock) start(context.Context, *sync.WaitGroup, *results.EventLog) {}
func (wallClock) controlPlane() *controlPlane                               { return nil }
func (wallClock) meta(*results.Meta)                                        {}
func (wallClock) report(io.Writer)                                          {}

// holdFollower follows the control plane for an event-driven clock.
type holdFollower struct {
	cfg *Config
	// sched reads kube-scheduler's unbound pods (nil without its metrics: the settler then waits
	// for a quiet period).
	sched    kubernetes.Interface
	settlers []*settler
	cp       *controlPlane
	kueue    *kueueclock.Follower // nil when Kueue keeps wall time
}

func (f *holdFollower) prepare(w *watcher) {
	if f.cfg.KueueClock == "" {
		w.timers = newTimers(f.cfg.KueueTimers, f.cfg.Clock)
	}
	if f.cfg.KueueMetrics != nil {
		w.queues = newQueueView(w.lqToCQ)
	}
}

func (f *holdFollower) watching(ctx context.Context, w *watcher) error {
	kcheck, scheck := settleWithout(w), settleWithout(w)
	if w.queues != nil {
		if err := w.seedQueues(ctx); err != nil {
			return err
		}
		kcheck = kueueCheck(f.cfg.KueueMetrics, w.queueCounts)
	}
	if f.sched != nil {
		pv, err := startPodView(ctx, f.sched)
		if err != nil {
			return err
		}
		scheck = schedulerCheck(f.cfg.SchedulerMetrics, pv, w.parked)
	}
	w.kueue = newSettler("kueue", f.cfg.Clock, simclock.KindKueue, settleInterval, kcheck)
	w.sched = newSettler("kube-scheduler", f.cfg.Clock, simclock.KindSchedule, settleInterval, scheck)
	f.settlers = []*settler{w.kueue, w.sched}
	if f.cfg.KueueClock != "" {
		fl, err := followKueue(ctx, f.cfg.KueueClock, f.cfg.Clock, w.kueue.poke, f.cfg.UntilSec > 0)
		if err != nil {
			return err
		}
		f.kueue = fl
		w.mu.Lock()
		w.kueueClock = fl
		w.mu.Unlock()
	}
	return nil
}

// followKueue makes the local Kueue run on the trace clock and checks that it does. At the end
// Kueue returns to wall time, or, frozen, stays on the trace clock where it stopped.
func followKueue(ctx context.Context, path string, clk *simclock.Clock, settled func(), frozen bool) (*kueueclock.Follower, error) {
	file, err := kueueclock.Open(path)
	if err != nil {
		return nil, err
	}
	fl := kueueclock.Attach(ctx, file, clk, settled)
	go func() {
		<-ctx.Done()
		if frozen {
			fl.Freeze()
		} else {
			fl.Detach()
		}
		_ = file.Close()
	}()
	if err := fl.WaitFollowing(ctx, kueueFollowTimeout); err != nil {
		return nil, fmt.Errorf("run: %w (a local cluster started by an older kueuelab: `kueuelab cluster down`, then run again)", err)
	}
	return fl, nil
}

// kueueFollowTimeout bounds how long a run waits for the local Kueue to take up the trace clock.
const kueueFollowTimeout = 30 * time.Second

func (f *holdFollower) start(ctx context.Context, bg *sync.WaitGroup, evlog *results.EventLog) {
	for _, s := range f.settlers {
		bg.Add(1)
		go func() { defer bg.Done(); s.run(ctx) }()
	}
	if f.kueue != nil {
		if cs, err := kubernetes.NewForConfig(f.cfg.REST); err == nil {
			bg.Add(1)
			go func() { defer bg.Done(); publishClock(ctx, cs, f.cfg.Clock, f.kueue.Epoch(), f.cfg.Keep) }()
		}
	}
	if f.cfg.ControlPlane != "" {
		f.cp = newControlPlane(f.cfg.ControlPlane, f.cfg.Clock, evlog, f.cfg.Out)
		bg.Add(1)
		go func() { defer bg.Done(); f.cp.run(ctx) }()
	}
}

func (f *holdFollower) controlPlane() *controlPlane { return f.cp }

func (f *holdFollower) meta(m *results.Meta) {
	if f.cp != nil {
		f.cp.meta(m)
	}
	if f.kueue != nil {
		st := f.kueue.Stats()
		m.KueueClock = &results.KueueClockMeta{Timers: st.Timers, LateAcks: st.LateAcks, LongestAckSec: st.LongestAck.Seconds(),
			WorkloadWaits: st.Seen, LateWorkloadWaits: st.LateSeen}
	}
}

func (f *holdFollower) report(out io.Writer) {
	for _, s := range f.settlers {
		if st := s.stats(); st.Errors > 0 {
			fmt.Fprintf(out, "%s settling: %d of %d reads failed (last: %s)\n", s.name, st.Errors, st.Polls, st.LastErr)
		}
	}
}

// newSchedulerView waits, when kube-scheduler's metrics can be read and the spec has nodes, until
// the scheduler's cache holds them, and returns the client of its views (nil without metrics).
func newSchedulerView(ctx context.Context, src MetricsSource, rc *rest.Config, hasNodes bool, nodesChanged time.Time) (kubernetes.Interface, error) {
	if src == nil {
		return nil, nil
	}
	// One client for kube-scheduler's views: the node wait here and the unbound-pod view later.
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if hasNodes {
		// kube-scheduler refreshes its cache-size gauge once a second: a reading taken sooner
		// after the nodes changed may predate them and match by coincidence (old nodes being
		// deleted as new ones come), and the scheduler then places every pod on whichever of two
		// new nodes it already knows.
		var fresh time.Time
		if time.Since(nodesChanged) < 5*time.Second {
			fresh = time.Now().Add(schedulerGaugePeriod)
		}
		if err := waitSchedulerNodes(ctx, src, cs, fresh, time.Minute); err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
	}
	return cs, nil
}

// faultMode is whether the run injects faults.
type faultMode interface {
	// prepare builds the injector and checks that the cluster can play the faults, before the
	// watches start.
	prepare(ctx context.Context, r *run) error
	// watching gives the injector the watches' cache to read.
	watching(c cache.Cache)
	// arm arms the injector's first alarm, before the clock starts.
	arm()
	// start runs the injector in bg.
	start(ctx context.Context, bg *sync.WaitGroup)
	// finish restores what the faults changed and records them in the summary.
	finish(m *results.Meta) error
}

func newFaultMode(spec *fault.Spec) faultMode {
	if spec.Empty() {
		return noFaults{}
	}
	return &injecting{spec: spec}
}

type noFaults struct{}

func (noFaults) prepare(context.Context, *run) error    { return nil }
func (noFaults) watching(cache.Cache)                   {}
func (noFaults) arm()                                   {}
func (noFaults) start(context.Context, *sync.WaitGroup) {}
func (noFaults) finish(*results.Meta) error             { return nil }

// injecting injects the faults of spec (faults.go).
type injecting struct {
	spec *fault.Spec
	inj  *injector
}

func (f *injecting) prepare(ctx context.Context, r *run) error {
	inj, err := newInjector(f.spec, r.plan, r.clk, r.c, r.rec, r.cfg.OutDir)
	if err != nil {
		return err
	}
	if err := inj.checkStage(ctx, f.spec); err != nil {
		_, _ = inj.close()
		return err
	}
	f.inj, r.w.faults = inj, inj
	return nil
}

func (f *injecting) watching(c cache.Cache) { f.inj.reader = c }

func (f *injecting) arm() { f.inj.arm() }

func (f *injecting) start(ctx context.Context, bg *sync.WaitGroup) {
	bg.Add(1)
	go func() { defer bg.Done(); f.inj.run(ctx) }()
}

func (f *injecting) finish(m *results.Meta) error {
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	f.inj.restore(rctx)
	cancel()
	fm, err := f.inj.close()
	m.Faults = &fm
	return err
}
