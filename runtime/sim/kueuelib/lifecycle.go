package kueuelib

import (
	"errors"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/workload"
)

// The Workload predicates and writes the caller needs to play Kueue's workload controller and job
// reconciler around the scheduler. Each is Kueue's own function (pkg/workload and, from v0.19, its
// subpackages: the per-version files compat_*.go name them), named here so that a Kueue version
// that moves or changes them is met in this package alone.

// HasQuotaReservation is Kueue's workload.HasQuotaReservation: wl's QuotaReserved condition is
// True.
func HasQuotaReservation(wl *kueue.Workload) bool { return workload.HasQuotaReservation(wl) }

// IsAdmitted is Kueue's workload.IsAdmitted: wl's Admitted condition is True.
func IsAdmitted(wl *kueue.Workload) bool { return workload.IsAdmitted(wl) }

// HasPodsReadyCondition says whether wl has a PodsReady condition.
func HasPodsReadyCondition(wl *kueue.Workload) bool {
	return apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady) != nil
}

// IsEvicted is Kueue's workload.IsEvicted: wl's Evicted condition is True.
func IsEvicted(wl *kueue.Workload) bool { return isEvicted(wl) }

// IsFinished is Kueue's workload.IsFinished: wl's Finished condition is True.
func IsFinished(wl *kueue.Workload) bool { return isFinished(wl) }

// ReleaseEvicted clears the admission of an evicted Workload cur whose job has stopped, as Kueue's
// job reconciler does once the job is suspended (pkg/controller/jobframework, "handle eviction"):
// in one PatchAdmissionStatus, workload.SetRequeuedCondition with the Evicted
// condition's reason and message — Requeued True when Kueue preempted the Workload or its node
// failed, False otherwise — and workload.UnsetQuotaReservationWithCondition (reason
// PendingEvaluation, or Pending without the unadmitted-reasons gate; the eviction's message). cur is not modified; the write is in the Store's changes.
func (k *Kueue) ReleaseEvicted(cur *kueue.Workload) error {
	evCond := apimeta.FindStatusCondition(cur.Status.Conditions, kueue.WorkloadEvicted)
	if evCond == nil {
		return errors.New("the workload has no Evicted condition")
	}
	wl := cur.DeepCopy()
	defer k.Store.as(ByJob)()
	return patchAdmissionStatus(k.ctx, k.Store, wl, k.clk, func(wl *kueue.Workload) (bool, error) {
		setRequeued := evCond.Reason == kueue.WorkloadEvictedByPreemption || evCond.Reason == kueue.WorkloadEvictedDueToNodeFailures
		updated := workload.SetRequeuedCondition(wl, evCond.Reason, evCond.Message, setRequeued)
		if workload.UnsetQuotaReservationWithCondition(wl, releasedReason(), evCond.Message, k.clk.Now()) {
			updated = true
		}
		return updated, nil
	})
}

// Finish declares the job of the stored Workload key finished, as Kueue's job reconciler does:
// Kueue's Finish sets the Finished condition, reason Failed when failed and Succeeded otherwise,
// with message msg. With the WorkloadRequestUseMergePatch feature gate on, Finish writes into the
// object it is given, so it gets a copy of the stored one; the server-side apply path only reads
// it. The write is in the Store's changes.
func (k *Kueue) Finish(key types.NamespacedName, failed bool, msg string) error {
	reason := kueue.WorkloadFinishedReasonSucceeded
	if failed {
		reason = kueue.WorkloadFinishedReasonFailed
	}
	cur := k.Store.Workload(key)
	if cur == nil {
		return errors.New("not in the store")
	}
	if features.Enabled(features.WorkloadRequestUseMergePatch) {
		cur = cur.DeepCopy()
	}
	defer k.Store.as(ByJob)()
	return finishWorkload(k.ctx, k.Store, cur, reason, msg, k.clk)
}
