package runner

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// EnergyAnnotation is the pod annotation in which the agent writes a pod's energy (joules of
// trace time) at completion (runtime/agent.EnergyAnnotation).
const EnergyAnnotation = contract.Prefix + "energy-joules"

// watcher turns informer events on Kueue Workloads and pods into results events. A Kueue
// Workload maps to its trace workload through its owner reference: the owner is an object the
// runner created (or a trial Job of an experiment); a pod maps through its
// kueuelab.io/workload-id label. Times are the trace time at which the runner observed the change
// (Kubernetes timestamps have one-second resolution, which is minutes of trace time at high
// speedup).
type watcher struct {
	plan   *plan
	rec    *results.Recorder
	clk    *simclock.Clock
	trials *trials

	mu       sync.Mutex
	wls      map[types.UID]*wlState
	pods     map[string]*podState // by namespace/name
	running  map[string]int       // running pods per workload id
	expected map[string]int       // pods of a workload's Kueue Workload (not for experiments)
	// reserved counts, per Kueue Workload holding quota (QuotaReserved and not Finished), its
	// pods; admitted sums them per workload id and unsched counts pods the scheduler rejected.
	reserved map[types.UID]int
	admitted map[string]int
	unsched  map[string]int
}

// Holds on the trace clock (see runtime/simclock): each covers a step the control plane
// completes in wall time that a real cluster would spend, not speedup times as much.
func submitHold(owner string) string { return "submit/" + owner } // create → Kueue tried to admit
func runHold(id string) string       { return "run/" + id }       // quota reserved → pods Running; pods done → Finished

// cycleHold covers Kueue's scheduling cycle after quota is released: it ends when Kueue reserves
// quota for any workload, or after cycleHoldLimit when nothing fits.
const (
	cycleHold      = "kueue-cycle"
	cycleHoldLimit = 100 * time.Millisecond
)

type wlState struct {
	id    string
	trial *trialRef
	// seen holds, per condition type, the lastTransitionTime and reason of the True condition
	// already reported ("" after it went False, so the next True is a new event).
	seen     map[string]string
	evicted  bool
	finished bool
}

type podState struct {
	id         string
	gpus       int64
	running    bool
	unsched    bool
	since      float64
	energyDone bool
}

func newWatcher(p *plan, rec *results.Recorder, clk *simclock.Clock, tr *trials) *watcher {
	return &watcher{plan: p, rec: rec, clk: clk, trials: tr, wls: map[types.UID]*wlState{}, pods: map[string]*podState{},
		running: map[string]int{}, expected: map[string]int{}, reserved: map[types.UID]int{}, admitted: map[string]int{},
		unsched: map[string]int{}}
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
	c, err := cache.New(rc, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}:     {Label: sel, Namespaces: nss},
		&kueue.Workload{}: {Namespaces: nss},
	}})
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	wlInf, err := c.GetInformer(ctx, &kueue.Workload{})
	if err != nil {
		return nil, fmt.Errorf("watch Workloads: %w", err)
	}
	podInf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	if _, err := c.GetInformer(ctx, &corev1.Node{}); err != nil {
		return nil, fmt.Errorf("watch nodes: %w", err)
	}
	if _, err := wlInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.onWorkload(o) },
		UpdateFunc: func(_, o any) { w.onWorkload(o) },
	}); err != nil {
		return nil, err
	}
	if _, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.onPod(o, false) },
		UpdateFunc: func(_, o any) { w.onPod(o, false) },
		DeleteFunc: func(o any) { w.onPod(o, true) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }() // Start returns when ctx ends; a failure shows as a sync timeout
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watch: caches did not sync: %w", context.Cause(ctx))
	}
	return c, nil
}

func (w *watcher) emit(e results.Event) { _, _ = w.rec.Record(e) } // log errors surface at Close

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

// reportedConditions are the Workload conditions recorded, in the order they are checked.
var reportedConditions = []string{kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadEvicted,
	kueue.WorkloadPreempted, kueue.WorkloadRequeued, kueue.WorkloadFinished}

func (w *watcher) onWorkload(o any) {
	wl, ok := o.(*kueue.Workload)
	if !ok {
		return
	}
	now := w.clk.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.wls[wl.UID]
	if st == nil {
		id, tr, ok := w.resolve(wl)
		if !ok {
			return
		}
		st = &wlState{id: id, trial: tr, seen: map[string]string{}}
		w.wls[wl.UID] = st
		w.emit(results.Event{T: now, Workload: id, Type: results.EvWorkloadCreated, Object: wl.Namespace + "/" + wl.Name})
		if tr == nil {
			n := 0
			for _, ps := range wl.Spec.PodSets {
				n += int(ps.Count)
			}
			w.expected[id] = n
		}
	}
	obj := wl.Namespace + "/" + wl.Name
	for _, typ := range reportedConditions {
		c := meta.FindStatusCondition(wl.Status.Conditions, typ)
		if c == nil || c.Status != "True" {
			if c != nil {
				st.seen[typ] = ""
			}
			continue
		}
		key := c.LastTransitionTime.UTC().String() + "/" + c.Reason
		if st.seen[typ] == key {
			continue
		}
		st.seen[typ] = key
		e := results.Event{T: now, Workload: st.id, Object: obj, Reason: c.Reason, Message: c.Message}
		switch typ {
		case kueue.WorkloadQuotaReserved:
			e.Type, e.Flavors, e.Message = results.EvQuotaReserved, flavorsOf(wl), ""
		case kueue.WorkloadAdmitted:
			e.Type, e.Flavors, e.Message = results.EvAdmitted, flavorsOf(wl), ""
		case kueue.WorkloadEvicted:
			st.evicted = true
			e.Type = results.EvEvicted
		case kueue.WorkloadPreempted:
			e.Type = results.EvPreempted
		case kueue.WorkloadRequeued:
			if !st.evicted {
				continue // Kueue also sets Requeued when a workload is first queued
			}
			e.Type = results.EvRequeued
		case kueue.WorkloadFinished:
			if st.finished {
				continue
			}
			st.finished = true
			failed := c.Reason != kueue.WorkloadFinishedReasonSucceeded
			if st.trial == nil {
				e.Type, e.Reason = results.EvFinished, outcome(failed)
				break
			}
			verdict := w.trials.finish(*st.trial, failed)
			if verdict == "" {
				continue
			}
			e.Type, e.Reason, e.Message = results.EvFinished, verdict, "all trials finished"
		}
		w.emit(e)
	}
	w.holdWorkload(wl, st.id)
}

// holdWorkload updates the trace clock's holds for a Kueue Workload of workload id.
func (w *watcher) holdWorkload(wl *kueue.Workload, id string) {
	finished := meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished)
	if finished || meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved) != nil {
		for _, ref := range wl.OwnerReferences {
			w.clk.Release(submitHold(ownerKey(ref.Kind, wl.Namespace, ref.Name)))
		}
	}
	n := 0
	if !finished && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		for _, ps := range wl.Spec.PodSets {
			n += int(ps.Count)
		}
	}
	prev := w.reserved[wl.UID]
	switch {
	case n == prev:
	case n > 0 && prev == 0:
		w.clk.Release(cycleHold)
	case n == 0:
		w.clk.Release(cycleHold) // restart it: this release may admit workloads the last one did not
		w.clk.HoldFor(cycleHold, cycleHoldLimit)
	}
	if n == 0 {
		delete(w.reserved, wl.UID)
	} else {
		w.reserved[wl.UID] = n
	}
	w.admitted[id] += n - prev
	w.holdRun(id)
}

// holdRun holds the clock while workload id has quota for more pods than are running, unless
// the scheduler rejected one of them: waiting for a node is simulated time, not control-plane lag.
func (w *watcher) holdRun(id string) {
	if w.admitted[id] > w.running[id] && w.unsched[id] == 0 {
		w.clk.Hold(runHold(id))
	} else {
		w.clk.Release(runHold(id))
	}
}

func outcome(failed bool) string {
	if failed {
		return results.StateFailed
	}
	return results.StateSucceeded
}

// flavorsOf maps each pod set to the flavor of its GPU resource, else of its cpu.
func flavorsOf(wl *kueue.Workload) map[string]string {
	if wl.Status.Admission == nil {
		return nil
	}
	out := map[string]string{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		pick := ""
		names := make([]string, 0, len(psa.Flavors))
		for r := range psa.Flavors {
			names = append(names, string(r))
		}
		sort.Strings(names)
		for _, r := range names {
			f := string(psa.Flavors[corev1.ResourceName(r)])
			switch {
			case isGPU(r):
				pick = f
			case r == string(corev1.ResourceCPU) && pick == "":
				pick = f
			}
		}
		if pick == "" && len(names) > 0 {
			pick = string(psa.Flavors[corev1.ResourceName(names[0])])
		}
		out[string(psa.Name)] = pick
	}
	return out
}

func isGPU(resource string) bool { return strings.HasSuffix(resource, "/gpu") }

func (w *watcher) onPod(o any, deleted bool) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	id, ok := w.plan.byLabel[p.Namespace+"/"+p.Labels[contract.WorkloadLabel]]
	if !ok {
		return
	}
	now := w.clk.Now()
	key := p.Namespace + "/" + p.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.pods[key]
	if st == nil {
		st = &podState{id: id, gpus: podGPUs(&p.Spec)}
		w.pods[key] = st
	}
	running := !deleted && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning
	switch {
	case running && !st.running:
		st.running, st.since = true, now
		w.running[id]++
		w.emit(results.Event{T: now, Workload: id, Type: results.EvPodRunning, Object: key})
		if n := w.expected[id]; n > 0 && w.running[id] >= n {
			w.emit(results.Event{T: now, Workload: id, Type: results.EvAllPodsRunning})
		}
	case !running && st.running:
		st.running = false
		w.running[id]--
		e := results.Event{T: now, Workload: id, Type: results.EvPodFinished, Object: key, Reason: string(p.Status.Phase),
			GPUSeconds: float64(st.gpus) * (now - st.since)}
		e.EnergyJ, st.energyDone = energyOf(p, st.energyDone)
		w.emit(e)
	default:
		if j, done := energyOf(p, st.energyDone); done && !st.energyDone {
			st.energyDone = true
			w.emit(results.Event{T: now, Workload: id, Type: results.EvPodFinished, Object: key, Reason: string(p.Status.Phase), EnergyJ: j})
		}
	}
	unsched := !deleted && !running && unschedulable(p)
	if unsched != st.unsched {
		st.unsched = unsched
		if unsched {
			w.unsched[id]++
			w.emit(results.Event{T: now, Workload: id, Type: results.EvPodUnschedulable, Object: key, Message: scheduledMessage(p)})
		} else {
			w.unsched[id]--
		}
	}
	if deleted {
		delete(w.pods, key)
	}
	w.holdRun(id)
}

func unschedulable(p *corev1.Pod) bool {
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

// energyOf returns the agent's energy annotation once: (joules, true) the first time it is seen.
func energyOf(p *corev1.Pod, already bool) (float64, bool) {
	if already {
		return 0, true
	}
	s, ok := p.Annotations[EnergyAnnotation]
	if !ok {
		return 0, false
	}
	j, err := strconv.ParseFloat(s, 64)
	if err != nil || j < 0 {
		return 0, false
	}
	return j, true
}
