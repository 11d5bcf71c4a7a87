//go:build kueue_v0_15

package kueuelib

import (
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/scheduler"
)

// Kueue v0.15 requeues inadmissible workloads synchronously: the controllers' event handlers call
// the queue manager's QueueInadmissibleWorkloads in the same step that frees quota, so there is
// no requeuer to read and no batch to start; and it has no preemption-expectations store.

// wiring is what Kueue's main gives the queue manager, the scheduler and the workload controller
// that differs by release.
type wiring struct {
	queues    *qcache.Manager
	scheduler []scheduler.Option
	core      []core.Option
	requeues  *notified
}

// notified is empty in v0.15: nothing is requeued later.
type notified struct{}

// wireQueues builds the queue manager over st and cc with queueOpts, as v0.15's main does.
func wireQueues(st *Store, cc *schdcache.Cache, queueOpts []qcache.Option) (*wiring, error) {
	return &wiring{queues: qcache.NewManager(st, cc, queueOpts...), requeues: &notified{}}, nil
}

// batchRequeues does nothing in v0.15: its handlers have already moved the inadmissible
// workloads back to the heaps.
func (k *Kueue) batchRequeues() {}
