// Package kueuelib runs Kueue v0.19.2's admission code as a library, in virtual time: its
// scheduler cache, queue manager, scheduler (with preemption, cohorts, borrowing and lending, fair
// sharing and admission fair sharing) and the workload controller's event handlers, all wired to
// an in-memory API (Store) and a caller's clock. The caller plays the controllers' remaining parts
// (creating Workloads from jobs, finishing them, releasing evicted ones, creating admitted jobs'
// pods) through this package's operations, each Kueue's own function against the Store
// (workloads.go, lifecycle.go, pods.go), and decides when a scheduling cycle runs.
//
// This package and runtime/kueuewl (the Workload adapter both engines use) are the only non-test
// code that may import Kueue's code, sigs.k8s.io/kueue/pkg/... (TestOnlyAdaptersImportKueueCode
// in runtime/kueuewl): the seams where Kueue versions differ are met here alone. Each exported
// operation's comment names the Kueue function it is, and takes and returns plain Go values and
// Kueue's API types, never a type of Kueue's pkg/.
package kueuelib

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/scheduler"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	afs "sigs.k8s.io/kueue/pkg/util/admissionfairsharing"
	"sigs.k8s.io/kueue/pkg/util/routine"
	utiltas "sigs.k8s.io/kueue/pkg/util/tas"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Options configure Kueue as its Configuration would (config.kueue.x-k8s.io/v1beta2).
type Options struct {
	// Scheme knows Kueue's v1beta2 types and the job kinds turned into Workloads.
	Scheme *runtime.Scheme
	// Clock is Kueue's clock: the sim's virtual time.
	Clock clock.WithDelayedExecution
	// FairSharing, when set, turns fair sharing on (Configuration.fairSharing).
	FairSharing *config.FairSharing
	// AdmissionFairSharing, when set, turns admission fair sharing on.
	AdmissionFairSharing *config.AdmissionFairSharing
	// WaitForPodsReady, when set (with Kueue's defaults filled in), turns waitForPodsReady on:
	// the workload controller evicts a Workload whose pods are not ready within the timeout and
	// requeues it after a backoff. blockAdmission is not modelled (Kueue's scheduler then
	// blocks its cycle on a condition variable until the admitted pods are ready).
	WaitForPodsReady *config.WaitForPodsReady
	// DeviceClassMappings are Configuration.resources.deviceClassMappings: the DRA device
	// classes Kueue charges to quota resources (MIG slices to gpu.memory by the memory counter
	// their devices consume). Counter sources need Kueue v0.19 (CounterQuota).
	DeviceClassMappings []config.DeviceClassMapping
	// QuotaCheckStrategy is Configuration.resources.quotaCheckStrategy (BlockUndeclared,
	// Kueue's default, or IgnoreUndeclared: a Workload's resources its ClusterQueue does not
	// cover are not checked against quota). Kueue v0.18 introduced it, behind its
	// QuotaCheckStrategy gate (beta and on from v0.19); "" is Kueue's default.
	QuotaCheckStrategy string
	// PriorityBooster, when set, runs Kueue's experimental kueue-priority-booster beside it
	// with this configuration (its own config file's fields; booster.go).
	PriorityBooster map[string]any
	// Seed draws the objects' UIDs.
	Seed uint64
}

// CheckQuotaCheckStrategy checks resources.quotaCheckStrategy s as the linked release takes it.
func CheckQuotaCheckStrategy(s string) error {
	_, err := quotaCheckOptions(s)
	return err
}

// Kueue is one Kueue instance: its cache, queues and scheduler over a Store.
type Kueue struct {
	Store      *Store
	cache      *schdcache.Cache
	queues     *qcache.Manager
	sched      *scheduler.Scheduler
	reconciler *core.WorkloadReconciler
	ctx        context.Context
	log        logr.Logger
	clk        clock.WithDelayedExecution
	heads      *heads
	cqs        []kueue.ClusterQueueReference
	opts       Options
	cycles     int64
	// headsKnown says headsVal is still HasHeads's answer: only Kueue's own code (its handlers, a
	// cycle, its timers) changes the queues.
	headsKnown, headsVal bool
	// Admission fair sharing (afs.go): the LocalQueue reconciler and the LocalQueues Kueue
	// notified.
	lqs         []types.NamespacedName
	lqr         *core.LocalQueueReconciler
	notified    []types.NamespacedName
	notifiedSet map[types.NamespacedName]bool
	// The inadmissible-workload requeuer (seam 4): the names Kueue notified, and those whose
	// batch is waiting on the clock.
	requeues *notified
	// work is the workload controller's work queue (podsready.go).
	work          *workQueue
	cqBatches     map[kueue.ClusterQueueReference]bool
	cohortBatches map[kueue.CohortReference]bool
	// ordering is how the queues order pending Workloads (waitForPodsReady's requeuing timestamp).
	ordering workload.Ordering
	// dra is Kueue's DRA integration (compat_*.go).
	dra *draIntegration
	// booster is the priority booster's reconciler (booster.go; nil: none) and boostWork its work
	// queue.
	booster       boosterReconciler
	boostWork     *workQueue
	boostInterval time.Duration
}

// newMu guards the swap of routine.DefaultWrapper while a Scheduler is built.
var newMu sync.Mutex

// admissionRoutine runs the scheduler's admission API write in the cycle instead of in a
// goroutine of its own, so the write has happened when the cycle returns, and marks its writes
// Async: Kueue's cycle does not wait for them.
type admissionRoutine struct{ st *Store }

func (r admissionRoutine) Run(f func()) {
	r.st.mu.Lock()
	r.st.async++
	r.st.mu.Unlock()
	defer func() {
		r.st.mu.Lock()
		r.st.async--
		r.st.mu.Unlock()
	}()
	f()
}

// New builds Kueue over a new Store. Add the cluster's objects with AddObjects before the first
// Workload.
func New(o Options) (*Kueue, error) {
	if o.Scheme == nil || o.Clock == nil {
		return nil, errors.New("kueuelib: Options need a Scheme and a Clock")
	}
	st := NewStore(o.Scheme)
	st.SetUIDSeed(o.Seed)
	st.now = o.Clock.Now
	if w := o.WaitForPodsReady; w != nil && w.BlockAdmission != nil && *w.BlockAdmission {
		return nil, errors.New("kueuelib: waitForPodsReady.blockAdmission is not modelled")
	}
	requeuing := config.EvictionTimestamp
	if w := o.WaitForPodsReady; w != nil && w.RequeuingStrategy != nil && w.RequeuingStrategy.Timestamp != nil {
		requeuing = *w.RequeuingStrategy.Timestamp
	}
	cacheOpts := []schdcache.Option{schdcache.WithPodsReadyTracking(false)}
	queueOpts := []qcache.Option{qcache.WithClock(o.Clock), qcache.WithPodsReadyRequeuingTimestamp(requeuing)}
	if o.FairSharing != nil {
		cacheOpts = append(cacheOpts, schdcache.WithFairSharing(fairsharing.Enabled(o.FairSharing)))
	}
	if o.AdmissionFairSharing != nil {
		queueOpts = append(queueOpts, qcache.WithAdmissionFairSharing(o.AdmissionFairSharing))
		cacheOpts = append(cacheOpts, schdcache.WithAdmissionFairSharing(o.AdmissionFairSharing))
	}
	d, err := newDRA(o.DeviceClassMappings)
	if err != nil {
		return nil, err
	}
	quotaCheck, err := quotaCheckOptions(o.QuotaCheckStrategy)
	if err != nil {
		return nil, err
	}
	queueOpts = append(queueOpts, d.queueOptions()...)
	qOff, cOff, _ := noLocalQueueMetrics()
	queueOpts, cacheOpts = append(queueOpts, qOff...), append(cacheOpts, cOff...)
	k := &Kueue{}
	clk := timerClock{WithDelayedExecution: o.Clock, k: k}
	queueOpts[0] = qcache.WithClock(clk)
	cc := schdcache.New(st, cacheOpts...)
	w, err := wireQueues(st, cc, queueOpts)
	if err != nil {
		return nil, err
	}
	qm := w.queues

	newMu.Lock()
	saved := routine.DefaultWrapper
	routine.DefaultWrapper = admissionRoutine{st}
	s := scheduler.New(qm, cc, st, discardRecorder{}, append([]scheduler.Option{
		scheduler.WithPodsReadyRequeuingTimestamp(requeuing),
		scheduler.WithFairSharing(o.FairSharing),
		scheduler.WithAdmissionFairSharing(o.AdmissionFairSharing),
		scheduler.WithClock(nil, clk)}, append(w.scheduler, quotaCheck...)...)...)
	routine.DefaultWrapper = saved
	newMu.Unlock()

	wopts := append(slices.Clip(w.core), d.coreOptions()...)
	if afs.Enabled(o.AdmissionFairSharing) {
		// The LocalQueue reconciler hears of every Workload event, as in Kueue's
		// core.SetupControllers, and the handlers account admitted usage.
		wopts = append(wopts, core.WithWorkloadUpdateWatchers(k), core.WithAdmissionFairSharing(o.AdmissionFairSharing))
	}
	r := core.NewWorkloadReconciler(st, qm, cc, discardRecorder{}, wopts...)
	if err := setReconcilerClock(r, clk); err != nil {
		return nil, err
	}
	if o.WaitForPodsReady != nil {
		if err := setReconcilerWaitForPodsReady(r, o.WaitForPodsReady); err != nil {
			return nil, err
		}
	}
	log := logr.Discard()
	*k = Kueue{Store: st, cache: cc, queues: qm, sched: s, reconciler: r, clk: clk, opts: o,
		ctx: ctrl.LoggerInto(context.Background(), log), log: log, notifiedSet: map[types.NamespacedName]bool{},
		work: newWorkQueue(), requeues: w.requeues, ordering: workload.Ordering{PodsReadyRequeuingTimestamp: requeuing}, cqBatches: map[kueue.ClusterQueueReference]bool{}, cohortBatches: map[kueue.CohortReference]bool{},
		dra: d}
	d.connect(qm, 0)
	k.newLocalQueueReconciler()
	if o.PriorityBooster != nil {
		if k.booster, k.boostInterval, err = k.newBooster(o.PriorityBooster); err != nil {
			return nil, err
		}
		k.boostWork = newWorkQueue()
	}
	return k, nil
}

// timerClock is the clock Kueue's code gets: the caller's, with the queues marked changed when
// one of Kueue's timers fires (the queue manager's second-pass requeue).
type timerClock struct {
	clock.WithDelayedExecution
	k *Kueue
}

func (c timerClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.WithDelayedExecution.AfterFunc(d, func() {
		c.k.headsKnown = false
		f()
		c.k.batchRequeues()
	})
}

// Context is the context Kueue's code runs with (logging discarded).
func (k *Kueue) Context() context.Context { return k.ctx }

// Clock is Kueue's clock.
func (k *Kueue) Clock() clock.WithDelayedExecution { return k.clk }

// AddObjects adds the cluster's objects, in the order the controllers would see them created:
// Namespaces and WorkloadPriorityClasses to the Store; ResourceFlavors, Topologies, Cohorts,
// ClusterQueues (marked Active, as the ClusterQueue controller would) and LocalQueues also to the
// cache and the queue manager. Objects of other kinds are stored only.
func (k *Kueue) AddObjects(objs []client.Object) error {
	// A LocalQueue added after its Workloads (resume.go) sends the DRA ones to the workload
	// controller's reconciler on a channel, which must have room: the sim's one goroutine is
	// the sender.
	k.dra.connect(k.queues, k.Store.Workloads())
	order := func(o client.Object) int {
		switch o.(type) {
		case *corev1.Namespace, *kueue.WorkloadPriorityClass:
			return 0
		case *kueue.ResourceFlavor, *kueue.Topology:
			return 1
		case *kueue.Cohort:
			return 2
		case *kueue.ClusterQueue:
			return 3
		case *kueue.LocalQueue:
			return 4
		}
		return 5
	}
	for pass := 0; pass <= 5; pass++ {
		for _, o := range objs {
			if order(o) != pass {
				continue
			}
			if err := k.add(o.DeepCopyObject().(client.Object)); err != nil {
				return fmt.Errorf("kueue: add %T %s: %w", o, o.GetName(), err)
			}
		}
	}
	h, err := newHeads(k.queues, k.cqs)
	if err != nil {
		return err
	}
	k.heads, k.headsKnown = h, false
	return nil
}

func (k *Kueue) add(o client.Object) error {
	switch x := o.(type) {
	case *corev1.Namespace:
		// The API server labels every namespace with its name (the NamespaceDefaultLabelName
		// admission), which ClusterQueues' namespaceSelectors commonly match.
		if x.Labels[corev1.LabelMetadataName] != x.Name {
			x.Labels = maps.Clone(x.Labels)
			if x.Labels == nil {
				x.Labels = map[string]string{}
			}
			x.Labels[corev1.LabelMetadataName] = x.Name
		}
	case *kueue.ClusterQueue:
		x.Status.Conditions = append(x.Status.Conditions, activeCondition())
	case *corev1.Node:
		// Ready as KWOK reports its nodes (topology-aware scheduling counts only ready nodes).
		if !utiltas.IsNodeStatusConditionTrue(x.Status.Conditions, corev1.NodeReady) {
			x.Status.Conditions = append(x.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue})
		}
	}
	if err := k.Store.AddObject(o); err != nil {
		return err
	}
	switch x := o.(type) {
	case *corev1.Node:
		syncTASNode(k.cache, x)
	case *kueue.ResourceFlavor:
		k.cache.AddOrUpdateResourceFlavor(k.log, x)
	case *kueue.Topology:
		k.cache.AddOrUpdateTopology(k.log, x)
	case *kueue.Cohort:
		if err := k.cache.AddOrUpdateCohort(x); err != nil {
			return err
		}
		k.queues.AddOrUpdateCohort(k.ctx, x)
	case *kueue.ClusterQueue:
		if err := k.cache.AddClusterQueue(k.ctx, x); err != nil {
			return err
		}
		if err := k.queues.AddClusterQueue(k.ctx, x); err != nil {
			return err
		}
		k.cqs = append(k.cqs, kueue.ClusterQueueReference(x.Name))
	case *kueue.LocalQueue:
		if err := k.cache.AddLocalQueue(x); err != nil {
			return err
		}
		if err := k.queues.AddLocalQueue(k.ctx, x); err != nil {
			return err
		}
		k.lqs = append(k.lqs, types.NamespacedName{Namespace: x.Namespace, Name: x.Name})
	}
	return nil
}

// ClusterQueues lists the ClusterQueues added, in the order added.
func (k *Kueue) ClusterQueues() []kueue.ClusterQueueReference { return k.cqs }

// InactiveClusterQueues names the ClusterQueues Kueue's cache does not consider active (a flavor
// or topology they need is missing), which would never admit anything.
func (k *Kueue) InactiveClusterQueues() []kueue.ClusterQueueReference {
	var out []kueue.ClusterQueueReference
	for _, n := range k.cqs {
		if !k.cache.ClusterQueueActive(n) {
			out = append(out, n)
		}
	}
	return out
}

// HasHeads reports whether a scheduling cycle would find a workload to try now.
func (k *Kueue) HasHeads() bool {
	if !k.headsKnown {
		k.headsVal, k.headsKnown = k.heads.any(k.cache.ClusterQueueActive), true
	}
	return k.headsVal
}

// Heads is the number of active ClusterQueues with a workload to try: the heads a cycle would
// take now.
func (k *Kueue) Heads() int { return k.heads.active(k.cache.ClusterQueueActive) }

// Queued is the number of workloads in the ClusterQueues' heaps (waiting to be tried; the
// inadmissible ones wait elsewhere until the cluster changes).
func (k *Kueue) Queued() int { return k.heads.count() }

// Cycle runs one scheduling cycle of Kueue's scheduler, (*scheduler.Scheduler).schedule (seam 1),
// which must have heads (HasHeads). keepGoing is the cycle's wait.SpeedSignal as a bool:
// wait.KeepGoing (true) when Kueue's loop runs the next cycle at once (the cycle admitted what it
// tried), wait.SlowDown (false) when the loop backs off. Kueue's writes are in the Store's changes
// when it returns.
func (k *Kueue) Cycle() (keepGoing bool, err error) {
	if !k.HasHeads() {
		return false, errors.New("kueue: a scheduling cycle without heads would block")
	}
	k.cycles++
	k.headsKnown = false
	keepGoing = schedule(k.sched, k.ctx) == wait.KeepGoing
	k.batchRequeues()
	return keepGoing, nil
}

// Cycles is the number of cycles run.
func (k *Kueue) Cycles() int64 { return k.cycles }

// Deliver hands each of changes to the workload controller's event handlers, as its informer
// would (create, update or delete), which update the queues and the cache.
func (k *Kueue) Deliver(c Change) {
	k.headsKnown = false
	var queue bool
	switch {
	case c.Old == nil:
		queue = k.reconciler.Create(event.TypedCreateEvent[*kueue.Workload]{Object: c.New})
	case c.New == nil:
		queue = k.reconciler.Delete(event.TypedDeleteEvent[*kueue.Workload]{Object: c.Old})
	default:
		queue = k.reconciler.Update(event.TypedUpdateEvent[*kueue.Workload]{ObjectOld: c.Old, ObjectNew: c.New})
	}
	if queue {
		k.work.add(c.Key())
	}
	k.queueForBooster(c)
	k.batchRequeues()
}

func activeCondition() metav1.Condition {
	return metav1.Condition{Type: kueue.ClusterQueueActive, Status: "True", Reason: "Ready", Message: "Can admit new workloads"}
}
