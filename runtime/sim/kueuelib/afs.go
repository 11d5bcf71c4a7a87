package kueuelib

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/core"
	afs "sigs.k8s.io/kueue/pkg/util/admissionfairsharing"
)

// Admission fair sharing keeps, per LocalQueue, the resources its workloads consumed, decayed
// with a half-life, and orders each ClusterQueue's heads by it. Kueue maintains it in two
// controllers: the LocalQueue reconciler samples the decayed usage every usageSamplingInterval
// (and when the scheduler leaves an entry penalty), on the clock it is given; the workload
// controller's update handler adds an admitted workload's usage, on its own clock (seam 3 makes
// it the virtual one). The sim runs the LocalQueue reconciler (core.NewLocalQueueReconciler with
// the virtual clock) when controller-runtime would: see runtime/sim/afs.go.

// AFS reports whether admission fair sharing is on.
func (k *Kueue) AFS() bool { return afs.Enabled(k.opts.AdmissionFairSharing) }

// LocalQueues lists the LocalQueues added, in the order added.
func (k *Kueue) LocalQueues() []types.NamespacedName { return k.lqs }

// ReconcileLocalQueue runs Kueue's LocalQueue reconciler for one LocalQueue; it returns when the
// reconciler asks to run again (0: not on its own).
func (k *Kueue) ReconcileLocalQueue(key types.NamespacedName) (time.Duration, error) {
	if k.lqr == nil {
		return 0, nil
	}
	res, err := k.lqr.Reconcile(k.ctx, ctrl.Request{NamespacedName: key})
	k.headsKnown = false // a sample rebuilds the ClusterQueue's heap in the new order
	if err != nil {
		return 0, fmt.Errorf("reconcile LocalQueue %s: %w", key, err)
	}
	return res.RequeueAfter, nil
}

// TakeNotifiedLocalQueues returns the LocalQueues whose workloads Kueue reported changing to
// its watchers since the last call (the scheduler does when it leaves an entry penalty), and
// clears them.
func (k *Kueue) TakeNotifiedLocalQueues() []types.NamespacedName {
	out := k.notified
	k.notified = nil
	clear(k.notifiedSet)
	return out
}

// NotifyWorkloadUpdate implements the queue manager's WorkloadUpdateWatcher, as Kueue's
// LocalQueue reconciler does: it marks the workload's LocalQueue for reconciliation.
func (k *Kueue) NotifyWorkloadUpdate(oldWl, newWl *kueue.Workload) {
	for _, wl := range []*kueue.Workload{oldWl, newWl} {
		if wl == nil {
			continue
		}
		key := types.NamespacedName{Namespace: wl.Namespace, Name: string(wl.Spec.QueueName)}
		if !k.notifiedSet[key] {
			k.notifiedSet[key] = true
			k.notified = append(k.notified, key)
		}
	}
}

// newLocalQueueReconciler is Kueue's LocalQueue reconciler on the virtual clock, when
// admission fair sharing is on.
func (k *Kueue) newLocalQueueReconciler() {
	if !k.AFS() {
		return
	}
	_, _, off := noLocalQueueMetrics()
	k.lqr = core.NewLocalQueueReconciler(k.Store, k.queues, k.cache,
		append([]core.LocalQueueReconcilerOption{core.WithClock(k.clk), core.WithAdmissionFairSharingConfig(k.opts.AdmissionFairSharing)}, off...)...)
	k.queues.AddWorkloadUpdateWatcher(k)
}
