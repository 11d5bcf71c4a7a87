package runner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// watcher turns informer events on Kueue Workloads and pods into results events, and keeps the
// trace clock's holds on every step of a workload's life that the control plane owes:
//
//	step                                         hold          ends when
//	job created → Kueue Workload                 submit        the Workload is seen (submitter places it)
//	Workload → Kueue's decision                  kueue         Kueue's queues agree with the API (settler)
//	quota reserved → every pod created           pods          as many pods seen as the Workload's pod sets count
//	pod created → Running, started by the agent  start         the agent acknowledges it, or the pod is Unschedulable
//	pod created → Running in this watcher's view seen          this watcher sees it Running, Unschedulable, ended or
//	                                                           deleted (the agent's informer may show Running first)
//	resources freed → kube-scheduler's decision  schedule      the scheduler's queues agree with the API (settler)
//	pod completed by the agent → pod terminal    done          this watcher sees the pod end (agent places it)
//	last pod ended → Workload Finished           finish        Finished, a new pod, or the quota released
//	Workload evicted → quota released            evict         QuotaReserved is False or the Workload Finished
//	quota released → its pods deleted            orphans       every pod live at the release ended or is being
//	                                                           deleted (the owner is asked to resync: findOrphans)
//	pod deleted → agent stops simulating it      gone          the agent acknowledges it
//	trial finished → next trial Jobs created     trials        the submitter has placed their submit holds
//	running workload's pod failed or deleted     recover       as many live pods of the newest attempt as the
//	  → its owner replaces it (or gives up)                    Workload needs, Finished, evicted or quota released
//	injected fault → its own steps seen          fault         see faults.go: the injector's writes seen, the
//	                                                           agent's acknowledgement (node down/up, pod
//	                                                           failed or restarted in place)
//
// A Kueue Workload maps to its trace workload through its owner reference: the owner is an object
// the runner created (or a trial Job of an experiment); a pod maps through its
// kueuelab.io/workload-id label (and, for a trial, its Job's name). Times are the trace time at
// which the watcher observed the change, which the holds make the time it happened; a pod's end is
// the time the agent's annotation says.
type watcher struct {
	plan   *plan
	rec    *results.Recorder
	clk    *simclock.Clock
	trials *trials
	kueue  *settler // nil: no Kueue settling (a clock without holds)
	sched  *settler
	timers *timers
	queues *queueView // nil without Kueue's metrics
	reader client.Reader

	mu sync.Mutex
	// kueueClock is the local Kueue on the trace clock (nil: Kueue keeps wall time): the clock
	// holds after a Workload change until Kueue has taken it in, and after Kueue's writes until
	// this watcher has handled them.
	kueueClock kueueWorkloads
	units      map[string]*unit // by unit key: the workload id, or id#n for trial n
	byWL       map[types.UID]*unit
	pods       map[string]*podState // by namespace/name
	unsched    map[types.UID]bool   // pods the scheduler rejected (parked), over all units
	// before holds the Workloads and pods that existed before the run (markBefore).
	before  map[types.UID]bool
	late    lateStats
	changed time.Time     // wall time of the last informer event
	faults  faultObserver // nil without fault injection
	resync  *resyncer     // nil: orphaned pods are held for, their owners not asked to resync
	// guard sees every event the watcher emits; loop receives the first preemption loop it finds
	// (results.LoopGuard): the run ends with it.
	guard results.LoopGuard
	loop  chan error
}

// faultObserver is told of every pod and node change after the watcher handled it: the fault
// injector waits there for its writes to show.
type faultObserver interface {
	pod(p *corev1.Pod, deleted bool)
	node(n *corev1.Node)
}

// unit is one Kueue Workload of a trace workload: the workload itself, or one trial of an
// experiment.
type unit struct {
	key   string
	id    string
	trial *trialRef
	wl    types.UID
	obj   string // namespace/name of the Workload
	// conds turns its Workload's conditions into events.
	conds    kueuewl.Tracker
	expected int // pods of the Workload's pod sets
	// kueueTracks: the Workload has a PodsReady condition (Kueue runs waitForPodsReady);
	// kueueReady: it is True.
	kueueTracks, kueueReady bool
	reserved                bool
	evicted                 bool // Evicted=True now
	finished                bool
	admitted                float64              // trace time of the current quota reservation
	created                 map[types.UID]bool   // pods seen since the current quota reservation
	pods                    map[string]*podState // its pods the watcher knows, by namespace/name
	live                    int                  // pods not terminal and not being deleted
	running                 int
	allUp                   bool    // every expected pod has run since the current reservation
	lastEnd                 float64 // trace time the last of its pods ended (0: none yet)
	// succeeded counts its pods that succeeded since the current reservation; recoverFrom is the
	// restart attempt whose pods a recovery waits for (see restartAttempt).
	succeeded   int
	recoverFrom int
	// owner is the object its Workload belongs to (the job render made); orphans are its pods,
	// by namespace/name, that were neither ended nor being deleted when its quota was released.
	owner   metav1.OwnerReference
	orphans map[string]bool
}

type podState struct {
	unit       *unit
	uid        types.UID
	gpus       int64
	held       float64 // GPUs it holds while it runs, a MIG slice as its share (hw.GPU.Held)
	timeSliced bool    // it holds replicas of time-sliced GPUs
	running    bool
	everRan    bool
	terminal   bool
	deleting   bool
	unsched    bool
	verdict    string // kube-scheduler's message while unsched
	since      float64
	energyDone bool
	attempt    int // JobSet restart attempt (-1: none)
}

// held is the GPUs running pod p holds on its node, as the sim counts them (the engine's
// HeldGPUs): its whole GPUs, the MIG slices its render contract names as their share of the node's
// GPU (hw.GPU.Held), or its replicas' share of time-sliced GPUs (timeSliced).
func (w *watcher) held(p *corev1.Pod, gpus int64) (held float64, timeSliced bool) {
	_, onSlices := p.Annotations[contract.MIGSlices] // render writes the key only for pods on slices
	if !onSlices && gpus == 0 || p.Spec.NodeName == "" || w.reader == nil {
		return float64(gpus), false
	}
	var n corev1.Node
	if err := w.reader.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, &n); err != nil {
		return float64(gpus), false
	}
	if !onSlices {
		if r, err := contract.GPUReplicas(n.Labels); err == nil && r > 1 {
			return float64(gpus) / float64(r), true
		}
		return float64(gpus), false
	}
	c, err := contract.Parse(p.Annotations)
	if err != nil || c.MIGSlices == 0 {
		return float64(gpus), false
	}
	cat, err := defaultCatalog()
	if err != nil {
		return float64(gpus), false
	}
	g, ok := cat.GPU(n.Labels[contract.GPUFamily])
	if !ok {
		return float64(gpus), false
	}
	return g.Held(gpus, c.MIGProfile, c.MIGSlices), false
}

// defaultCatalog is the embedded hardware catalog (the agent's too), read once per process: its
// fault rates and MIG tables are read-only.
var defaultCatalog = sync.OnceValues(hw.DefaultCatalog)

// lateStats measures what the holds missed: a pod end observed after the trace time at which the
// agent ended it, or a Workload seen Finished after its last pod ended, means the clock moved while
// the control plane still owed a step.
type lateStats struct {
	n     int
	max   float64
	worst string // what the worst one was
}

// add counts a step observed d trace seconds after it happened.
func (l *lateStats) add(d float64, what string) {
	l.n++
	if d > l.max {
		l.max, l.worst = d, what
	}
}

func newWatcher(p *plan, rec *results.Recorder, clk *simclock.Clock, tr *trials) *watcher {
	w := &watcher{plan: p, rec: rec, clk: clk, trials: tr, units: map[string]*unit{}, byWL: map[types.UID]*unit{},
		pods: map[string]*podState{}, unsched: map[types.UID]bool{}, before: map[types.UID]bool{}, loop: make(chan error, 1)}
	w.guard.Stall(p.records)
	return w
}

// start runs informers on Workloads and pods (in the run's namespaces) and nodes, and returns
// once their caches are synced. The cache is also what the sampler reads.
func (w *watcher) start(ctx context.Context, rc *rest.Config, scheme *runtime.Scheme) (cache.Cache, error) {
	sel, err := labelSelector(contract.WorkloadLabel)
	if err != nil {
		return nil, err
	}
	nss := map[string]cache.Config{}
	for _, ns := range w.plan.namespaces {
		nss[ns] = cache.Config{}
	}
	// Workloads of every namespace: Kueue's queues hold everyone's, and the Kueue settler compares
	// them with its view.
	c, err := cache.New(rc, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: sel, Namespaces: nss},
	}})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	w.reader = c
	if _, err := c.GetInformer(ctx, &kueue.LocalQueue{}); err != nil {
		return nil, fmt.Errorf("watch LocalQueues: %w", err)
	}
	wlInf, err := c.GetInformer(ctx, &kueue.Workload{})
	if err != nil {
		return nil, fmt.Errorf("watch Workloads: %w", err)
	}
	podInf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	nodeInf, err := c.GetInformer(ctx, &corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	// What the first list holds was there before the run: an earlier run's Workloads and pods
	// of the same names (being deleted as it ended) are not this run's.
	if _, err := wlInf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if initial {
				w.markBefore(o)
			}
			w.onWorkload(o, false)
		},
		UpdateFunc: func(_, o any) { w.onWorkload(o, false) },
		DeleteFunc: func(o any) { w.onWorkload(o, true) },
	}); err != nil {
		return nil, err
	}
	if _, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if initial {
				w.markBefore(o)
			}
			w.onPod(o, false)
		},
		UpdateFunc: func(_, o any) { w.onPod(o, false) },
		DeleteFunc: func(o any) { w.onPod(o, true) },
	}); err != nil {
		return nil, err
	}
	// A node added or changed may let kube-scheduler place pods it rejected.
	if _, err := nodeInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.pokeScheduler() },
		UpdateFunc: func(o, n any) { w.onNodeUpdate(o, n) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }() // Start returns when ctx ends; a failure shows as a sync timeout
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watch: caches did not sync: %w", context.Cause(ctx))
	}
	return c, nil
}

// emit records e (log errors surface at Close) and shows it to the loop guard. Called with w.mu held.
func (w *watcher) emit(e results.Event) {
	_, _ = w.rec.Record(e)
	if err := w.guard.Observe(&e); err != nil {
		select {
		case w.loop <- fmt.Errorf("%w, the last time: %s: %s", err, e.Reason, e.Message):
		default: // one is enough
		}
	}
}

// resolve maps a Kueue Workload to its trace workload through its owner references.
func (w *watcher) resolve(wl *kueue.Workload) (string, *trialRef, bool) {
	for _, ref := range wl.OwnerReferences {
		if id, ok := w.plan.owners[ownerKey(ref.Kind, wl.Namespace, ref.Name)]; ok {
			return id, nil, true
		}
		if ref.Kind == "Job" && w.trials != nil {
			if tr, ok := w.trials.lookup(wl.Namespace, ref.Name); ok {
				return tr.id, &tr, true
			}
		}
	}
	return "", nil, false
}

func unitKey(id string, tr *trialRef) string {
	if tr == nil {
		return id
	}
	return id + "#" + strconv.Itoa(tr.n)
}

// kueueWorkloads is kueueclock.Follower's side for Workload changes.
type kueueWorkloads interface {
	Saw(revision int64)
	Observed(revision int64)
}

// Hold keys of a unit and of a pod.
func holdPods(u *unit) simclock.Key   { return simclock.Key{Kind: simclock.KindPods, ID: u.key} }
func holdFinish(u *unit) simclock.Key { return simclock.Key{Kind: simclock.KindFinish, ID: u.key} }
func holdEvict(u *unit) simclock.Key  { return simclock.Key{Kind: simclock.KindEvict, ID: u.key} }
func holdRecover(u *unit) simclock.Key {
	return simclock.Key{Kind: simclock.KindRecover, ID: u.key}
}
func holdPodsReady(u *unit) simclock.Key {
	return simclock.Key{Kind: simclock.KindPodsReady, ID: u.key}
}
func holdOrphans(u *unit) simclock.Key { return simclock.Key{Kind: simclock.KindOrphans, ID: u.key} }

// holdSeen is the watcher's own hold on a pod's start. The agent ends the start hold when its
// informer shows the pod Running, and this watcher records pod_running at the trace time at which
// its informer does: the two watches are independent, and without this hold the clock could move
// in between, to the next alarm, and the start would be recorded that much late.
func holdSeen(uid types.UID) simclock.Key {
	return simclock.Key{Kind: simclock.KindSeen, ID: string(uid)}
}

func (w *watcher) onWorkload(o any, deleted bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	wl, ok := o.(*kueue.Workload)
	if !ok {
		return
	}
	now := w.clk.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changed = time.Now()
	if rv, ok := kueueclock.Revision(wl.ResourceVersion); ok && w.kueueClock != nil {
		if !deleted {
			w.kueueClock.Saw(rv)
		}
		defer w.kueueClock.Observed(rv)
	}
	// Kueue owes a decision when a Workload enters, leaves or moves within its queues while any
	// Workload waits in them (without the view, on every change). With nothing pending, a finish
	// or an admission leaves Kueue nothing to decide; the next poke's comparison still waits for
	// Kueue to have caught up with it.
	if w.queues == nil || (w.queues.update(wl, deleted) && w.queues.anyPending()) {
		if w.kueue != nil {
			w.kueue.poke()
		}
	}
	u := w.byWL[wl.UID]
	if u == nil {
		if deleted || w.before[wl.UID] {
			return
		}
		id, tr, ok := w.resolve(wl)
		if !ok {
			return
		}
		key := unitKey(id, tr)
		u = w.units[key]
		if u == nil {
			u = newUnit(key, id, tr)
			w.units[key] = u
		}
		u.wl, u.obj = wl.UID, wl.Namespace+"/"+wl.Name
		w.byWL[wl.UID] = u
		w.emit(results.Event{T: now, Workload: id, Type: results.EvWorkloadCreated, Object: u.obj})
		for _, ref := range wl.OwnerReferences {
			w.clk.Release(submitHold(ownerKey(ref.Kind, wl.Namespace, ref.Name)))
		}
		if ref := metav1.GetControllerOfNoCopy(wl); ref != nil {
			u.owner = *ref
		} else if len(wl.OwnerReferences) > 0 {
			u.owner = wl.OwnerReferences[0]
		}
	}
	if deleted {
		// A Workload deleted before it finished (its job deleted): nothing more is owed for it.
		w.endUnit(u)
		delete(w.byWL, wl.UID)
		return
	}
	if u.finished {
		// Finished is final in Kueue. A restarted Kueue rewrites a finished Workload's
		// conditions (new transition times, QuotaReserved seen again): none of that is a step of
		// the workload's life, and it must not be recorded twice or hold the clock.
		return
	}
	w.conditions(u, wl, now)
	n := 0
	for _, ps := range wl.Spec.PodSets {
		n += int(ps.Count)
	}
	u.expected = n
	finished := meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
	reserved := !finished && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	switch {
	case reserved && !u.reserved:
		// Pods left from the last admission that the owner reuses belong to this one.
		w.clearOrphans(u)
		u.reserved, u.admitted, u.allUp, u.succeeded = true, now, false, 0
		// Lateness of this admission's Finished is measured against this admission's pods: the
		// end of a pod an eviction stopped is no bound (the Workload informer may show Finished
		// before the pod informer shows the last pod's end).
		u.lastEnd = 0
		clear(u.created)
		for _, ps := range u.pods {
			// Pods of an earlier admission still being deleted do not count for this one.
			if !ps.terminal && !ps.deleting {
				u.created[ps.uid] = true
			}
		}
		if len(u.created) < u.expected {
			w.clk.Hold(holdPods(u))
		}
		// The pod informer may have shown every pod Running before this informer showed the
		// reservation: they are all up now.
		w.allPodsUp(u, now)
		// Or it may have shown a pod parked: kube-scheduler's verdict is on this reservation's
		// pod, and the wait's reason (results.ReservedIdle) reads the verdicts within the wait.
		for _, key := range slices.Sorted(maps.Keys(u.pods)) {
			if ps := u.pods[key]; ps.unsched && !ps.terminal && !ps.deleting {
				w.emit(results.Event{T: now, Workload: u.id, Type: results.EvPodUnschedulable, Object: key, Message: ps.verdict})
			}
		}
	case !reserved && u.reserved:
		u.reserved = false
		w.clk.Release(holdPods(u))
		w.clk.Release(holdFinish(u))
		w.clk.Release(holdEvict(u))
		w.clk.Release(holdRecover(u))
		if w.timers != nil {
			w.timers.released(u)
		}
		if !finished {
			w.findOrphans(u)
		}
	}
	if finished && !u.finished {
		u.finished = true
		w.endUnit(u)
	}
	if u.evicted && u.reserved {
		w.clk.Hold(holdEvict(u))
		w.clk.Release(holdRecover(u)) // Kueue took over: the owner no longer replaces pods
	}
	ready := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady)
	u.kueueTracks, u.kueueReady = ready != nil, ready != nil && ready.Status == metav1.ConditionTrue
	w.syncPodsReady(u)
	if w.timers != nil {
		w.timers.workload(u, wl, now)
	}
}

// syncPodsReady holds the clock while every pod of an admitted Workload runs and its PodsReady
// condition does not say so yet. With waitForPodsReady (on by default from Kueue v0.19; Kueue
// then gives every Workload the condition), Kueue counts its timeout from the admission until its
// job reconciler marks the pods ready, after the job's own status says so (a JobSet's ready
// replicated jobs, a Kubeflow job's Running condition): if the clock moved on before that write, a
// Workload whose pods all run in no trace time could time out.
func (w *watcher) syncPodsReady(u *unit) {
	if !u.kueueTracks {
		return
	}
	if u.reserved && !u.evicted && !u.finished && u.allRunning() && !u.kueueReady {
		w.clk.Hold(holdPodsReady(u))
	} else {
		w.clk.Release(holdPodsReady(u))
	}
}

// allRunning reports whether every expected pod of u runs.
func (u *unit) allRunning() bool { return u.expected > 0 && u.running >= u.expected }

// allPodsUp reports all_pods_running once per reservation of u, when every expected pod runs.
func (w *watcher) allPodsUp(u *unit, now float64) {
	if u.trial == nil && u.reserved && !u.allUp && u.allRunning() {
		u.allUp = true
		w.emit(results.Event{T: now, Workload: u.id, Type: results.EvAllPodsRunning})
	}
}

// endUnit releases every hold of a unit that no longer holds quota: it finished or was deleted.
func (w *watcher) endUnit(u *unit) {
	u.reserved = false
	w.guard.Finished(u.obj) // a trial's end has no finished event of its own
	w.clk.Release(holdPods(u))
	w.clk.Release(holdFinish(u))
	w.clk.Release(holdEvict(u))
	w.clk.Release(holdRecover(u))
	w.clk.Release(holdPodsReady(u))
	w.clearOrphans(u)
	if w.timers != nil {
		w.timers.released(u)
	}
}

// findOrphans holds the clock for u's pods that are neither ended nor being deleted when its
// quota is released. Kueue releases quota once the job reports no active pods, and an operator may
// report none while pods it created an instant before the suspension still run: its informer
// cache did not have them when it deleted the job's pods. They run on GPUs Kueue counts free
// until the operator looks again, which mpi-operator, backing off on every event, may not do for
// up to 1,000 wall seconds. The owner is asked to resync (resync) and the clock waits until the
// pods are deleted, as if the operator had seen them at once.
func (w *watcher) findOrphans(u *unit) {
	for key, ps := range u.pods {
		if !ps.terminal && !ps.deleting {
			if u.orphans == nil {
				u.orphans = map[string]bool{}
			}
			u.orphans[key] = true
		}
	}
	if len(u.orphans) == 0 {
		return
	}
	w.clk.Hold(holdOrphans(u))
	if w.resync != nil && u.owner.Name != "" {
		ns, _, _ := strings.Cut(u.obj, "/")
		w.resync.ask(u.key, ns, u.owner)
	}
}

// orphanGone notes that an orphaned pod of u ended or is being deleted.
func (w *watcher) orphanGone(u *unit, key string) {
	if !u.orphans[key] {
		return
	}
	delete(u.orphans, key)
	if len(u.orphans) == 0 {
		w.clk.Release(holdOrphans(u))
	}
}

func (w *watcher) clearOrphans(u *unit) {
	if len(u.orphans) > 0 {
		clear(u.orphans)
		w.clk.Release(holdOrphans(u))
	}
}

// orphaned says whether pods of the unit with this key still outlive its quota.
func (w *watcher) orphaned(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.units[key]
	return u != nil && len(u.orphans) > 0
}

// conditions records the Workload's transitions since the last update (kueuewl.Tracker).
func (w *watcher) conditions(u *unit, wl *kueue.Workload, now float64) {
	for _, tr := range u.conds.Observe(wl) {
		e := results.Event{T: now, Workload: u.id, Object: u.obj, Type: tr.Type, Reason: tr.Reason, Message: tr.Message, Flavors: tr.Flavors}
		switch tr.Type {
		case results.EvEvicted:
			u.evicted = true
		case results.EvFinished:
			if u.lastEnd > 0 && now-u.lastEnd > 1e-6 {
				w.late.add(now-u.lastEnd, fmt.Sprintf("Workload %s Finished at %.3f, its last pod ended at %.3f", u.obj, now, u.lastEnd))
			}
			if u.trial == nil {
				break
			}
			// finish holds the clock until the experiment's next trials are created.
			verdict := w.trials.finish(*u.trial, tr.Failed)
			if verdict == "" {
				continue
			}
			e.Reason, e.Message = verdict, "all trials finished"
		}
		w.emit(e)
	}
	if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted) {
		u.evicted = false
	}
}

// markBefore notes an object that existed before the run (its watch's first list): not the run's,
// whatever its owner's name and labels say.
func (w *watcher) markBefore(o any) {
	if m, ok := o.(metav1.Object); ok {
		w.mu.Lock()
		w.before[m.GetUID()] = true
		w.mu.Unlock()
	}
}

// podUnit maps a pod to its unit, creating the unit if its Workload was not seen yet.
func (w *watcher) podUnit(p *corev1.Pod) *unit {
	id, ok := w.plan.byLabel[p.Namespace+"/"+p.Labels[contract.WorkloadLabel]]
	if !ok {
		return nil
	}
	var tr *trialRef
	if w.trials != nil {
		if r, ok := w.trials.lookup(p.Namespace, p.Labels["batch.kubernetes.io/job-name"]); ok && r.id == id {
			tr = &r
		}
	}
	key := unitKey(id, tr)
	u := w.units[key]
	if u == nil {
		u = newUnit(key, id, tr)
		w.units[key] = u
	}
	return u
}

func newUnit(key, id string, tr *trialRef) *unit {
	return &unit{key: key, id: id, trial: tr, created: map[types.UID]bool{}, pods: map[string]*podState{}}
}

func (w *watcher) onPod(o any, deleted bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	now := w.clk.Now()
	key := p.Namespace + "/" + p.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changed = time.Now()
	st := w.pods[key]
	if st != nil && st.uid != p.UID {
		w.podGone(key, st) // replaced under the same name; the delete event was missed
		w.orphanGone(st.unit, key)
		delete(st.unit.pods, key)
		st = nil
	}
	if st == nil {
		if w.before[p.UID] {
			return
		}
		u := w.podUnit(p)
		if u == nil {
			return
		}
		st = &podState{unit: u, uid: p.UID, gpus: kueuewl.PodGPUs(&p.Spec), attempt: restartAttempt(p)}
		w.pods[key] = st
		u.pods[key] = st
		if !deleted && p.DeletionTimestamp == nil && !podTerminal(p) {
			u.live++
			// The pod is owed its start: scheduling, KWOK's Running, the agent's start, this
			// watcher's sight of it Running. These holds take over from the ones released below
			// (pods, finish, recover), so they go first: the clock moves as soon as no hold has
			// been active for its settle window, which a busy machine can spend between two calls.
			w.clk.Hold(simclock.PodStart(p.UID))
			if p.Status.Phase != corev1.PodRunning {
				w.clk.Hold(holdSeen(p.UID))
			}
			// Its owner made a new pod (a replacement, a JobSet's next attempt): the workload
			// goes on, so its last pods' end no longer owes its finish. Left held, the finish
			// hold would stall the clock to its limit and, expired, not wait for the real end.
			w.clk.Release(holdFinish(u))
			// Nor is an earlier pod's end a bound for the Workload's Finished, which the Workload
			// informer may show before the pod informer shows this pod's end.
			u.lastEnd = 0
			if u.reserved {
				u.created[p.UID] = true
				if len(u.created) >= u.expected {
					w.clk.Release(holdPods(u))
				}
			}
			w.recovered(u)
		}
	}
	u := st.unit
	running := !deleted && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
	switch {
	case running && !st.running:
		w.clk.Release(holdSeen(p.UID))
		st.running, st.everRan, st.since = true, true, now
		st.held, st.timeSliced = w.held(p, st.gpus)
		u.running++
		w.emit(results.Event{T: now, Workload: u.id, Type: results.EvPodRunning, Object: key, Node: p.Spec.NodeName})
		w.allPodsUp(u, now)
		w.syncPodsReady(u)
	case !running && st.running:
		st.running = false
		u.running--
		w.syncPodsReady(u)
		at := now
		if t, ok := annotatedTime(p, contract.FinishedTraceSec); ok && podTerminal(p) {
			at = t
			if d := now - t; d > 1e-6 {
				w.late.add(d, fmt.Sprintf("pod %s seen ended at %.3f, the agent ended it at %.3f", key, now, t))
			}
		}
		u.lastEnd = at
		e := results.Event{T: at, Workload: u.id, Type: results.EvPodFinished, Object: key, Reason: string(p.Status.Phase),
			GPUSeconds: st.held * (at - st.since)}
		if st.timeSliced {
			// The agent writes the compute it used at completion; an evicted pod's comes with
			// the lost energy at the end of the run.
			e.TimeSlicedGPUSec = e.GPUSeconds
			if v, err := strconv.ParseFloat(p.Annotations[contract.BusyGPUSeconds], 64); err == nil && v > 0 && podTerminal(p) {
				e.BusyGPUSec = v
			}
		}
		e.EnergyJ, st.energyDone = energyOf(p, st.energyDone)
		w.emit(e)
	default:
		if j, done := energyOf(p, st.energyDone); done && !st.energyDone {
			st.energyDone = true
			w.emit(results.Event{T: now, Workload: u.id, Type: results.EvPodFinished, Object: key, Reason: string(p.Status.Phase), EnergyJ: j})
		}
	}
	unsched := !deleted && !running && p.DeletionTimestamp == nil && unschedulable(p)
	if unsched != st.unsched {
		st.unsched = unsched
		if unsched {
			w.unsched[p.UID] = true
			st.verdict = scheduledMessage(p)
			w.emit(results.Event{T: now, Workload: u.id, Type: results.EvPodUnschedulable, Object: key, Message: st.verdict})
			// Waiting for a node is simulated time, not control-plane lag, once kube-scheduler
			// has caught up (its cache may still hold a pod that just ended): its hold first.
			w.pokeScheduler()
			w.clk.Release(simclock.PodStart(p.UID))
			w.clk.Release(holdSeen(p.UID))
		} else {
			delete(w.unsched, p.UID)
			if !running && !deleted && p.DeletionTimestamp == nil && !podTerminal(p) && p.Spec.NodeName != "" {
				// A parked pod bound to a node is owed its start again, as a new pod is: KWOK's
				// Running, the agent's start, this watcher's sight of it. (The agent may have
				// acknowledged the start already; the clock then keeps no start hold.)
				w.clk.Hold(simclock.PodStart(p.UID))
				w.clk.Hold(holdSeen(p.UID))
			}
		}
	}
	switch {
	case deleted || p.DeletionTimestamp != nil:
		w.podGone(key, st)
		w.orphanGone(u, key)
		if deleted {
			delete(w.pods, key)
			delete(u.pods, key)
		}
	case podTerminal(p) && !st.terminal:
		st.terminal = true
		if t, ok := annotatedTime(p, contract.FinishedTraceSec); ok && !st.everRan {
			u.lastEnd = t // ended before the watcher saw it run
		}
		if p.Status.Phase == corev1.PodSucceeded && u.reserved {
			u.succeeded++
		}
		// What the end leaves owed (finish, recover, the scheduler's retry) is held before the
		// pod's own holds end.
		w.podEnded(u, st, p.Status.Phase == corev1.PodFailed)
		w.clk.Release(simclock.PodStart(p.UID))
		w.clk.Release(holdSeen(p.UID))
		w.clk.Release(simclock.PodDone(p.UID))
		w.orphanGone(u, key)
	}
	if w.faults != nil {
		w.faults.pod(p, deleted)
	}
}

// podGone handles a pod being deleted: the agent must stop simulating it, and its end may be the
// workload's last.
func (w *watcher) podGone(key string, st *podState) {
	if st.deleting {
		return
	}
	st.deleting = true
	if st.unsched {
		st.unsched = false
		delete(w.unsched, st.uid)
	}
	if st.everRan && !st.terminal {
		w.clk.Hold(simclock.PodGone(st.uid))
	}
	if !st.terminal {
		st.terminal = true
		w.podEnded(st.unit, st, true)
	}
	w.clk.Release(simclock.PodStart(st.uid))
	w.clk.Release(holdSeen(st.uid))
	w.clk.Release(simclock.PodDone(st.uid))
	_ = key
}

// podEnded counts a pod of u that will not run again; the workload's last one leaves the control
// plane owing the Workload's finish (or, for a job that restarts pods, a new pod). A pod that
// failed, or was deleted before it ended, leaves the owner owing its replacement or the
// workload's end (recover).
func (w *watcher) podEnded(u *unit, st *podState, failed bool) {
	u.live--
	if u.live <= 0 && u.reserved && !u.finished && !u.evicted {
		w.clk.Hold(holdFinish(u))
	}
	if failed && u.reserved && !u.finished && !u.evicted {
		if st.attempt >= 0 {
			u.recoverFrom = max(u.recoverFrom, st.attempt+1)
		}
		w.clk.Hold(holdRecover(u))
	}
	w.pokeScheduler() // resources were freed
}

// pokeScheduler asks for kube-scheduler to settle when pods it rejected might fit now.
func (w *watcher) pokeScheduler() {
	if w.sched != nil && len(w.unsched) > 0 {
		w.sched.poke()
	}
}

func (w *watcher) onNodeUpdate(o, n any) {
	on, ok1 := o.(*corev1.Node)
	nn, ok2 := n.(*corev1.Node)
	if !ok1 || !ok2 {
		return
	}
	if w.faults != nil {
		w.faults.node(nn)
	}
	// KWOK renews node status (heartbeats) all the time; only what can change placement counts.
	if on.Spec.Unschedulable != nn.Spec.Unschedulable || len(on.Spec.Taints) != len(nn.Spec.Taints) ||
		!equalResources(on.Status.Allocatable, nn.Status.Allocatable) || !nodeReady(on) == nodeReady(nn) {
		w.mu.Lock()
		w.guard.Progress() // a node changed: Kueue's next decisions may differ from the last round's
		w.pokeScheduler()
		w.mu.Unlock()
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || !bv.Equal(v) {
			return false
		}
	}
	return true
}

func podTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func unschedulable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// scheduledMessage is the message of the pod's PodScheduled condition: why the scheduler found no node.
func scheduledMessage(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Message
		}
	}
	return ""
}

// annotatedTime reads a trace time the agent wrote on the pod.
func annotatedTime(p *corev1.Pod, key string) (float64, bool) {
	s, ok := p.Annotations[key]
	if !ok {
		return 0, false
	}
	t, err := strconv.ParseFloat(s, 64)
	return t, err == nil && t >= 0
}

// energyOf returns the agent's energy annotation once: (joules, true) the first time it is seen.
func energyOf(p *corev1.Pod, already bool) (float64, bool) {
	if already {
		return 0, true
	}
	s, ok := p.Annotations[contract.EnergyJoules]
	if !ok {
		return 0, false
	}
	j, err := strconv.ParseFloat(s, 64)
	if err != nil || j < 0 {
		return 0, false
	}
	return j, true
}

// lastChange is the wall time of the last Workload or pod event.
func (w *watcher) lastChange() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// lqToCQ maps a LocalQueue to its ClusterQueue: the plan's, then any other in the cluster.
func (w *watcher) lqToCQ(ns, lq string) (string, bool) {
	if cq := w.plan.cluster.ClusterQueue(ns, lq); cq != "" {
		return cq, true
	}
	if w.reader == nil {
		return "", false
	}
	var q kueue.LocalQueue
	if err := w.reader.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: lq}, &q); err != nil {
		return "", false
	}
	return string(q.Spec.ClusterQueue), true
}

// seedQueues counts every Workload of the synced cache in the queue view: the informer's first
// events may have come before the LocalQueues they point at were known.
func (w *watcher) seedQueues(ctx context.Context) error {
	var wls kueue.WorkloadList
	if err := w.reader.List(ctx, &wls); err != nil {
		return fmt.Errorf("list Workloads: %w", err)
	}
	for i := range wls.Items {
		w.queues.update(&wls.Items[i], false)
	}
	return nil
}

// queueCounts is the queue view's counts between two informer events: an event updates the view
// and places its holds under w.mu (see kueueCheck).
func (w *watcher) queueCounts() (pending, reserving map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queues.counts()
}

// parked lists the pods last seen parked by kube-scheduler (see schedulerCheck).
func (w *watcher) parked() []types.UID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Collect(maps.Keys(w.unsched))
}

// lateness reports the steps observed after their trace time, the worst delay and what it was.
func (w *watcher) lateness() (int, float64, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.late.n, w.late.max, w.late.worst
}

// restartAttemptLabel is JobSet's label of the restart attempt a pod belongs to
// (sigs.k8s.io/jobset/pkg/constants.RestartsKey): a JobSet restarts by recreating every pod.
const restartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt"

// restartAttempt is the pod's JobSet restart attempt, -1 for a pod of an owner that replaces pods
// one by one.
func restartAttempt(p *corev1.Pod) int {
	if v, ok := p.Labels[restartAttemptLabel]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return -1
}

// recovered ends u's recover hold once it has as many live pods as it needs (those of its pod
// sets that have not succeeded), counting for an owner that restarts whole (JobSet) only the pods
// of the attempt after the failure: the old attempt's pods may not be deleted yet.
func (w *watcher) recovered(u *unit) {
	if !w.clk.Held(holdRecover(u)) {
		return
	}
	live := 0
	for _, ps := range w.pods {
		if ps.unit == u && !ps.terminal && !ps.deleting && (ps.attempt < 0 || ps.attempt >= u.recoverFrom) {
			live++
		}
	}
	if live >= u.expected-u.succeeded {
		w.clk.Release(holdRecover(u))
	}
}
