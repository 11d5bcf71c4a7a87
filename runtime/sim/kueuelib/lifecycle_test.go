package kueuelib

import (
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestReleaseEvictedAndFinish plays the job reconciler's part after a preemption (ReleaseEvicted)
// and at a job's end (Finish).
func TestReleaseEvictedAndFinish(t *testing.T) {
	f := newFixture(t)
	w1 := f.submit(job("a", "j1", 3, "low"))
	f.loop.After(1, func() {})
	f.loop.Step()
	w2 := f.submit(job("a", "j2", 3, "low"))
	f.cycles(10)
	w3 := f.submit(job("b", "j3", 4, "high"))
	f.cycles(3)
	victim := f.get(w2)
	if !IsEvicted(victim) || !HasQuotaReservation(victim) || IsFinished(victim) {
		t.Fatalf("victim: evicted %v, reserved %v, finished %v", IsEvicted(victim), HasQuotaReservation(victim), IsFinished(victim))
	}
	if err := f.k.ReleaseEvicted(victim); err != nil {
		t.Fatal(err)
	}
	if !IsEvicted(victim) || !HasQuotaReservation(victim) {
		t.Fatal("ReleaseEvicted changed the object it was given")
	}
	f.deliver()
	got := f.get(w2)
	if HasQuotaReservation(got) || IsAdmitted(got) {
		t.Fatal("the released workload still holds quota")
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, kueue.WorkloadRequeued); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kueue.WorkloadEvictedByPreemption {
		t.Fatalf("Requeued after a preemption: %+v", c)
	}
	f.cycles(3)
	if !IsAdmitted(f.get(w3)) {
		t.Fatal("the preemptor was not admitted once the victim released its quota")
	}
	if err := f.k.ReleaseEvicted(f.get(w1)); err == nil {
		t.Error("ReleaseEvicted of a workload that was not evicted must fail")
	}

	if err := f.k.Finish(client.ObjectKeyFromObject(w1), true, "a pod failed"); err != nil {
		t.Fatal(err)
	}
	f.deliver()
	got = f.get(w1)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, kueue.WorkloadFinished); !IsFinished(got) || c.Reason != kueue.WorkloadFinishedReasonFailed || c.Message != "a pod failed" {
		t.Fatalf("finished %v, condition %+v", IsFinished(got), c)
	}
	if err := f.k.Finish(types.NamespacedName{Namespace: "a", Name: "none"}, false, ""); err == nil {
		t.Error("Finish of a workload not in the store must fail")
	}
}
