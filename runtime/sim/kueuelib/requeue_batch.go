//go:build !kueue_v0_15

package kueuelib

import (
	"context"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"k8s.io/apimachinery/pkg/util/sets"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
)

// Kueue from v0.17 requeues inadmissible workloads asynchronously, in batches (seam 4), and shares
// one preemption-expectations store between its queues, scheduler and workload controller.

// wiring is what Kueue's main gives the queue manager, the scheduler and the workload controller
// that differs by release, and the requeuer's pending names.
type wiring struct {
	queues    *qcache.Manager
	scheduler []scheduler.Option
	core      []core.Option
	requeues  *notified
}

// wireQueues builds the queue manager over st and cc with queueOpts as Kueue's main wires it: one
// preemption-expectations store shared by the queues, the scheduler and the workload controller,
// and the synchronous requeuer of seam 4.
func wireQueues(st *Store, cc *schdcache.Cache, queueOpts []qcache.Option) (*wiring, error) {
	expect := preemptexpectations.New()
	queueOpts = append(queueOpts, qcache.WithPreemptionExpectations(expect))
	qm, rq := qcache.NewManagerForUnitTestsWithRequeuer(st, cc, queueOpts...)
	requeues, err := bindNotified(rq)
	if err != nil {
		return nil, err
	}
	return &wiring{queues: qm, scheduler: []scheduler.Option{scheduler.WithPreemptionExpectations(expect)},
		core: []core.Option{core.WithPreemptionExpectations(expect)}, requeues: requeues}, nil
}

// Seam 4: the inadmissible-workload requeuer. Kueue's queue manager notifies a requeuer when
// something may make inadmissible workloads admissible (quota freed, a queue changed); the real
// one (qcache.NewRequeuer) puts the ClusterQueue or root Cohort on a delaying workqueue with the
// batch period (getRequeueBatchPeriod: 1 s, or 10 s under SchedulerLongRequeueInterval), so
// notifications within a period are coalesced and the workloads move back to the heaps one
// period after the first of them. Kueue's exported synchronous requeuer
// (NewManagerForUnitTestsWithRequeuer) records the notified names in its unexported sets cqs
// and cohorts; the sim reads and clears them after each step of Kueue's code and moves each
// name's workloads one period later, on the virtual clock, with the functions the real
// requeuer calls.
//
//go:linkname requeueBatchPeriod sigs.k8s.io/kueue/pkg/cache/queue.getRequeueBatchPeriod
func requeueBatchPeriod() time.Duration

//go:linkname requeueWorkloadsCQ sigs.k8s.io/kueue/pkg/cache/queue.requeueWorkloadsCQ
func requeueWorkloadsCQ(ctx context.Context, m *qcache.Manager, name kueue.ClusterQueueReference) int

//go:linkname requeueWorkloadsCohort sigs.k8s.io/kueue/pkg/cache/queue.requeueWorkloadsCohort
func requeueWorkloadsCohort(ctx context.Context, m *qcache.Manager, name kueue.CohortReference) int

// notified is the synchronous requeuer's pending names.
type notified struct {
	cqs     map[kueue.ClusterQueueReference]sets.Empty
	cohorts map[kueue.CohortReference]sets.Empty
}

// bindNotified finds the sets of the requeuer rq (a *qcache.testInadmissibleWorkloadRequeuer).
func bindNotified(rq any) (*notified, error) {
	v := reflect.ValueOf(rq)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("kueue %s seam: the requeuer is %T, not a pointer to a struct", KueueVersion, rq)
	}
	field := func(name string) (reflect.Value, error) {
		f := v.Elem().FieldByName(name)
		if !f.IsValid() {
			return f, fmt.Errorf("kueue %s seam: the requeuer has no field %s", KueueVersion, name)
		}
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
	}
	cqs, err := field("cqs")
	if err != nil {
		return nil, err
	}
	cohorts, err := field("cohorts")
	if err != nil {
		return nil, err
	}
	n := &notified{}
	c, ok := cqs.Interface().(sets.Set[kueue.ClusterQueueReference])
	if !ok {
		return nil, fmt.Errorf("kueue %s seam: the requeuer's cqs is %s", KueueVersion, cqs.Type())
	}
	h, ok := cohorts.Interface().(sets.Set[kueue.CohortReference])
	if !ok {
		return nil, fmt.Errorf("kueue %s seam: the requeuer's cohorts is %s", KueueVersion, cohorts.Type())
	}
	n.cqs, n.cohorts = c, h
	return n, nil
}

// batchRequeues starts a batch for each ClusterQueue and root Cohort Kueue notified since the
// last call that has none waiting: one batch period later, on the clock, its inadmissible
// workloads move back to the heaps, as the real requeuer's delaying queue does (a name already
// waiting is not added again).
func (k *Kueue) batchRequeues() {
	period := requeueBatchPeriod()
	for name := range k.requeues.cqs {
		if !k.cqBatches[name] {
			k.cqBatches[name] = true
			// timerClock marks the heads changed and collects what the move notified.
			k.clk.AfterFunc(period, func() {
				delete(k.cqBatches, name)
				requeueWorkloadsCQ(k.ctx, k.queues, name)
			})
		}
	}
	for name := range k.requeues.cohorts {
		if !k.cohortBatches[name] {
			k.cohortBatches[name] = true
			// timerClock marks the heads changed and collects what the move notified.
			k.clk.AfterFunc(period, func() {
				delete(k.cohortBatches, name)
				requeueWorkloadsCohort(k.ctx, k.queues, name)
			})
		}
	}
	clear(k.requeues.cqs)
	clear(k.requeues.cohorts)
}
