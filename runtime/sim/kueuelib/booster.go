package kueuelib

import (
	"context"
	"errors"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// PriorityBoostGate is Kueue's feature gate that makes its scheduler honour the
// kueue.x-k8s.io/priority-boost annotation the priority booster writes.
const PriorityBoostGate = "PriorityBoost"

// The priority booster is Kueue's experimental kueue-priority-booster (cmd/experimental,
// KEP-7990), a controller of its own beside Kueue: once a Workload has been admitted for its
// time-sharing interval it sets a negative priority boost, so that pending Workloads of the same
// priority can preempt it under withinClusterQueue: LowerPriority (round-robin time sharing).
// The sim runs its reconciler as controller-runtime would: every Workload create and update
// queues the Workload's key (its event filter's superset: the ones it filters out find nothing
// to change), a worker reconciles, and a RequeueAfter queues the key again on the virtual clock.
//
// The reconciler reads an admission's age as time.Since(the Admitted condition's time), on the
// wall clock, and asks to run again when the interval is up. Its view of the Store
// (boosterView) puts each condition on the wall clock at its virtual age in whole seconds plus
// half a second, so that with a whole-second interval (checked) it reads "not yet" before the
// interval ends and "over" from its end however long the call takes (under half a second);
// and the sim requeues the key at the virtual end of the interval itself, not after the
// RequeueAfter the reconciler computed from the wall clock.

// CheckPriorityBooster checks a priority booster configuration (the booster's own config file,
// as fields) and that the gate Kueue needs to honour its annotation is on in gates.
func CheckPriorityBooster(doc map[string]any, gates map[string]bool) error {
	if _, err := parseBooster(doc); err != nil {
		return err
	}
	if !gates[PriorityBoostGate] {
		return errors.New("priorityBooster: Kueue ignores the booster's kueue.x-k8s.io/priority-boost annotation unless its PriorityBoost feature gate is on: add featureGates: {PriorityBoost: true}")
	}
	return nil
}

// boosterView is the Store as the booster's client sees it: Workloads' condition times moved
// onto the wall clock.
type boosterView struct {
	client.Client
	k *Kueue
}

func (v boosterView) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := v.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if wl, ok := obj.(*kueue.Workload); ok {
		now, wall := v.k.clk.Now(), time.Now()
		for i := range wl.Status.Conditions {
			c := &wl.Status.Conditions[i]
			age := now.Sub(c.LastTransitionTime.Time).Truncate(time.Second) + time.Second/2
			c.LastTransitionTime.Time = wall.Add(-age)
		}
	}
	return nil
}

// queueForBooster queues a Workload event's key for the booster.
func (k *Kueue) queueForBooster(c Change) {
	if k.booster != nil && c.New != nil && c.New.DeletionTimestamp.IsZero() {
		k.boostWork.add(c.Key())
	}
}

// reconcileBooster runs the booster for every key queued now; it reports whether it ran any.
func (k *Kueue) reconcileBooster() (bool, error) {
	if k.booster == nil || len(k.boostWork.now) == 0 {
		return false, nil
	}
	defer k.Store.as(ByBooster)()
	keys := k.boostWork.now
	k.boostWork.now = nil
	for _, key := range keys {
		delete(k.boostWork.queue, key)
		res, err := k.booster.Reconcile(k.ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			return true, fmt.Errorf("priority booster: reconcile workload %s: %w", key, err)
		}
		if res.RequeueAfter > 0 {
			// The interval ends on the virtual clock at the admission's time plus the interval.
			wait := res.RequeueAfter
			if wl := k.Store.Workload(key); wl != nil {
				if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted); c != nil {
					wait = max(c.LastTransitionTime.Add(k.boostInterval).Sub(k.clk.Now()), 0)
				}
			}
			k.addAfterTo(k.boostWork, key, wait)
		}
	}
	return true, nil
}

// boosterReconciler is the booster's reconciler over boosterView.
type boosterReconciler = reconcile.Reconciler
