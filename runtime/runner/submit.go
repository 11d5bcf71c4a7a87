package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// submitter is the pacing loop: one goroutine sleeps until the next workload is due and hands it
// to a few workers that create its objects through a client-side rate limiter. Create calls go
// through admission webhooks and take tens to hundreds of milliseconds on a loaded control
// plane, so one synchronous goroutine would fall minutes behind a bursty trace at high speedup;
// the workers keep submissions on time while the limiter bounds the rate. Nothing is handed out
// before its due time.
type submitter struct {
	c       client.Client
	plan    *plan
	rec     *results.Recorder
	clk     *simclock.Clock
	lim     *rate.Limiter
	trials  *trials
	seed    int64
	workers int

	mu          sync.Mutex
	objs        []client.Object // every object created, for cleanup
	n           int
	first, last time.Time
	maxLag      time.Duration
}

func newSubmitter(c client.Client, p *plan, rec *results.Recorder, clk *simclock.Clock, qps float64, burst int, seed int64) *submitter {
	return &submitter{c: c, plan: p, rec: rec, clk: clk, lim: rate.NewLimiter(rate.Limit(qps), burst), trials: newTrials(), seed: seed,
		workers: max(1, min(16, int(qps/5)))}
}

func (s *submitter) run(ctx context.Context) {
	work := make(chan func(), 1024)
	var wg sync.WaitGroup
	for range s.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				if ctx.Err() == nil {
					f()
				}
			}
		}()
	}
	defer wg.Wait()
	defer close(work)
	hand := func(f func()) bool {
		select {
		case work <- f:
			return true
		case <-ctx.Done():
			return false
		}
	}
	items := s.plan.items
	next := 0
	for {
		var due chan struct{}
		waitCtx, stopWait := context.WithCancel(ctx)
		if next < len(items) {
			due = make(chan struct{})
			go func(t float64) {
				if s.clk.Wait(waitCtx, t) == nil {
					close(due)
				}
			}(items[next].offset)
		}
		select {
		case <-ctx.Done():
			stopWait()
			return
		case <-s.trials.wake:
			stopWait()
			for _, id := range s.trials.takePending() {
				if !hand(func() { s.createTrials(ctx, id) }) {
					return
				}
			}
		case <-due:
			stopWait()
			now, handed := s.clk.Now(), time.Now()
			for next < len(items) && items[next].offset <= now {
				it := items[next]
				if !hand(func() { s.submit(ctx, it, handed) }) {
					return
				}
				next++
			}
		}
	}
}

// submit creates a workload's objects; handed is the wall time it came due. A Kueue Workload
// is owed for each object a Kueue integration manages (the plan's owners), so each such create
// places a hold on the trace clock that the watcher releases once Kueue has tried to admit it.
func (s *submitter) submit(ctx context.Context, it *item, handed time.Time) {
	// Submitted is when the first create call went out: Kueue may admit an experiment's first
	// trial before the last trial's create returns.
	at := s.clk.Now()
	var err error
	if it.exp != nil {
		if _, err = s.trials.add(it.id, it.exp, s.seed); err == nil {
			err = s.createTrialsErr(ctx, it.id)
		}
	} else {
		for _, o := range it.objects {
			key := ownerKey(kindOf(o), o.GetNamespace(), o.GetName())
			if _, ok := s.plan.owners[key]; !ok {
				key = ""
			}
			if err = s.create(ctx, o, key); err != nil {
				break
			}
		}
	}
	if ctx.Err() != nil && err != nil {
		return // interrupted: the workload stays unsubmitted (or partly submitted) and unfinished
	}
	now := time.Now()
	s.mu.Lock()
	if s.n == 0 {
		s.first = now
	}
	s.n++
	s.last = now
	s.maxLag = max(s.maxLag, now.Sub(handed))
	s.mu.Unlock()
	if err != nil {
		s.record(results.Event{T: at, Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
		return
	}
	s.record(results.Event{T: at, Workload: it.id, Type: results.EvSubmitted, Object: it.ns + "/" + topName(it)})
}

func topName(it *item) string {
	if it.exp != nil {
		return it.exp.Name
	}
	return it.objects[0].GetName()
}

func (s *submitter) createTrials(ctx context.Context, id string) {
	if err := s.createTrialsErr(ctx, id); err != nil && ctx.Err() == nil {
		// A trial that cannot be created can never finish: the experiment stays unfinished and
		// the reason is in the event log.
		s.record(results.Event{T: s.clk.Now(), Workload: id, Type: results.EvSubmitFailed, Message: err.Error()})
	}
}

func (s *submitter) createTrialsErr(ctx context.Context, id string) error {
	jobs, err := s.trials.next(id)
	for _, j := range jobs {
		if cerr := s.create(ctx, j, ownerKey("Job", j.Namespace, j.Name)); cerr != nil {
			return errors.Join(err, cerr)
		}
		s.record(results.Event{T: s.clk.Now(), Workload: id, Type: results.EvTrialCreated, Object: j.Namespace + "/" + j.Name})
	}
	return err
}

// create creates o; a non-empty owner is the key under which the watcher finds o's Kueue
// Workload, and the trace clock is held from the create call until Kueue has tried to admit it.
func (s *submitter) create(ctx context.Context, o client.Object, owner string) error {
	if err := s.lim.Wait(ctx); err != nil {
		return err
	}
	if owner != "" {
		s.clk.Hold(submitHold(owner))
	}
	if err := s.c.Create(ctx, o); err != nil {
		if owner != "" {
			s.clk.Release(submitHold(owner))
		}
		return fmt.Errorf("create %s %s/%s: %w", kindOf(o), o.GetNamespace(), o.GetName(), err)
	}
	s.mu.Lock()
	s.objs = append(s.objs, o)
	s.mu.Unlock()
	return nil
}

func (s *submitter) record(e results.Event) {
	// The only Record error is a failing event log, which Close reports at the end of the run.
	_, _ = s.rec.Record(e)
}

// stats returns the workloads submitted, the wall seconds from the first to the last submission
// and the worst lag behind schedule.
func (s *submitter) stats() (int, float64, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.last.Sub(s.first).Seconds(), s.maxLag.Seconds()
}

func (s *submitter) created() []client.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]client.Object(nil), s.objs...)
}
