package results

import (
	"errors"
	"fmt"
)

// Preemption loops. Kueue's preemption policies can chase each other (KEP-1337's mutual
// preemption): a borrowing workload preempts lower-priority ones of its own ClusterQueue, an older
// workload of another ClusterQueue takes the freed quota first, the preempted ones (within their
// nominal quota) reclaim it from that one, and the first preempts them again. Once such a round
// comes back to the same state it repeats at Kueue's cycle rate while trace time stands still: the
// sim spins, and a cluster replay holds its clock forever. Both engines end the run with
// ErrPreemptionLoop instead, by the same rule: a Workload preempted more than LoopMaxPreemptions
// times within LoopWindowSec trace seconds. A real loop preempts a Workload every few milliseconds
// of trace time, far above it. The rule also ends a storm that would have ended by itself (the
// worst burst in the sim traces tried, 151 preemptions of one Workload in 60 s, part of ~900 in
// 600 s; docs/notes/wave2/issue-12-storm.md): deliberately, since the cluster engine shows nothing
// like it. A slow loop (one preemption every 2 s) does not trip it: it advances trace time and
// ends when quota frees.
const (
	LoopWindowSec      = 60
	LoopMaxPreemptions = 100
)

// ErrPreemptionLoop is wrapped by the error of a run that LoopCounter ended.
var ErrPreemptionLoop = errors.New("preemption loop")

// LoopCounter counts one Workload's preemptions in the current window.
type LoopCounter struct {
	t0 float64
	n  int
}

// Preempted counts a preemption at trace time t; it returns a non-nil error, wrapping
// ErrPreemptionLoop and naming what (the workload) and the window, once the rule is broken.
func (c *LoopCounter) Preempted(t float64, what string) error {
	if c.n == 0 || t-c.t0 > LoopWindowSec {
		c.t0, c.n = t, 0
	}
	c.n++
	if c.n <= LoopMaxPreemptions {
		return nil
	}
	return fmt.Errorf("%w: %s preempted %d times between trace %.3fs and %.3fs", ErrPreemptionLoop, what, c.n, c.t0, t)
}
