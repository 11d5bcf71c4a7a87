package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/runtime/apiretry"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// submitter is the pacing loop: an alarm on the trace clock wakes it at the next submission, it
// holds the clock on every object it is about to create (so trace time stands at the submission
// until Kueue has the Workload), and hands the creates to a few workers that go through a
// client-side rate limiter. Create calls go through admission webhooks and take tens to hundreds
// of milliseconds on a loaded control plane; the workers keep several in flight.
//
// A create that fails for a transient reason (an unreachable webhook or API server, a timeout,
// throttling) is retried with backoff while its hold keeps the clock still; only a permanent
// rejection is final: the workload is recorded as rejected with the API's message.
type submitter struct {
	c       client.Client
	plan    *plan
	rec     *results.Recorder
	clk     *simclock.Clock
	lim     *rate.Limiter
	trials  *trials
	seed    uint64
	workers int
	// retryMax bounds one create's backoff between retries.
	retryMax time.Duration
	alarm    *simclock.Alarm // the next submission (arm)

	mu          sync.Mutex
	objs        []client.Object // every object created, for cleanup
	n           int
	retries     int
	rejected    int
	firstReject string
	first, last time.Time
}

// submitHoldLimit bounds a submit hold: a create retried through an outage of its webhook or API
// server holds the clock that long at most (the outage hold covers a longer one).
const submitHoldLimit = 2 * time.Minute

func submitHold(owner string) simclock.Key { return simclock.Key{Kind: simclock.KindSubmit, ID: owner} }
func trialsHold(id string) simclock.Key    { return simclock.Key{Kind: simclock.KindTrials, ID: id} }

func newSubmitter(c client.Client, p *plan, rec *results.Recorder, clk *simclock.Clock, qps float64, burst int, seed uint64) *submitter {
	tr := newTrials()
	if clk.HoldsEnabled() {
		tr.clk = clk
	}
	return &submitter{c: c, plan: p, rec: rec, clk: clk, lim: rate.NewLimiter(rate.Limit(qps), burst), trials: tr, seed: seed,
		workers: max(1, min(16, int(qps/5))), retryMax: 5 * time.Second}
}

// arm sets the alarm at the first submission. The runner arms every participant's first alarm
// before it starts the clock, which jumps to the earliest alarm armed: armed from run's goroutine,
// the first submission could be armed after the sampler's first rows, and the clock would already
// stand at them, with every submission due before made at once there.
func (s *submitter) arm() {
	s.alarm = s.clk.NewAlarm("submit", simclock.OrderSubmission)
	if len(s.plan.items) > 0 {
		s.alarm.Set(s.plan.items[0].offset)
	}
}

func (s *submitter) run(ctx context.Context) {
	if s.alarm == nil {
		s.arm()
	}
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
	alarm := s.alarm
	defer alarm.Stop()
	items := s.plan.items
	next := 0
	for {
		if next < len(items) {
			alarm.Set(items[next].offset)
		} else {
			alarm.Stop()
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
		case <-alarm.C():
			now := s.clk.Now()
			for next < len(items) && items[next].offset <= now {
				it := items[next]
				// Held before the alarm is re-armed: the clock stays at this submission until Kueue
				// has each Workload (or, for an experiment, until its first trials are created).
				s.holdItem(it)
				if !hand(func() { s.submit(ctx, it, now) }) {
					return
				}
				next++
			}
		}
	}
}

// holdItem places the holds that cover an item's creates.
func (s *submitter) holdItem(it *item) {
	if it.exp != nil {
		s.clk.HoldFor(trialsHold(it.id), submitHoldLimit)
		return
	}
	for _, o := range it.objects {
		key := ownerKey(kindOf(o), o.GetNamespace(), o.GetName())
		if _, ok := s.plan.owners[key]; ok {
			s.clk.HoldFor(submitHold(key), submitHoldLimit)
		}
	}
}

// submit creates a workload's objects at trace time at (the item's due time: the clock stood
// still since).
func (s *submitter) submit(ctx context.Context, it *item, at float64) {
	var err error
	if it.exp != nil {
		if _, err = s.trials.add(it.id, it.exp, s.seed); err == nil {
			err = s.createTrialsErr(ctx, it.id)
		}
		s.trials.created(it.id)
	} else {
		for i, o := range it.objects {
			key := ownerKey(kindOf(o), o.GetNamespace(), o.GetName())
			if _, ok := s.plan.owners[key]; !ok {
				key = ""
			}
			if err = s.create(ctx, o, key); err != nil {
				// The objects after the failed one are never created: their holds end here.
				for _, rest := range it.objects[i+1:] {
					s.clk.Release(submitHold(ownerKey(kindOf(rest), rest.GetNamespace(), rest.GetName())))
				}
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
	if err != nil {
		s.reject(it.id, err)
	}
	s.mu.Unlock()
	if err != nil {
		s.record(results.Event{T: at, Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
		return
	}
	s.record(results.Event{T: at, Workload: it.id, Type: results.EvSubmitted, Object: it.ns + "/" + topName(it)})
}

// reject counts a permanent rejection; s.mu is held.
func (s *submitter) reject(id string, err error) {
	s.rejected++
	if s.firstReject == "" {
		s.firstReject = id + ": " + err.Error()
	}
}

func topName(it *item) string {
	if it.exp != nil {
		return it.exp.Name
	}
	return it.objects[0].GetName()
}

func (s *submitter) createTrials(ctx context.Context, id string) {
	err := s.createTrialsErr(ctx, id)
	s.trials.created(id)
	if err != nil && ctx.Err() == nil {
		// A trial that cannot be created can never finish: the experiment is rejected and the
		// reason is in the event log.
		s.mu.Lock()
		s.reject(id, err)
		s.mu.Unlock()
		s.record(results.Event{T: s.clk.Now(), Workload: id, Type: results.EvSubmitFailed, Message: err.Error()})
	}
}

func (s *submitter) createTrialsErr(ctx context.Context, id string) error {
	jobs, err := s.trials.next(id)
	for _, j := range jobs {
		key := ownerKey("Job", j.Namespace, j.Name)
		s.clk.HoldFor(submitHold(key), submitHoldLimit)
		if cerr := s.create(ctx, j, key); cerr != nil {
			return errors.Join(err, cerr)
		}
		s.record(results.Event{T: s.clk.Now(), Workload: id, Type: results.EvTrialCreated, Object: j.Namespace + "/" + j.Name})
	}
	return err
}

// create creates o, retrying transient failures with backoff until it succeeds, is rejected or
// ctx ends. A non-empty owner is the key of o's submit hold (placed by the caller), which a failure
// releases: the watcher releases it on success, when Kueue's Workload appears.
func (s *submitter) create(ctx context.Context, o client.Object, owner string) error {
	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		if err := s.lim.Wait(ctx); err != nil {
			s.releaseOwner(owner)
			return err
		}
		obj := o.DeepCopyObject().(client.Object)
		err := s.c.Create(ctx, obj)
		if err == nil || (attempt > 0 && apierrors.IsAlreadyExists(err)) {
			// After a transient failure the earlier attempt may have gone through.
			s.mu.Lock()
			s.objs = append(s.objs, o)
			s.mu.Unlock()
			return nil
		}
		if ctx.Err() != nil || !apiretry.Transient(err) {
			s.releaseOwner(owner)
			if apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s/%s: %w (an earlier run's, left by --keep or --until: delete it, or start the local cluster afresh with `kueuelab cluster down --purge`)",
					kindOf(o), o.GetNamespace(), o.GetName(), err)
			}
			return fmt.Errorf("create %s %s/%s: %w", kindOf(o), o.GetNamespace(), o.GetName(), err)
		}
		s.mu.Lock()
		s.retries++
		s.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			s.releaseOwner(owner)
			return fmt.Errorf("create %s %s/%s: %w (interrupted while retrying)", kindOf(o), o.GetNamespace(), o.GetName(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, s.retryMax)
	}
}

func (s *submitter) releaseOwner(owner string) {
	if owner != "" {
		s.clk.Release(submitHold(owner))
	}
}

func (s *submitter) record(e results.Event) {
	// The only Record error is a failing event log, which Close reports at the end of the run.
	_, _ = s.rec.Record(e)
}

// submitStats is what the submitter did.
type submitStats struct {
	Submitted, Retries, Rejected int
	FirstReject                  string
	WallSec                      float64
}

func (s *submitter) stats() submitStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return submitStats{Submitted: s.n, Retries: s.retries, Rejected: s.rejected, FirstReject: s.firstReject, WallSec: s.last.Sub(s.first).Seconds()}
}

func (s *submitter) created() []client.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]client.Object(nil), s.objs...)
}
