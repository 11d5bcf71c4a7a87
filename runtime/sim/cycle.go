package sim

import (
	"math"

	"sigs.k8s.io/kueue/pkg/util/wait"
)

// Kueue's scheduler loop (pkg/util/wait.UntilWithBackoff in v0.15.0): a cycle that admits nothing
// returns SlowDown, and the loop then backs off 1 ms, 2 ms, 4 ms, … up to 100 ms between cycle
// starts until a cycle admits again. The timer for a cycle's wait is armed before the cycle runs,
// from the previous cycle's signal (apimachinery's wait.BackoffUntil, not sliding), so a backoff
// takes effect one cycle late; the cycler keeps that order.
const (
	backoffInitialSec = 0.001
	backoffMaxSec     = 0.1
)

// cycler plays Kueue's scheduler loop in virtual time. Each iteration of the loop arms its
// backoff timer, then runs a cycle as soon as a ClusterQueue has a head (Kueue's Heads blocks
// until then); the cycle takes Timing.CycleSec, and its decisions are made, by Kueue's own
// schedule, at its end. The next iteration begins when both the cycle and the timer are over.
type cycler struct {
	s *sim
	// blocked: the iteration waits in Heads for a head.
	blocked bool
	// notBefore is when the backoff timer armed by this iteration fires.
	notBefore float64
	// backoff is the wait the next iteration arms (0 after a cycle that admitted).
	backoff float64
}

func newCycler(s *sim) *cycler { return &cycler{s: s, blocked: true} }

// wake runs the waiting iteration's cycle if a queue has a head now.
func (c *cycler) wake() {
	if c.blocked && c.s.kq.HasHeads() {
		c.blocked = false
		c.s.loop.After(c.s.cfg.Timing.CycleSec, c.end)
	}
}

// iterate begins an iteration of the loop: it arms the backoff timer, then runs a cycle at once
// when a queue has a head, or waits for one.
func (c *cycler) iterate() {
	now := c.s.loop.Now()
	c.notBefore = now + c.backoff
	if c.backoff > 0 {
		c.backoff = math.Min(2*c.backoff, backoffMaxSec)
	}
	c.blocked = true
	c.wake()
}

// end runs Kueue's scheduling cycle and schedules the next iteration.
func (c *cycler) end() {
	if !c.s.kq.HasHeads() {
		// The heads this cycle would have taken are gone (their workloads finished or were
		// deleted meanwhile): Kueue's Heads would still be waiting.
		c.blocked = true
		return
	}
	signal, err := c.s.kq.Cycle()
	if err != nil {
		c.s.fail(err)
		return
	}
	if signal == wait.KeepGoing {
		c.backoff = 0
	} else if c.backoff == 0 {
		c.backoff = backoffInitialSec
	}
	c.s.drain()
	c.s.loop.At(math.Max(c.s.loop.Now(), c.notBefore), c.iterate)
}
