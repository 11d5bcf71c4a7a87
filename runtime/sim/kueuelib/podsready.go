package kueuelib

import (
	"errors"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Kueue's workload controller as controller-runtime runs it: every Workload event its handlers
// accept queues the Workload's key, a worker calls Reconcile for it, and a Result's RequeueAfter
// queues it again that much later (a delaying queue: a key already waiting keeps the earlier of
// its two times). Reconcile is where waitForPodsReady acts — the PodsReady timeout's eviction,
// the requeuing backoff's end — so the sim runs it on the virtual clock: the keys queued now run
// in Reconcile (the sim calls it after delivering each batch of writes, until nothing is left),
// the delayed ones become due on the clock.
type workQueue struct {
	now   []types.NamespacedName
	queue map[types.NamespacedName]bool
	later map[types.NamespacedName]*delayed
}

type delayed struct {
	due   time.Time
	timer clock.Timer
}

func newWorkQueue() *workQueue {
	return &workQueue{queue: map[types.NamespacedName]bool{}, later: map[types.NamespacedName]*delayed{}}
}

func (q *workQueue) add(key types.NamespacedName) {
	if !q.queue[key] {
		q.queue[key] = true
		q.now = append(q.now, key)
	}
}

// addAfter is client-go's delaying queue's AddAfter on the workload controller's queue.
func (k *Kueue) addAfter(key types.NamespacedName, d time.Duration) { k.addAfterTo(k.work, key, d) }

// addAfterTo is client-go's delaying queue's AddAfter on q.
func (k *Kueue) addAfterTo(q *workQueue, key types.NamespacedName, d time.Duration) {
	due := k.clk.Now().Add(d)
	if w := q.later[key]; w != nil {
		if !due.Before(w.due) {
			return
		}
		w.timer.Stop()
	}
	e := &delayed{due: due}
	e.timer = k.clk.AfterFunc(d, func() {
		if q.later[key] == e {
			delete(q.later, key)
		}
		q.add(key)
	})
	q.later[key] = e
}

// Reconcile runs Kueue's workload reconciler for every key queued now, in the order queued, then
// the priority booster's (when there is one); it reports whether it ran any. Their writes are in
// the Store's changes.
func (k *Kueue) Reconcile() (bool, error) {
	ran, err := k.reconcileWorkloads()
	if err != nil {
		return ran, err
	}
	boosted, err := k.reconcileBooster()
	return ran || boosted, err
}

func (k *Kueue) reconcileWorkloads() (bool, error) {
	q := k.work
	// The queue manager's requests to reconcile DRA Workloads (the reconciler's Generic events).
	for _, key := range k.dra.take() {
		q.add(key)
	}
	if len(q.now) == 0 {
		return false, nil
	}
	keys := q.now
	q.now = nil
	for _, key := range keys {
		delete(q.queue, key)
		res, err := k.reconciler.Reconcile(k.ctx, ctrl.Request{NamespacedName: key})
		if err != nil {
			return true, fmt.Errorf("kueue: reconcile workload %s: %w", key, err)
		}
		if res.RequeueAfter > 0 {
			k.addAfter(key, res.RequeueAfter)
		}
	}
	k.headsKnown = false
	k.batchRequeues()
	return true, nil
}

// WaitsForPodsReady reports whether waitForPodsReady is on.
func (k *Kueue) WaitsForPodsReady() bool { return k.opts.WaitForPodsReady != nil }

// The PodsReady condition is the job reconciler's (jobframework, "handle WaitForPodsReady"): on
// every reconcile of an admitted job it computes the condition from whether the job's pods are
// ready (generatePodsReadyCondition) and writes it, as the job controller's field manager, when
// its type, status and reason changed. The messages are jobframework's.
const (
	notReadyMsg           = "Not all pods are ready or succeeded"
	waitingForRecoveryMsg = "At least one pod has failed, waiting for recovery"
	readyMsg              = "All pods reached readiness and the workload is running"
)

// SyncPodsReady writes the PodsReady condition of the stored Workload key for a job whose pods
// are all ready (ready) or not, as the job reconciler does on each reconcile; nothing when
// waitForPodsReady is off or the condition is already so.
func (k *Kueue) SyncPodsReady(key types.NamespacedName, ready bool) error {
	if !k.WaitsForPodsReady() {
		return nil
	}
	cur := k.Store.Workload(key)
	if cur == nil {
		return errors.New("not in the store")
	}
	cond := podsReadyCondition(cur, ready, k.clk)
	if workload.HasConditionWithTypeAndReason(cur, &cond) {
		return nil
	}
	defer k.Store.as(ByJobPodsReady)()
	return setConditionAndUpdate(k.ctx, k.Store, cur.DeepCopy(), cond.Type, cond.Status, cond.Reason, cond.Message,
		constants.JobControllerName, k.clk)
}

// podsReadyCondition is jobframework's generatePodsReadyCondition, with the job's PodsReady
// answer given.
func podsReadyCondition(wl *kueue.Workload, ready bool, clk clock.Clock) metav1.Condition {
	if !workload.IsAdmitted(wl) {
		return workload.CreatePodsReadyCondition(metav1.ConditionFalse, kueue.WorkloadWaitForStart, notReadyMsg, clk)
	}
	prev := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady)
	if ready {
		reason := kueue.WorkloadStarted
		if prev != nil && (prev.Reason == kueue.WorkloadWaitForRecovery || prev.Reason == kueue.WorkloadRecovered) {
			reason = kueue.WorkloadRecovered
		}
		return workload.CreatePodsReadyCondition(metav1.ConditionTrue, reason, readyMsg, clk)
	}
	switch {
	case prev == nil:
		return workload.CreatePodsReadyCondition(metav1.ConditionFalse, kueue.WorkloadWaitForStart, notReadyMsg, clk)
	case prev.Status == metav1.ConditionTrue, prev.Reason == kueue.WorkloadWaitForRecovery:
		return workload.CreatePodsReadyCondition(metav1.ConditionFalse, kueue.WorkloadWaitForRecovery, waitingForRecoveryMsg, clk)
	default:
		return workload.CreatePodsReadyCondition(metav1.ConditionFalse, kueue.WorkloadWaitForStart, notReadyMsg, clk)
	}
}
