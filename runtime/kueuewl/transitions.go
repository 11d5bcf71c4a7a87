package kueuewl

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Transition is one step of a Kueue Workload's life, read from its conditions: the event both
// engines record for it (Event.Type, Reason, Message; Flavors for a reservation or admission).
// Failed is set on a Finished transition whose reason is not Succeeded.
type Transition struct {
	Type    results.EventType
	Reason  string
	Message string
	Flavors map[string]string
	Failed  bool
}

// reported are the Workload conditions that make events, in the order a change is read: a
// Workload written once with several new conditions yields them in this order.
var reported = [...]struct {
	cond string
	ev   results.EventType
}{
	{kueue.WorkloadQuotaReserved, results.EvQuotaReserved},
	{kueue.WorkloadAdmitted, results.EvAdmitted},
	{kueue.WorkloadEvicted, results.EvEvicted},
	{kueue.WorkloadPreempted, results.EvPreempted},
	{kueue.WorkloadRequeued, results.EvRequeued},
	{kueue.WorkloadFinished, results.EvFinished},
}

// Tracker is the one table from a Workload's conditions to events. Each engine keeps one per
// Kueue Workload and shows it every version of the Workload it sees, in order; a condition that
// turns True (or stays True with a new transition time or reason, a new transition Kueue made)
// is one transition.
//
// Kueue sets Requeued=True when it first queues a Workload, and again when an evicted Workload
// returns to its queue; only the second is a requeue of the workload's life, so Requeued counts
// once per eviction.
type Tracker struct {
	// Waits reports, besides the conditions above, each new message of a QuotaReserved=False
	// condition (results.EvWaiting): Kueue's reason the Workload does not fit now. Forecasts ask
	// for it; a replay of a million workloads does not (Kueue rewrites it at every attempt).
	Waits bool
	// waiting is the last QuotaReserved=False message reported.
	waiting string
	// seen holds, per reported condition, the transition already reported: zero after the
	// condition went False or away, so the next True is new.
	seen [len(reported)]seenCond
	// evicted is set by an Evicted transition and cleared by the Requeued that answers it.
	evicted bool
	// finished is set once Finished was reported: Finished is final in Kueue, and a restarted
	// Kueue that rewrites a finished Workload's conditions makes no new step of its life.
	finished bool
}

type seenCond struct {
	at     metav1.Time
	reason string
	set    bool
}

// Observe returns the transitions of wl since the version last observed.
func (t *Tracker) Observe(wl *kueue.Workload) []Transition {
	if t.finished {
		return nil
	}
	var out []Transition
	for i, r := range reported {
		c := meta.FindStatusCondition(wl.Status.Conditions, r.cond)
		if c == nil || c.Status != metav1.ConditionTrue {
			t.seen[i] = seenCond{}
			if t.Waits && r.cond == kueue.WorkloadQuotaReserved && c != nil && c.Message != "" && c.Message != t.waiting {
				t.waiting = c.Message
				out = append(out, Transition{Type: results.EvWaiting, Reason: c.Reason, Message: c.Message})
			}
			continue
		}
		s := &t.seen[i]
		if s.set && s.at.Equal(&c.LastTransitionTime) && s.reason == c.Reason {
			continue
		}
		*s = seenCond{at: c.LastTransitionTime, reason: c.Reason, set: true}
		tr := Transition{Type: r.ev, Reason: c.Reason, Message: c.Message}
		switch r.cond {
		case kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted:
			tr.Flavors, tr.Message = Flavors(wl), ""
		case kueue.WorkloadEvicted:
			t.evicted = true
		case kueue.WorkloadRequeued:
			if !t.evicted {
				continue
			}
			t.evicted = false
		case kueue.WorkloadFinished:
			t.finished = true
			tr.Failed = c.Reason != kueue.WorkloadFinishedReasonSucceeded
			tr.Reason = results.Outcome(tr.Failed)
		}
		out = append(out, tr)
	}
	return out
}

// Finished reports whether a Finished transition was observed.
func (t *Tracker) Finished() bool { return t.finished }
