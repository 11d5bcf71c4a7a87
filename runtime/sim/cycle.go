package sim

import (
	"math"

	"github.com/kueuelab/kueuelab/runtime/sim/des"
)

// Kueue's scheduler loop (pkg/util/wait.UntilWithBackoff): a cycle that admits nothing returns
// SlowDown (kueuelib's Cycle: keepGoing false), and the loop then backs off 1 ms, 2 ms, 4 ms, 8 ms,
// then 10 ms (the cap, 100 ms before v0.19) between cycle
// starts until a cycle admits again. The timer for an iteration's wait is armed before its cycle
// runs, from the previous cycle's signal (apimachinery's wait.BackoffUntil, not sliding), so a
// backoff takes effect one cycle late; the cycler keeps that order.
const (
	backoffInitialSec = 0.001
	backoffMaxSec     = 0.01
)

// scheduler is what the cycler drives: Kueue (kueuelib.Kueue) in a run, a fake in tests.
type scheduler interface {
	HasHeads() bool
	// Cycle runs a scheduling cycle; keepGoing is Kueue's signal to run the next one at once.
	Cycle() (keepGoing bool, err error)
}

// cycler plays Kueue's scheduler loop in virtual time. Each iteration of the loop arms its
// backoff timer, then runs a cycle as soon as a ClusterQueue has a head (Kueue's Heads blocks
// until then); the cycle computes for cycleSec() (asked when it starts), and its decisions are
// made, by Kueue's own schedule, at its end, after which done hands its writes on and says when
// the writes the cycle waits for are answered. The next iteration begins when the cycle, its
// writes and the timer are over.
type cycler struct {
	loop     *des.Loop
	k        scheduler
	cycleSec func() float64
	done     func() float64
	fail     func(error)
	// blocked: the iteration waits in Heads for a head.
	blocked bool
	// notBefore is when the backoff timer armed by this iteration fires.
	notBefore float64
	// backoff is the wait the next iteration arms (0 after a cycle that admitted).
	backoff float64
	// writesSec is the time the cycles waited for their own writes, in all.
	writesSec float64

	// Repeats. A cycle that admits nothing and writes nothing, run when nothing but the loop
	// itself has happened since the cycle before it, which also admitted and wrote nothing,
	// leaves Kueue as it found it: every later cycle is the same until something else happens
	// (a StrictFIFO queue's blocked head is tried every 10 ms for as long as it stays blocked: a
	// million cycles in 3 trace hours). skip runs none of those: it moves the loop's next
	// iteration to where it would have been, the last one that starts before anything else
	// happens, and counts the others as run.
	//
	// unchanged, if set, reports whether the cycle just run wrote nothing (asked before done);
	// queued is the number of workloads in the ClusterQueues' heaps. A cycle after which both
	// are as they were put every head it took back where it was (a StrictFIFO head that does not
	// fit), rather than aside (a BestEffortFIFO one, parked until the cluster changes).
	unchanged func() bool
	queued    func() int
	// heads describes the heads a cycle takes and Kueue's memory of trying them (the flavor
	// assigner resumes after the last flavor it tried): a cycle after which it is as it was
	// will be tried the same way again.
	heads func() string
	// limit, when > 0, is the trace time the run ends after: no skip goes past it.
	limit float64
	// skipped is the number of cycles skipped as repeats.
	skipped int64
	// sec is the duration of the cycle running, lastSec the one before's; quiet says that cycle
	// admitted and wrote nothing; runs and seq are the loop's counts of events run and scheduled
	// when it ended.
	sec, lastSec float64
	quiet        bool
	runs, seq    uint64
}

func newCycler(loop *des.Loop, k scheduler, cycleSec func() float64, done func() float64, fail func(error)) *cycler {
	return &cycler{loop: loop, k: k, cycleSec: cycleSec, done: done, fail: fail, blocked: true}
}

// wake runs the waiting iteration's cycle if a queue has a head now.
func (c *cycler) wake() {
	if c.blocked && c.k.HasHeads() {
		c.blocked = false
		c.sec = c.cycleSec()
		c.loop.After(c.sec, c.end)
	}
}

// iterate begins an iteration of the loop: it arms the backoff timer, then runs a cycle at once
// when a queue has a head, or waits for one.
func (c *cycler) iterate() {
	c.notBefore = c.loop.Now() + c.backoff
	if c.backoff > 0 {
		c.backoff = math.Min(2*c.backoff, backoffMaxSec)
	}
	c.blocked = true
	c.wake()
}

// end runs Kueue's scheduling cycle and schedules the next iteration.
func (c *cycler) end() {
	if !c.k.HasHeads() {
		// The heads this cycle would have taken are gone (their workloads finished or were
		// deleted meanwhile): Kueue's Heads would still be waiting.
		c.blocked = true
		return
	}
	queued, heads := -1, ""
	if c.queued != nil && c.heads != nil {
		queued, heads = c.queued(), c.heads()
	}
	keepGoing, err := c.k.Cycle()
	if err != nil {
		c.fail(err)
		return
	}
	if keepGoing {
		c.backoff = 0
	} else if c.backoff == 0 {
		c.backoff = backoffInitialSec
	}
	quiet := !keepGoing && c.unchanged != nil && c.queued != nil && c.heads != nil &&
		c.unchanged() && c.queued() == queued && c.k.HasHeads() && c.heads() == heads
	answered := c.done()
	c.writesSec += answered - c.loop.Now()
	next := math.Max(answered, c.notBefore)
	// Since the last cycle ended, only this iteration's two events ran and only this cycle's
	// end was scheduled: nothing else happened.
	alone := c.loop.Events() == c.runs+2 && c.loop.Scheduled() == c.seq+1
	if quiet && c.quiet && alone && c.sec == c.lastSec && answered == c.loop.Now() && c.backoff == backoffMaxSec {
		next = c.skip(next)
	}
	c.loop.At(next, c.iterate)
	c.quiet, c.lastSec = quiet, c.sec
	c.runs, c.seq = c.loop.Events(), c.loop.Scheduled()
}

// skip returns the start of the first iteration, from the one at start on, that does not end
// (its cycle, and the wait for its backoff timer) before the loop's next event or the limit,
// counting those it passes as run: the events of the loop up to the limit stay the same. It computes
// each iteration's times as iterate, wake and end do (the backoff at its cap, the cycle's
// duration the last one's, its writes none), so the iteration it returns starts at the very
// time it would have.
func (c *cycler) skip(start float64) float64 {
	t, ok := c.loop.Next()
	if !ok {
		return start // nothing else is to happen: the loop ends at the limit or never, as before
	}
	if c.limit > 0 && c.limit < t {
		t = c.limit
	}
	for {
		end := start + c.sec
		next := math.Max(end, start+c.backoff)
		if !(end < t && next < t) {
			return start
		}
		start = next
		c.skipped++
	}
}
