package kueuewl

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// cond is a condition at second t of the test's clock.
func cond(typ string, status bool, reason string, t int) metav1.Condition {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: s, Reason: reason,
		LastTransitionTime: metav1.NewTime(time.Unix(int64(t), 0))}
}

func wl(conds ...metav1.Condition) *kueue.Workload {
	w := &kueue.Workload{}
	w.Status.Conditions = conds
	return w
}

// TestTrackerTable follows Workloads through the lives Kueue gives them, written from Kueue's
// documented condition semantics (a Workload is queued with Requeued=True; an eviction sets
// Evicted and then Requeued; Finished is final), and checks the events each version makes.
func TestTrackerTable(t *testing.T) {
	const (
		qr  = kueue.WorkloadQuotaReserved
		adm = kueue.WorkloadAdmitted
		ev  = kueue.WorkloadEvicted
		pre = kueue.WorkloadPreempted
		rq  = kueue.WorkloadRequeued
		fin = kueue.WorkloadFinished
	)
	tests := []struct {
		name     string
		versions []*kueue.Workload
		want     [][]results.EventType
	}{{
		name: "queued, admitted, finished",
		versions: []*kueue.Workload{
			wl(cond(rq, true, "Pending", 0)),
			wl(cond(rq, true, "Pending", 0), cond(qr, true, "QuotaReserved", 1), cond(adm, true, "Admitted", 1)),
			wl(cond(rq, true, "Pending", 0), cond(qr, true, "QuotaReserved", 1), cond(adm, true, "Admitted", 1)),
			wl(cond(qr, false, "NoReservation", 9), cond(fin, true, kueue.WorkloadFinishedReasonSucceeded, 9)),
		},
		want: [][]results.EventType{nil, {results.EvQuotaReserved, results.EvAdmitted}, nil, {results.EvFinished}},
	}, {
		name: "preempted and requeued twice: one requeue per eviction",
		versions: []*kueue.Workload{
			wl(cond(rq, true, "Pending", 0), cond(qr, true, "QuotaReserved", 1)),
			wl(cond(qr, true, "QuotaReserved", 1), cond(ev, true, "Preempted", 2), cond(pre, true, "InClusterQueue", 2)),
			wl(cond(qr, false, "Pending", 3), cond(ev, true, "Preempted", 2), cond(pre, true, "InClusterQueue", 2), cond(rq, true, "Preempted", 3)),
			// The same Requeued again, as a later write shows it: no new event.
			wl(cond(qr, false, "Pending", 3), cond(ev, true, "Preempted", 2), cond(rq, true, "Preempted", 3)),
			wl(cond(qr, true, "QuotaReserved", 4), cond(ev, false, "QuotaReserved", 4), cond(pre, false, "QuotaReserved", 4), cond(rq, true, "Preempted", 3)),
			wl(cond(qr, true, "QuotaReserved", 4), cond(ev, true, "Preempted", 5), cond(pre, true, "InCohortReclamation", 5), cond(rq, true, "Preempted", 3)),
			wl(cond(qr, false, "Pending", 6), cond(ev, true, "Preempted", 5), cond(rq, false, "Preempted", 6)),
			wl(cond(qr, false, "Pending", 6), cond(ev, true, "Preempted", 5), cond(rq, true, "BackoffFinished", 7)),
		},
		want: [][]results.EventType{{results.EvQuotaReserved}, {results.EvEvicted, results.EvPreempted}, {results.EvRequeued}, nil,
			{results.EvQuotaReserved}, {results.EvEvicted, results.EvPreempted}, nil, {results.EvRequeued}},
	}, {
		name: "a Requeued with no eviction before it is the first queueing",
		versions: []*kueue.Workload{
			wl(cond(rq, true, "Pending", 0)),
			wl(cond(rq, false, "Inadmissible", 1)),
			wl(cond(rq, true, "Pending", 2)),
		},
		want: [][]results.EventType{nil, nil, nil},
	}, {
		name: "finished is final: a restarted Kueue's rewrite makes no event",
		versions: []*kueue.Workload{
			wl(cond(fin, true, kueue.WorkloadFinishedReasonFailed, 3)),
			wl(cond(qr, true, "QuotaReserved", 8), cond(fin, true, kueue.WorkloadFinishedReasonFailed, 8)),
		},
		want: [][]results.EventType{{results.EvFinished}, nil},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			for i, v := range tc.versions {
				var got []results.EventType
				for _, x := range tr.Observe(v) {
					got = append(got, x.Type)
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Errorf("version %d: events %v, want %v", i, got, tc.want[i])
				}
			}
		})
	}
}

func TestTrackerFinishedOutcome(t *testing.T) {
	for reason, want := range map[string]string{
		kueue.WorkloadFinishedReasonSucceeded: results.StateSucceeded,
		kueue.WorkloadFinishedReasonFailed:    results.StateFailed,
		"OutOfSync":                           results.StateFailed,
	} {
		var tr Tracker
		got := tr.Observe(wl(cond(kueue.WorkloadFinished, true, reason, 1)))
		if len(got) != 1 || got[0].Reason != want || got[0].Failed != (want == results.StateFailed) {
			t.Errorf("Finished reason %s: %+v, want outcome %s", reason, got, want)
		}
		if !tr.Finished() {
			t.Errorf("Finished reason %s: tracker not finished", reason)
		}
	}
}

// With Waits, each new message of QuotaReserved=False is a waiting transition, once; without, none.
func TestTrackerWaits(t *testing.T) {
	pending := func(msg string) *kueue.Workload {
		c := cond(kueue.WorkloadQuotaReserved, false, "Pending", 1)
		c.Message = msg
		return wl(c)
	}
	versions := []*kueue.Workload{pending("short of 4"), pending("short of 4"), pending("short of 2"), wl(cond(kueue.WorkloadQuotaReserved, true, "QuotaReserved", 2))}
	for _, waits := range []bool{true, false} {
		tr := Tracker{Waits: waits}
		var got []string
		for _, v := range versions {
			for _, x := range tr.Observe(v) {
				got = append(got, string(x.Type)+":"+x.Message)
			}
		}
		want := []string{"quota_reserved:"}
		if waits {
			want = []string{"waiting:short of 4", "waiting:short of 2", "quota_reserved:"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Waits %v: %v, want %v", waits, got, want)
		}
	}
}
