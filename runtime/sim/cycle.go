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
}

func newCycler(loop *des.Loop, k scheduler, cycleSec func() float64, done func() float64, fail func(error)) *cycler {
	return &cycler{loop: loop, k: k, cycleSec: cycleSec, done: done, fail: fail, blocked: true}
}

// wake runs the waiting iteration's cycle if a queue has a head now.
func (c *cycler) wake() {
	if c.blocked && c.k.HasHeads() {
		c.blocked = false
		c.loop.After(c.cycleSec(), c.end)
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
	answered := c.done()
	c.writesSec += answered - c.loop.Now()
	c.loop.At(math.Max(answered, c.notBefore), c.iterate)
}
