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
	clk     *traceClock
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

func newSubmitter(c client.Client, p *plan, rec *results.Recorder, clk *traceClock, qps float64, burst int, seed int64) *submitter {
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
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var due <-chan time.Time
		if next < len(items) {
			timer.Reset(time.Until(s.clk.due(items[next].offset)))
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-s.trials.wake:
			for _, id := range s.trials.takePending() {
				if !hand(func() { s.createTrials(ctx, id) }) {
					return
				}
			}
		case <-due:
			for next < len(items) && !s.clk.due(items[next].offset).After(time.Now()) {
				it := items[next]
				if !hand(func() { s.submit(ctx, it) }) {
					return
				}
				next++
			}
		}
	}
}

func (s *submitter) submit(ctx context.Context, it *item) {
	due := s.clk.due(it.offset)
	var err error
	if it.exp != nil {
		if _, err = s.trials.add(it.id, it.exp, s.seed); err == nil {
			err = s.createTrialsErr(ctx, it.id)
		}
	} else {
		for _, o := range it.objects {
			if err = s.create(ctx, o); err != nil {
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
	s.maxLag = max(s.maxLag, now.Sub(due))
	s.mu.Unlock()
	if err != nil {
		s.record(results.Event{T: s.clk.now(), Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
		return
	}
	s.record(results.Event{T: s.clk.now(), Workload: it.id, Type: results.EvSubmitted, Object: it.ns + "/" + topName(it)})
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
		s.record(results.Event{T: s.clk.now(), Workload: id, Type: results.EvSubmitFailed, Message: err.Error()})
	}
}

func (s *submitter) createTrialsErr(ctx context.Context, id string) error {
	jobs, err := s.trials.next(id)
	for _, j := range jobs {
		if cerr := s.create(ctx, j); cerr != nil {
			return errors.Join(err, cerr)
		}
		s.record(results.Event{T: s.clk.now(), Workload: id, Type: results.EvTrialCreated, Object: j.Namespace + "/" + j.Name})
	}
	return err
}

func (s *submitter) create(ctx context.Context, o client.Object) error {
	if err := s.lim.Wait(ctx); err != nil {
		return err
	}
	if err := s.c.Create(ctx, o); err != nil {
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
