package runner

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// RequeueBatchSec is Kueue's inadmissible-requeue batch period (v0.17 on, without the
// SchedulerLongRequeueInterval gate): a ClusterQueue or root Cohort notified that quota may have
// freed moves its inadmissible workloads back to its heaps this long after the first notification.
const RequeueBatchSec = 1.0

// requeueBatches checks that Kueue's inadmissible-requeue batches run at their trace times and
// holds the clock until they have. kueuelab's Kueue (patches/kueue-*-requeue-batch.patch) waits a
// period on its clock, which follows the trace clock (runtime/kueueclock), before each batch and
// publishes kueue_kueuelab_requeue_pending, 1 per ClusterQueue or root Cohort from its first
// notification until the batch starts. The Kueue settler reads it with
// every read of Kueue's queues: a batch seen waiting gets an alarm one batch period (trace) after
// the instant it was first seen — the clock stands still while Kueue handles the event that
// notified it, so that instant is the event's — and from the alarm on the Kueue settler holds the
// clock until Kueue has run the batch (and then until its queues agree again). A batch Kueue runs
// before its alarm ran early in trace time: counted, with how early, in the run's summary.
type requeueBatches struct {
	clk    *simclock.Clock
	period float64
	poke   func() // the Kueue settler's

	mu    sync.Mutex
	by    map[string]*requeueBatch
	ran   int
	early int
	// earliest is the largest lead of an early batch, in trace seconds.
	earliest float64
}

type requeueBatch struct {
	alarm *simclock.Alarm
	due   float64
	fired bool
	stop  chan struct{}
}

func newRequeueBatches(clk *simclock.Clock, period float64) *requeueBatches {
	return &requeueBatches{clk: clk, period: period, by: map[string]*requeueBatch{}}
}

// observe takes one read of the gauge (1 or 0 by "kind/name") and returns, for the settler, why a
// batch that is due has not run yet ("" when none).
func (b *requeueBatches) observe(pending map[string]float64) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clk.Now()
	var due []string
	for key, v := range pending {
		rb := b.by[key]
		switch {
		case v > 0 && rb == nil:
			rb = &requeueBatch{alarm: b.clk.NewAlarm("kueue-requeue", simclock.OrderTimer), due: now + b.period, stop: make(chan struct{})}
			b.by[key] = rb
			rb.alarm.Set(rb.due)
			go b.wait(key, rb)
		case v > 0 && rb.fired:
			due = append(due, fmt.Sprintf("%s's requeue batch due at %.3f", key, rb.due))
		case v == 0 && rb != nil:
			if !rb.fired {
				b.early++
				b.earliest = max(b.earliest, rb.due-now)
			}
			b.ran++
			close(rb.stop)
			rb.alarm.Stop()
			delete(b.by, key)
		}
	}
	sort.Strings(due)
	return strings.Join(due, "; ")
}

// wait holds the clock at the batch's trace time: the alarm stops it there, and the settler's poke
// takes the hold over before the alarm lets go.
func (b *requeueBatches) wait(key string, rb *requeueBatch) {
	select {
	case <-rb.stop:
		return
	case <-rb.alarm.C():
	}
	b.mu.Lock()
	if b.by[key] == rb {
		rb.fired = true
		if b.poke != nil {
			b.poke()
		}
	}
	b.mu.Unlock()
	rb.alarm.Done()
}

// stats are the batches run, how many ran before their trace time and the largest lead.
func (b *requeueBatches) stats() (ran, early int, earliestSec float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ran, b.early, b.earliest
}
