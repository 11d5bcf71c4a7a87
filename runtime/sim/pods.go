package sim

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/hw"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/des"
	"github.com/kueuelab/kueuelab/runtime/sim/kubesched"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// The pods role: the operators create an admitted job's pods, the kube-scheduler role binds them
// to nodes (runtime/sim/kubesched), and the agent's physics engine (runtime/agent/engine, with
// the agent's own reading of nodes and pods) advances their work and energy from event to event:
// the loop ticks the engine exactly to the next event and asks it when the next pod will finish.
// A pod no node can take waits and is tried again whenever a pod leaves a node. A gang's members
// progress only while all of them run (the engine's gang semantics), so a gang placed in part
// holds its GPUs without progressing, as on a cluster.

// pod is one pod of an admitted Workload.
type pod struct {
	w     *kwl
	ps    int
	key   string // namespace/name, the engine's key
	name  string
	req   *kubesched.Request
	node  int // -1 until bound
	eid   engine.PodID
	since float64
	gpus  int64
	// held is the GPUs it holds on its node while it runs (engine.HeldGPUs): a MIG slice as its
	// compute share, a replica of a time-sliced GPU as its share of the replicas (timeSliced).
	held       float64
	timeSliced bool
	spec       engine.PodSpec
	fail       bool // fails when its work is done
	done       bool
	// ckpt is where its workload keeps the checkpoint of this role.
	ckpt string
	// restartSec is the workload's restart overhead; owed is whether this pod paid one (as a
	// replacement of an interrupted pod).
	restartSec float64
	owed       bool
}

type podRole struct {
	sim        *sim
	ks         *kubesched.Scheduler
	eng        *engine.Engine
	cat        *hw.Catalog
	nodeIDs    []engine.NodeID
	nodeFlavor []string
	byKey      map[string]*pod
	pending    []*pod
	finishEv   *des.Event
	dirty      bool
	seed       uint64
	// ckpts holds, per namespace/workload/role, the remaining work at the last checkpoint of an
	// evicted pod, which its replacement resumes from (as the agent keeps it).
	ckpts map[string]float64
	// resumed holds, per namespace/workload/role, the progress a resumed admitted workload's
	// first pods continue from (resume.go).
	resumed map[string]engine.Snapshot
	// pins holds, per namespace/workload/role of a resumed admitted workload, the nodes its
	// running pods were bound to (resume.go); nodeIndex finds a node by name.
	pins      map[string][]string
	nodeIndex map[string]int
	// restarts counts, per namespace/workload/role, the replacements that owe the restart
	// overhead: an evicted pod of a workload that had worked (as the agent counts them).
	restarts map[string]int
	// gangs keeps the finished members of a gang in the engine until the gang is done: a
	// finished member still counts as present for the others (as the agent does).
	gangs map[string][]*pod
	// batching defers retries while one batch of Kueue's writes is played (see batch); deferred
	// holds the nodes freed meanwhile, in order.
	batching int
	deferred []int
}

// batch plays f, one batch of Kueue's writes, and tries the waiting pods on the nodes freed by it
// only afterwards. Kueue evicts every victim of a preemption in the same scheduling cycle, so on
// a cluster the first victim's pods have not left its node (pods terminate with a grace period)
// when the others' jobs are suspended: a waiting pod of another victim must not start on that
// node in between.
func (p *podRole) batch(f func()) {
	p.batching++
	f()
	if p.batching--; p.batching > 0 {
		return
	}
	nodes := p.deferred
	p.deferred = nil
	for i, n := range nodes {
		if !slices.Contains(nodes[:i], n) {
			p.retry(n)
		}
	}
}

func newPodRole(nodes []*corev1.Node, classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice, cat *hw.Catalog, scoring kubesched.Strategy, seed uint64) (*podRole, error) {
	ks, err := kubesched.New(nodes, scoring)
	if err != nil {
		return nil, err
	}
	if len(slices) > 0 {
		if err := ks.SetResources(classes, slices); err != nil {
			return nil, err
		}
	}
	p := &podRole{ks: ks, eng: engine.NewEventDriven(cat), cat: cat, byKey: map[string]*pod{}, seed: seed,
		ckpts: map[string]float64{}, resumed: map[string]engine.Snapshot{}, pins: map[string][]string{}, restarts: map[string]int{}, gangs: map[string][]*pod{}}
	for _, n := range nodes {
		spec, err := agent.EngineNode(n, cat)
		if err != nil {
			return nil, err
		}
		id, err := p.eng.AddNode(spec)
		if err != nil {
			return nil, err
		}
		p.nodeIDs = append(p.nodeIDs, id)
		p.nodeFlavor = append(p.nodeFlavor, rcluster.NodeFlavor(n.Labels))
	}
	return p, nil
}

// advance moves the engine to the loop's time, handling pods that finished on the way.
func (p *podRole) advance() {
	if now := p.sim.loop.Now(); now > p.eng.Now() {
		for _, f := range p.eng.AdvanceTo(now) {
			p.finished(f)
		}
		p.dirty = true
	}
}

// reschedule predicts the next pod completion after a change, as an event.
func (p *podRole) reschedule() {
	if !p.dirty {
		return
	}
	p.dirty = false
	p.finishEv.Cancel()
	p.finishEv = nil
	if at, ok := p.eng.NextFinish(); ok {
		p.finishEv = p.sim.loop.At(at, p.advance)
	}
}

// start creates the pods of an admitted Workload (the counts Kueue admitted, templates with the
// admitting flavors' node labels and tolerations merged in, as Kueue's job integrations do) and
// binds each.
func (p *podRole) start(w *kwl, admitted *kueue.Workload) {
	w.startEv = nil
	s := p.sim
	p.advance()
	w.attempt++
	w.running, w.allRunning = 0, false
	// Pods of the pod sets that keep their pre-admission template come last: their operator
	// made their Job before admission and only unsuspends it, so the Job controller creates them
	// one hop after the operator has created the others (an MPIJob's workers, then its launcher).
	order := make([]int, 0, len(w.podsets))
	for _, late := range []bool{false, true} {
		for i := range w.podsets {
			if w.podsets[i].preAdmission == late {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		ps := &w.podsets[i]
		psa := assignment(admitted, ps.name)
		if psa == nil {
			s.fail(fmt.Errorf("workload %s: no assignment for pod set %s", w.key, ps.name))
			return
		}
		proto := ps.proto.DeepCopy()
		wps := podSetOf(admitted, ps.name)
		var err error
		if ps.preAdmission {
			err = s.kq.CheckAssignment(psa, wps)
		} else {
			err = s.kq.PodTemplate(proto, psa, wps)
		}
		if err != nil {
			s.fail(fmt.Errorf("workload %s pod set %s: %w", w.key, ps.name, err))
			return
		}
		count := int(wps.Count)
		if psa.Count != nil {
			count = int(*psa.Count)
		}
		requests := resourcehelper.PodRequests(proto, resourcehelper.PodResourcesOptions{})
		claims, err := p.claims(proto, w.object[len(w.key.Namespace)+1:]+"-"+string(ps.name))
		if err != nil {
			s.fail(fmt.Errorf("workload %s pod set %s: %w", w.key, ps.name, err))
			return
		}
		reqs := p.topologyRequests(requests, proto, psa.TopologyAssignment, count, claims)
		// "<job>-<suffix>" with no dash in the suffix, as the Job controller names a Job's pods:
		// results map a Katib trial's pod to its trial Job by cutting the last dash.
		base := w.object[len(w.key.Namespace)+1:] + "-" + string(ps.name)
		for k := range count {
			req := reqs[k]
			name := base + strconv.Itoa(k)
			if w.attempt > 1 {
				name += "a" + strconv.Itoa(w.attempt)
			}
			pd := &pod{w: w, ps: i, key: w.key.Namespace + "/" + name, name: name, req: req, node: -1, gpus: ps.gpus,
				ckpt: w.key.Namespace + "/" + ps.contract.WorkloadID + "/" + ps.contract.Role, restartSec: ps.contract.RestartOverheadSec}
			po := *proto
			po.Name = name
			spec, fail, err := agent.EnginePod(&po, ps.contract, 0, p.seed)
			if err != nil {
				s.fail(fmt.Errorf("pod %s: %w", pd.key, err))
				return
			}
			pd.spec, pd.fail = spec, fail
			w.pods = append(w.pods, pd)
			p.place(pd)
		}
	}
}

// topologyRequests compiles the requests of a pod set's count pods. Without a topology
// assignment they are one. With one, Kueue's topology ungater gives each pod the node labels of
// one domain of the assignment (as many pods per domain as the assignment counts), which the
// kube-scheduler then honours like any nodeSelector; the sim hands out the domains in order.
// Pods with resource claims get a request each, which holds the devices allocated to them.
func (p *podRole) topologyRequests(requests corev1.ResourceList, proto *corev1.Pod, ta *kueue.TopologyAssignment, count int, claims []*resourceapi.ResourceClaim) []*kubesched.Request {
	out := make([]*kubesched.Request, 0, count)
	add := func(sel map[string]string, n int) {
		if claims != nil {
			for range n {
				out = append(out, p.ks.CompileClaims(requests, sel, proto.Spec.Tolerations, nil, claims))
			}
			return
		}
		req := p.ks.Compile(requests, sel, proto.Spec.Tolerations, nil)
		for range n {
			out = append(out, req)
		}
	}
	if ta == nil {
		add(proto.Spec.NodeSelector, count)
		return out
	}
	for values, n := range kueuelib.TopologyDomains(ta) {
		sel := maps.Clone(proto.Spec.NodeSelector)
		if sel == nil {
			sel = make(map[string]string, len(ta.Levels))
		}
		for i, level := range ta.Levels {
			sel[level] = values[i]
		}
		add(sel, int(n))
	}
	// An assignment that counts fewer pods than the pod set (never, from Kueue) leaves the rest
	// to the pod set's own selector.
	if len(out) < count {
		add(proto.Spec.NodeSelector, count-len(out))
	}
	return out[:count]
}

// claims are the ResourceClaims the resource claim controller makes for a pod set's pods from
// the ResourceClaimTemplates their template names (nil when it names none). The pods of a pod
// set share the objects: the allocator only reads them, and each pod's devices are its own.
func (p *podRole) claims(proto *corev1.Pod, base string) ([]*resourceapi.ResourceClaim, error) {
	if len(proto.Spec.ResourceClaims) == 0 {
		return nil, nil
	}
	kq := p.sim.kq
	var out []*resourceapi.ResourceClaim
	for _, rc := range proto.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName == nil {
			return nil, fmt.Errorf("pod claim %s names a ResourceClaim, not a template: not modelled", rc.Name)
		}
		var tmpl resourceapi.ResourceClaimTemplate
		if err := kq.Store.Get(kq.Context(), types.NamespacedName{Namespace: proto.Namespace, Name: *rc.ResourceClaimTemplateName}, &tmpl); err != nil {
			return nil, fmt.Errorf("pod claim %s: %w", rc.Name, err)
		}
		out = append(out, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: proto.Namespace, Name: base + "-" + rc.Name},
			Spec:       tmpl.Spec.Spec})
	}
	return out, nil
}

func assignment(wl *kueue.Workload, name kueue.PodSetReference) *kueue.PodSetAssignment {
	for i := range wl.Status.Admission.PodSetAssignments {
		if a := &wl.Status.Admission.PodSetAssignments[i]; a.Name == name {
			return a
		}
	}
	return nil
}

func podSetOf(wl *kueue.Workload, name kueue.PodSetReference) *kueue.PodSet {
	for i := range wl.Spec.PodSets {
		if ps := &wl.Spec.PodSets[i]; ps.Name == name {
			return ps
		}
	}
	return nil
}

// place binds a pod if a node fits it now, else queues it.
func (p *podRole) place(pd *pod) {
	if p.placeResumed(pd) {
		return
	}
	node, err := p.ks.Schedule(pd.req)
	if err != nil {
		if !errors.Is(err, kubesched.ErrUnschedulable) {
			p.sim.fail(fmt.Errorf("pod %s: %w", pd.key, err))
			return
		}
		p.pending = append(p.pending, pd)
		// kube-scheduler's verdict, as the cluster engine records it from the pod's PodScheduled
		// condition: idle.csv says why admitted quota waited.
		p.sim.emit(results.Event{T: p.sim.loop.Now(), Workload: pd.w.it.id, Type: results.EvPodUnschedulable, Object: pd.key,
			Message: p.ks.Why(pd.req)})
		return
	}
	p.bind(pd, node)
}

// bind runs the pod on the node: the engine starts it (resuming its role's checkpoint) and it is
// Running.
func (p *podRole) bind(pd *pod, node int) {
	s := p.sim
	now := s.loop.Now()
	id, err := p.eng.AddPod(pd.spec)
	if err != nil {
		s.fail(err)
		return
	}
	if ck, ok := p.ckpts[pd.ckpt]; ok && pd.spec.CheckpointIntervalSec > 0 {
		if err := p.eng.Restore(id, engine.Snapshot{RemainingSec: ck, CheckpointSec: ck}); err != nil {
			s.fail(err)
			return
		}
	}
	if sn, ok := p.resumed[pd.ckpt]; ok && pd.w.attempt == 1 {
		if err := p.eng.Restore(id, sn); err != nil {
			s.fail(err)
			return
		}
	}
	if p.restarts[pd.ckpt] > 0 {
		// A replacement of an interrupted pod restarts the training process: it pays the
		// workload's restart overhead before it progresses, as the agent charges it.
		p.restarts[pd.ckpt]--
		pd.owed = true
		p.eng.Pause(id, pd.restartSec)
	}
	if err := p.eng.Start(id, p.nodeIDs[node]); err != nil {
		s.fail(err)
		return
	}
	pd.node, pd.eid, pd.since = node, id, now
	pd.held, pd.timeSliced = p.eng.HeldGPUs(id), p.eng.TimeSliced(id)
	s.sample.g.podOn(pd)
	p.byKey[pd.key] = pd
	if pd.spec.GangID != "" {
		p.gangs[pd.spec.GangID] = append(p.gangs[pd.spec.GangID], pd)
	}
	p.dirty = true
	w := pd.w
	w.running++
	s.emit(results.Event{T: now, Workload: w.it.id, Type: results.EvPodRunning, Object: pd.key, Node: p.ks.NodeName(node)})
	if !w.allRunning && w.running >= w.expected {
		w.allRunning = true
		if w.trial < 0 {
			s.emit(results.Event{T: now, Workload: w.it.id, Type: results.EvAllPodsRunning})
		}
		s.syncPodsReady(w, true)
	}
}

// retry tries the waiting pods again, in the order they came, after a pod left node. Each of
// them fit on no node when last tried and only node changed since, so node is the only one it
// can fit on now (kube-scheduler would find it the only feasible node).
func (p *podRole) retry(node int) {
	if len(p.pending) == 0 {
		return
	}
	if p.batching > 0 {
		p.deferred = append(p.deferred, node)
		return
	}
	kept := p.pending[:0]
	for _, pd := range p.pending {
		switch {
		case pd.done:
		case p.ks.ScheduleOn(pd.req, node):
			p.bind(pd, node)
		default:
			kept = append(kept, pd)
		}
	}
	clear(p.pending[len(kept):])
	p.pending = kept
}

// ended is the pod_finished event of pd stopping at t: the GPU time it held since it started and,
// on time-sliced GPUs, the compute it used there (busy, the engine's BusyGPUSec).
func (pd *pod) ended(t float64, reason string, busy float64) results.Event {
	e := results.Event{T: t, Workload: pd.w.it.id, Type: results.EvPodFinished, Object: pd.key, Reason: reason,
		GPUSeconds: pd.held * (t - pd.since)}
	if pd.timeSliced {
		e.TimeSlicedGPUSec, e.BusyGPUSec = e.GPUSeconds, busy
	}
	return e
}

// finished handles a pod the engine reports done: its energy and GPU time are recorded, its node
// is freed, and when it was its workload's last pod (or failed), the job is finished.
func (p *podRole) finished(f engine.Finished) {
	pd := p.byKey[f.Key]
	if pd == nil || pd.done {
		return
	}
	s := p.sim
	w := pd.w
	failed := f.Failed || pd.fail
	phase := corev1.PodSucceeded
	if failed {
		phase = corev1.PodFailed
	}
	p.leave(pd)
	e := pd.ended(f.AtSec, string(phase), f.BusyGPUSec)
	e.EnergyJ = f.EnergyJ
	s.emit(e)
	p.release(pd)
	if failed && !w.podsFailed {
		// The rendered jobs allow no retry: the first failed pod fails the job, whose other
		// pods are deleted.
		w.podsFailed = true
		p.stopAll(w, "Failed")
		s.finishWorkload(w, true, "pod "+pd.name+" failed")
		return
	}
	for _, o := range w.pods {
		if !o.done {
			return
		}
	}
	if !w.podsFailed {
		s.finishWorkload(w, false, "all pods succeeded")
	}
}

// leave marks the pod gone from its node (it finished, or was deleted).
func (p *podRole) leave(pd *pod) {
	pd.done = true
	w := pd.w
	if pd.node >= 0 {
		w.running--
		p.sim.sample.g.podOff(pd)
		p.ks.Release(pd.node, pd.req)
		p.dirty = true
	}
}

// release removes a terminal pod from the engine; a gang's members stay until every member is
// terminal.
func (p *podRole) release(pd *pod) {
	if pd.node < 0 {
		return
	}
	defer p.retry(pd.node)
	if g := pd.spec.GangID; g != "" {
		members := p.gangs[g]
		for _, m := range members {
			if !m.done {
				return
			}
		}
		for _, m := range members {
			p.eng.Remove(m.eid)
			delete(p.byKey, m.key)
		}
		delete(p.gangs, g)
		return
	}
	p.eng.Remove(pd.eid)
	delete(p.byKey, pd.key)
}

// stopAll deletes every pod of w not done (eviction, or a failed job): a running pod's energy is
// lost, and its role's checkpoint kept for the replacement.
func (p *podRole) stopAll(w *kwl, reason string) {
	if len(w.pods) == 0 {
		return
	}
	s := p.sim
	p.advance()
	now := s.loop.Now()
	var gangs []string
	var freed []int
	kept := map[string]float64{}
	defer maps.Copy(p.ckpts, kept)
	// As the agent: if any running pod of the workload worked (progressed, or paused for a
	// checkpoint or a restart), every running pod's replacement owes the restart overhead; if
	// none did, a restart a pod owed passes on to its replacement.
	worked, saved := false, false
	for _, pd := range w.pods {
		if !pd.done && pd.node >= 0 {
			sn := p.eng.Snapshot(pd.eid)
			worked = worked || sn.SinceCheckpointSec > 0 || sn.Checkpoints > 0 || sn.CheckpointPauseSec > 0 || sn.RestartPauseSec > 0
			saved = saved || sn.Checkpoints > 0 // a checkpoint taken in this turn: its work is kept
		}
	}
	for _, pd := range w.pods {
		if pd.done {
			continue
		}
		if pd.node < 0 {
			pd.done = true // waiting for a node: never ran
			continue
		}
		if worked || pd.owed {
			p.restarts[pd.ckpt]++
		}
		if j := p.eng.PodEnergy(pd.eid); j > 0 {
			s.lostJ[w.it.id] += j
		}
		if pd.spec.CheckpointIntervalSec > 0 {
			// As the agent: the role keeps the checkpoint with the most work left among the pods
			// this eviction stops; it supersedes the checkpoint they resumed from.
			ck := p.eng.Snapshot(pd.eid).CheckpointSec
			if prev, ok := kept[pd.ckpt]; !ok || ck > prev {
				kept[pd.ckpt] = ck
			}
		}
		p.leave(pd)
		freed = append(freed, pd.node)
		s.emit(pd.ended(now, reason, p.eng.BusyGPUSec(pd.eid)))
		// Deleted members leave the engine at once: the rest of a gang must stop progressing.
		p.eng.Remove(pd.eid)
		delete(p.byKey, pd.key)
		if pd.spec.GangID != "" {
			gangs = append(gangs, pd.spec.GangID)
		}
	}
	for _, g := range gangs {
		var keep []*pod
		for _, m := range p.gangs[g] {
			if _, ok := p.byKey[m.key]; ok {
				keep = append(keep, m)
			}
		}
		if len(keep) == 0 {
			delete(p.gangs, g)
		} else {
			p.gangs[g] = keep
		}
	}
	w.pods = nil
	for _, n := range freed {
		p.retry(n)
	}
	if saved {
		s.guard.KeptWork() // its turn kept work: the run is not stalled
	}
}

// removeAll drops a finished Workload's pods that are still in the engine (a finished gang).
func (p *podRole) removeAll(w *kwl) {
	for _, pd := range w.pods {
		if _, ok := p.byKey[pd.key]; ok {
			p.eng.Remove(pd.eid)
			delete(p.byKey, pd.key)
		}
		if g := pd.spec.GangID; g != "" {
			delete(p.gangs, g)
		}
	}
	w.pods = nil
}
