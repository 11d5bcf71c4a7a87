package results

import (
	"errors"
	"fmt"
)

// Preemption loops. Kueue's preemption policies can chase each other (KEP-1337's mutual
// preemption): a borrowing workload preempts lower-priority ones of its own ClusterQueue, an older
// workload of another ClusterQueue takes the freed quota first, the preempted ones (within their
// nominal quota) reclaim it from that one, and the first preempts them again. Once such a round
// comes back to the same state with nothing from outside Kueue in between, Kueue's decisions
// follow from the same inputs and the round repeats until something outside it changes: on a
// cluster replay never, since the trace clock holds while Kueue owes a step; in the sim at the
// next submission or pod completion, since its rounds cost Kueue's modelled cycle time, which may
// be hours and hundreds of thousands of preemptions away. Both engines end such a run with
// ErrPreemptionLoop, by LoopGuard's rule. A storm that moves on (every round admits or finishes
// something, or meets a new state) is never ended, however many preemptions it counts.

// The reasons Kueue gives an eviction when a workload's pods were not ready in time and its
// requeue when the backoff that follows ended (waitForPodsReady).
const (
	reasonPodsReadyTimeout = "PodsReadyTimeout"
	reasonBackoffFinished  = "BackoffFinished"
)

// ErrPreemptionLoop is wrapped by the error of a run that LoopGuard ended.
var ErrPreemptionLoop = errors.New("preemption loop")

// Preemptions that never come back to one state still go on for ever when nothing finishes: a
// priority booster's turns among jobs longer than its interval that restart without a checkpoint
// preempt each other at every turn, with states that repeat only after thousands of rounds when
// many take turns. A workload admitted alone finishes within its ideal run times the slowdowns
// of power caps and shared GPUs, so a run still preempting workloads that keep no checkpoint
// after ten times the longest ideal run (a week at least) with nothing submitted, finished or
// changed outside Kueue makes no progress. A preempted workload whose pods took a checkpoint in
// their turn kept work: the engine reports it (KeptWork), and it is progress.
const (
	stallFactor = 10
	stallMinSec = 7 * 24 * 3600
)

// Stall sets the guard's stall rule for a run of these workloads: StallSec is ten times the
// longest ideal run, a week at least.
func (g *LoopGuard) Stall(records []*Record) {
	longest := 0.0
	for _, r := range records {
		longest = max(longest, r.IdealSec)
	}
	g.StallSec = max(stallFactor*longest, stallMinSec)
}

// LoopMaxRounds is how many times a proven loop may come round before the guard ends it: the
// sim's cost bound for a loop that a change from outside Kueue will end. In the unguarded seed-2
// runs measured (docs/notes/wave2/issue-24-loop-guard.md) the loops that ended by themselves
// within minutes came round at most 508 times (416 for the one with the burst of 151
// preemptions of workload-000125 in 60 s); those that went on came round 1,286 to 61,245 times.
const LoopMaxRounds = 1000

// loopMaxStates bounds the states a LoopGuard remembers between two progress events; past it, it
// forgets them and starts again (a loop of more preemptions than this is not caught).
const loopMaxStates = 1 << 16

// LoopGuard watches a run's events for a preemption loop. The state is the set of Workload objects
// (Event.Object) holding quota: quota_reserved adds one; evicted, preempted, requeued and finished
// remove it. On each preemption it fingerprints (that set without the victim, the victim); the
// same fingerprint again, with no progress in between, proves a loop: nothing that Kueue decides
// from changed. Progress is anything from outside Kueue's decisions: a workload submitted (or
// refused), created or finished, a trial created, a fault, a control-plane event, a pod that
// succeeded, an eviction or requeue by Kueue's waitForPodsReady timers, Finished, Progress; it
// forgets every fingerprint.
//
// A proven loop ends the run at once when no change from outside Kueue is known to be coming
// (Horizon unset or reporting none), or when at its pace it would come round more than
// LoopMaxRounds times before the next one; otherwise it is left to end by itself, and ended if it
// comes round LoopMaxRounds times all the same. With StallSec set, a preemption more than
// StallSec after the last progress event ends the run whatever the states (Stall); Kueue's
// waitForPodsReady timers forget the states but do no work, so they do not count there.
//
// Memory stays small on a run of any size: a 64-bit hash per Workload holding quota now, and one
// entry per preemption since the last progress event (at most loopMaxStates). The set's
// fingerprint is the sum of its members' hashes, updated as they come and go, so a preemption
// costs O(1), not a sort of the set. Not safe for concurrent use.
type LoopGuard struct {
	// Horizon, when set, is the trace time of the next change from outside Kueue the engine has
	// coming (the next submission, the next pod completion it predicts); ok is false when none.
	Horizon func() (t float64, ok bool)
	// StallSec, when > 0, ends a run at a preemption more than StallSec of trace time after the
	// last progress event (Stall), whatever its states.
	StallSec float64

	holders map[uint64]struct{} // hash of each Workload object holding quota
	sum     uint64              // the sum of the holders' hashes: the set's fingerprint
	seen    map[uint64]loopSeen // by fingerprint, the preemptions since the last progress event
	// since is when the span without progress began, preemptions the number since.
	since       float64
	preemptions int
	// started is false until an event starts the span without progress: the run's first (a run
	// resumed from a state starts at its instant) or the first after Progress, which an engine
	// calls without a time.
	started bool
}

// loopSeen is one state preempted from: when first and last, and how many times it came round.
type loopSeen struct {
	first, last float64
	rounds      int
}

// Observe feeds one event to the guard. It returns an error wrapping ErrPreemptionLoop, naming the
// preempted workload and the trace times of its state's first and latest preemption, when e
// proves a loop that the rule ends.
func (g *LoopGuard) Observe(e *Event) error {
	if !g.started {
		g.started, g.since = true, e.T
	}
	switch e.Type {
	case EvQuotaReserved:
		g.hold(e.Object)
	case EvEvicted, EvRequeued:
		g.release(e.Object)
		if e.Reason == reasonPodsReadyTimeout || e.Reason == reasonBackoffFinished {
			// Kueue's own timers (waitForPodsReady): each round counts one more requeue and
			// waits a longer backoff, so the next round does not start from the same inputs. No
			// work was done: the span without progress goes on.
			g.forget()
		}
	case EvFinished:
		g.Finished(e.Object)
	case EvSubmitted, EvSubmitFailed, EvWorkloadCreated, EvTrialCreated, EvFault,
		EvComponentRestarted, EvControlPlaneDown, EvControlPlaneReady:
		g.Progress()
	case EvPodFinished:
		// A pod that did its work. Pods stopped by an eviction end otherwise (the sim's Evicted,
		// a cluster's deleted Running pod), and a failed pod ends its workload (finished).
		if e.Reason == "Succeeded" {
			g.Progress()
		}
	case EvPreempted:
		return g.preempted(e)
	}
	return nil
}

func (g *LoopGuard) preempted(e *Event) error {
	g.release(e.Object) // Evicted came first; the fingerprint never counts the victim as holding
	g.preemptions++
	if g.StallSec > 0 && e.T-g.since > g.StallSec {
		return fmt.Errorf("%w: nothing submitted, finished or changed outside Kueue in %.0fs of trace time, since trace %.3fs "+
			"(ten times the longest workload's ideal run, a week at least), while Kueue preempted workloads %d times and none kept work, the latest workload %s "+
			"(Workload %s) at trace %.3fs: its preemptions never lead anywhere (as a priority booster's turns among jobs longer than "+
			"its interval that restart without a checkpoint)", ErrPreemptionLoop, e.T-g.since, g.since, g.preemptions, e.Workload, e.Object, e.T)
	}
	fp := mix(g.sum ^ mix(fnv64(e.Object)))
	s, ok := g.seen[fp]
	if !ok {
		if g.seen == nil || len(g.seen) >= loopMaxStates {
			g.seen = map[uint64]loopSeen{}
		}
		g.seen[fp] = loopSeen{first: e.T, last: e.T}
		return nil
	}
	period := e.T - s.last
	s.last = e.T
	s.rounds++
	g.seen[fp] = s
	why := ""
	switch next, due := g.horizon(); {
	case s.rounds >= LoopMaxRounds:
		why = fmt.Sprintf("; it came round %d times", s.rounds)
	case !due:
		why = "; no change from outside Kueue is coming"
	case period <= 0:
		why = "; trace time stands still"
	case (next-e.T)/period > LoopMaxRounds:
		why = fmt.Sprintf("; at its pace (%.3fs a round) it would come round %.0f times before the next change "+
			"from outside Kueue, at trace %.3fs", period, (next-e.T)/period, next)
	default:
		return nil // it ends by itself soon
	}
	return fmt.Errorf("%w: workload %s (Workload %s) preempted from the same state at trace %.3fs and again at %.3fs "+
		"(the same Workloads holding quota, nothing submitted, finished or changed outside Kueue in between)%s",
		ErrPreemptionLoop, e.Workload, e.Object, s.first, e.T, why)
}

func (g *LoopGuard) horizon() (float64, bool) {
	if g.Horizon == nil {
		return 0, false
	}
	return g.Horizon()
}

// Finished tells the guard that a Workload object is done (finished or deleted), which an engine
// may not report with a finished event of its own (a trial): it holds no quota any more, and its
// end is progress.
func (g *LoopGuard) Finished(object string) {
	g.release(object)
	g.Progress()
}

// Progress tells the guard that something outside Kueue's decisions changed (a node): it forgets
// every state it saw.
func (g *LoopGuard) Progress() {
	g.started, g.preemptions = false, 0
	g.forget()
}

// KeptWork tells the guard that an evicted workload's pods took a checkpoint in their turn: work
// was done and kept, which starts the span without progress again at the next event. The states
// seen stay: the Workloads holding quota are what Kueue decides from.
func (g *LoopGuard) KeptWork() { g.started, g.preemptions = false, 0 }

// forget forgets every state seen.
func (g *LoopGuard) forget() {
	if len(g.seen) > 0 {
		clear(g.seen)
	}
}

func (g *LoopGuard) hold(object string) {
	if object == "" {
		return
	}
	h := mix(fnv64(object))
	if g.holders == nil {
		g.holders = map[uint64]struct{}{}
	}
	if _, ok := g.holders[h]; !ok {
		g.holders[h] = struct{}{}
		g.sum += h
	}
}

func (g *LoopGuard) release(object string) {
	if object == "" {
		return
	}
	h := mix(fnv64(object))
	if _, ok := g.holders[h]; ok {
		delete(g.holders, h)
		g.sum -= h
	}
}

// fnv64 is FNV-1a, 64 bits, of s (hash/fnv without its allocation).
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix is splitmix64's finalizer: it spreads every bit of x over the result, so that sums of
// hashes of similar names do not cancel.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
