package runner

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// injector plays a fault schedule (model/fault) on the cluster at the faults' exact trace times.
// It is a participant of the trace clock: an alarm of OrderFault wakes it at the next fault or the
// next step of one in progress, and it holds the clock on every step it starts until the API
// shows it and the agent has acted on it. What a fault does, as Kubernetes would:
//
//	fault            at its time                                     later
//	node (for d)     label kueuelab.io/fault=node-down and taint it:  at min(evictAfter, d): its pods get
//	                 KWOK's stage reports it NotReady, the agent      DisruptionTarget, phase Failed and are
//	                 stops its pods                                   deleted (the taint manager's eviction);
//	                                                                  at d: label and taint removed, Ready
//	gpu (node, k)    the pod holding GPU k of the node (GPUs counted in pod-name order) fails, as pod
//	pod (workload)   one running pod of the workload (of the role, first by name) fails
//
// A pod fails as its restart policy says: Never, its phase becomes Failed (container exit code
// faults.exitCode); OnFailure or Always, its container restarts in place (restartCount + 1), which
// the kubelet would do and KWOK does not. The owner's controller then acts by its own policy
// (render/restarts.go) and Kueue follows; the watcher's recover hold covers the owner's reply to a
// failed or deleted pod. An in-place restart gives no such sign, so the clock is held ownerGrace
// of wall time for the owner to act on it (training-operator counts restarts against its
// backoffLimit).
//
// Holds (kind fault): "api/..." until the watcher's cache shows the write, "agent/..." until the
// agent acknowledges it (simclock.NodeDown and the like), "owner/..." the grace above.
type injector struct {
	sch        *fault.Schedule
	clk        *simclock.Clock
	c          client.Client
	plan       *plan
	rec        *results.Recorder
	reader     client.Reader
	out        *json.Encoder
	file       *os.File
	evictAfter float64
	exitCode   int32
	alarm      *simclock.Alarm // the next fault or follow-up step (arm)

	mu      sync.Mutex
	steps   stepHeap
	waitPod map[types.UID]podWant
	waitUp  map[string]bool // node → the injector waits for it Ready (true) or NotReady (false)
	down    map[string]bool // nodes taken down and not back yet
	meta    results.FaultMeta
	errs    []error
}

// ownerGrace is how long an in-place container restart holds the clock for the pod's owner to act
// on it (the one fault step with nothing in the API to wait for).
const ownerGrace = 100 * time.Millisecond

// podWant is what the injector waits to see of a pod it wrote.
type podWant struct {
	key      simclock.Key
	terminal bool  // its phase Failed (or the pod gone)
	deleted  bool  // gone
	restarts int32 // its containers' restart count at least this
}

// step is a follow-up of a node fault.
type step struct {
	at    float64
	order int // evictions before the node's return at the same time
	node  string
	kind  string // "evict" or "up"
}

type stepHeap []step

func (h stepHeap) Len() int { return len(h) }
func (h stepHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].order != h[j].order {
		return h[i].order < h[j].order
	}
	return h[i].node < h[j].node
}
func (h stepHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *stepHeap) Push(x any)   { *h = append(*h, x.(step)) }
func (h *stepHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// faultNodes are the nodes of the plan's cluster objects that faults may hit.
func faultNodes(p *plan) []fault.Node {
	var out []fault.Node
	for _, o := range p.clusterObjs {
		n, ok := o.(*corev1.Node)
		if !ok {
			continue
		}
		out = append(out, fault.Node{Name: n.Name, Pool: n.Labels[contract.Pool], GPUs: int(kueuewl.GPUs(n.Status.Capacity))})
	}
	return out
}

// newInjector checks spec against the plan's cluster and opens dir/faults.jsonl.
func newInjector(spec *fault.Spec, p *plan, clk *simclock.Clock, c client.Client, rec *results.Recorder, dir string) (*injector, error) {
	cat, err := defaultCatalog()
	if err != nil {
		return nil, err
	}
	sch, err := fault.NewSchedule(spec, faultNodes(p), cat.Faults)
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	var errs []error
	for i, e := range spec.Events {
		if e.Workload != "" && !slices.ContainsFunc(p.items, func(it *item) bool { return it.id == e.Workload }) {
			errs = append(errs, fmt.Errorf("faults.events[%d].workload: no workload %q in the trace (or it cannot run on this cluster)", i, e.Workload))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	f, err := os.Create(dir + "/" + results.FaultsFile)
	if err != nil {
		return nil, fmt.Errorf("faults: %w", err)
	}
	return &injector{sch: sch, clk: clk, c: c, plan: p, rec: rec, out: json.NewEncoder(f), file: f,
		evictAfter: spec.EvictAfterSec(), exitCode: spec.ExitCodeOrDefault(),
		waitPod: map[types.UID]podWant{}, waitUp: map[string]bool{}, down: map[string]bool{}}, nil
}

// checkStage makes sure kueuelab's node-fault stage is installed (a local cluster started before
// it existed lacks it): without it a node never goes NotReady.
func (in *injector) checkStage(ctx context.Context, spec *fault.Spec) error {
	nodes := spec.Random != nil && !spec.Random.GPUOnly
	for _, e := range spec.Events {
		nodes = nodes || (e.Node != "" && e.GPU == nil)
	}
	if !nodes {
		return nil
	}
	st := &unstructured.Unstructured{}
	st.SetAPIVersion("kwok.x-k8s.io/v1alpha1")
	st.SetKind("Stage")
	if err := in.c.Get(ctx, client.ObjectKey{Name: "kueuelab-node-fault"}, st); err != nil {
		return fmt.Errorf("faults: KWOK stage kueuelab-node-fault: %w (a cluster started by an older kueuelab lacks it: `kueuelab cluster down` and up again, or `kueuelab cluster install`)", err)
	}
	return nil
}

// arm sets the alarm at the first fault, before the clock starts (see submitter.arm).
func (in *injector) arm() {
	in.alarm = in.clk.NewAlarm("faults", simclock.OrderFault)
	if next := in.sch.Peek(); !math.IsInf(next, 1) {
		in.alarm.Set(next)
	}
}

// run plays the schedule until ctx ends.
func (in *injector) run(ctx context.Context) {
	if in.alarm == nil {
		in.arm()
	}
	alarm := in.alarm
	defer alarm.Stop()
	for {
		next := in.sch.Peek()
		in.mu.Lock()
		if len(in.steps) > 0 {
			next = math.Min(next, in.steps[0].at)
		}
		in.mu.Unlock()
		if math.IsInf(next, 1) {
			alarm.Stop()
			<-ctx.Done()
			return
		}
		alarm.Set(next)
		select {
		case <-ctx.Done():
			return
		case <-alarm.C():
		}
		in.act(ctx, in.clk.Now())
	}
}

// act does everything due at trace time now, in a fixed order: follow-up steps (evictions before
// a node's return), then the faults. The fired alarm keeps the clock still meanwhile; the holds
// placed keep it so once the alarm is re-armed.
func (in *injector) act(ctx context.Context, now float64) {
	for {
		in.mu.Lock()
		if len(in.steps) == 0 || in.steps[0].at > now {
			in.mu.Unlock()
			break
		}
		s := heap.Pop(&in.steps).(step)
		in.mu.Unlock()
		switch s.kind {
		case "evict":
			in.evict(ctx, now, s.node)
		case "up":
			in.nodeUp(ctx, now, s.node)
		}
	}
	for {
		e, ok := in.sch.NextBy(now)
		if !ok {
			break
		}
		in.play(ctx, now, e)
	}
	in.mu.Lock()
	in.meta.Dropped = in.sch.Dropped
	in.mu.Unlock()
}

func (in *injector) play(ctx context.Context, now float64, e fault.Event) {
	rec := results.FaultRecord{T: now, Kind: string(e.Kind), Node: e.Node, Workload: e.Workload, Random: e.Random, DownSec: e.DownSec}
	switch e.Kind {
	case fault.NodeDown:
		in.count(func(m *results.FaultMeta) { m.Node++ })
		pods := in.podsOn(e.Node)
		rec.Pods, rec.Workloads = in.hit(now, pods, "node", e.Node, fmt.Sprintf("node %s down for %s", e.Node, fault.Duration(e.DownSec)))
		rec.Effect = fmt.Sprintf("node NotReady; %d pods stopped, evicted at %s", len(pods), fault.Duration(now+math.Min(in.evictAfter, e.DownSec)))
		in.nodeDown(ctx, e.Node)
		in.mu.Lock()
		heap.Push(&in.steps, step{at: now + math.Min(in.evictAfter, e.DownSec), order: 0, node: e.Node, kind: "evict"})
		heap.Push(&in.steps, step{at: now + e.DownSec, order: 1, node: e.Node, kind: "up"})
		in.mu.Unlock()
	case fault.GPUFail:
		gpu := e.GPU
		rec.GPU = &gpu
		in.count(func(m *results.FaultMeta) { m.GPU++ })
		p := in.podOnGPU(e.Node, e.GPU)
		if p == nil {
			rec.Effect = fmt.Sprintf("hit no pod (GPU %d of %s idle)", e.GPU, e.Node)
			break
		}
		rec.Pods, rec.Workloads = in.hit(now, []*corev1.Pod{p}, "gpu", e.Node, fmt.Sprintf("GPU %d of node %s failed", e.GPU, e.Node))
		rec.Effect = in.failPod(ctx, p)
	case fault.PodFail:
		in.count(func(m *results.FaultMeta) { m.Pod++ })
		p := in.podOf(e.Workload, e.Role)
		if p == nil {
			rec.Effect = "hit no pod (the workload has no running pod" + map[bool]string{true: " of role " + e.Role, false: ""}[e.Role != ""] + ")"
			break
		}
		rec.Pods, rec.Workloads = in.hit(now, []*corev1.Pod{p}, "pod", p.Spec.NodeName, "pod failure injected")
		rec.Effect = in.failPod(ctx, p)
	}
	if len(rec.Pods) == 0 {
		in.count(func(m *results.FaultMeta) { m.Idle++ })
	}
	in.logFault(rec)
}

func (in *injector) count(f func(*results.FaultMeta)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f(&in.meta)
}

// hit records a fault event per workload whose pods it hits, and returns the pods and workloads.
func (in *injector) hit(now float64, pods []*corev1.Pod, kind, node, msg string) (names, workloads []string) {
	seen := map[string]bool{}
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
		id, ok := in.plan.byLabel[p.Namespace+"/"+p.Labels[contract.WorkloadLabel]]
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		workloads = append(workloads, id)
		_, _ = in.rec.Record(results.Event{T: now, Workload: id, Type: results.EvFault, Object: p.Namespace + "/" + p.Name,
			Reason: kind, Node: node, Message: msg})
	}
	in.count(func(m *results.FaultMeta) { m.HitPods += len(pods) })
	return names, workloads
}

func (in *injector) logFault(r results.FaultRecord) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.out.Encode(r); err != nil {
		in.errs = append(in.errs, err)
	}
}

// runPods lists the run's pods that are alive: bound, not terminal, not being deleted.
func (in *injector) runPods(match func(*corev1.Pod) bool) []*corev1.Pod {
	var list corev1.PodList
	if err := in.reader.List(context.Background(), &list); err != nil {
		in.fail(fmt.Errorf("faults: list pods: %w", err))
		return nil
	}
	var out []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && !podTerminal(p) && match(p) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (in *injector) podsOn(node string) []*corev1.Pod {
	return in.runPods(func(p *corev1.Pod) bool { return p.Spec.NodeName == node })
}

// podOnGPU is the pod holding GPU k of the node: its running pods in name order take the GPUs
// they request in turn.
func (in *injector) podOnGPU(node string, k int) *corev1.Pod {
	next := 0
	for _, p := range in.podsOn(node) {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		g := int(kueuewl.PodGPUs(&p.Spec))
		if k < next+g {
			return p
		}
		next += g
	}
	return nil
}

// podOf is the workload's first running pod by name (of the role, when given).
func (in *injector) podOf(id, role string) *corev1.Pod {
	var it *item
	for _, x := range in.plan.items {
		if x.id == id {
			it = x
		}
	}
	if it == nil {
		return nil
	}
	label := render.Name(id)
	pods := in.runPods(func(p *corev1.Pod) bool {
		return p.Namespace == it.ns && p.Labels[contract.WorkloadLabel] == label && p.Status.Phase == corev1.PodRunning &&
			(role == "" || p.Annotations[contract.Role] == role)
	})
	if len(pods) == 0 {
		return nil
	}
	return pods[0]
}

// hold places a hold of the injector's and returns its key.
func (in *injector) hold(id string) simclock.Key {
	k := simclock.Key{Kind: simclock.KindFault, ID: id}
	in.clk.HoldFor(k, time.Minute)
	return k
}

// failPod fails p as its restart policy says, and returns what it did.
func (in *injector) failPod(ctx context.Context, p *corev1.Pod) string {
	now := metav1.Now()
	if p.Spec.RestartPolicy == corev1.RestartPolicyNever || p.Spec.RestartPolicy == "" {
		in.expect(p.UID, podWant{key: in.hold("api/failed/" + string(p.UID)), terminal: true})
		in.clk.HoldFor(simclock.PodFailed(p.UID), time.Minute)
		if err := in.patchStatus(ctx, p, failedStatus(p, in.exitCode, now, nil)); err != nil {
			in.fail(err)
			in.unexpect(p.UID)
			in.clk.Release(simclock.PodFailed(p.UID))
			return "error: " + err.Error()
		}
		return fmt.Sprintf("failed (exit code %d)", in.exitCode)
	}
	n := containerRestarts(p) + 1
	in.expect(p.UID, podWant{key: in.hold(fmt.Sprintf("api/restart/%s/%d", p.UID, n)), restarts: n})
	agentKey := simclock.PodRestart(p.UID, n)
	in.clk.HoldFor(agentKey, time.Minute)
	owner := in.hold(fmt.Sprintf("owner/%s/%d", p.UID, n))
	time.AfterFunc(ownerGrace, func() { in.clk.Release(owner) })
	if err := in.patchStatus(ctx, p, restartedStatus(p, in.exitCode, now)); err != nil {
		in.fail(err)
		in.unexpect(p.UID)
		in.clk.Release(agentKey)
		return "error: " + err.Error()
	}
	return fmt.Sprintf("container restarted in place (restart %d, exit code %d)", n, in.exitCode)
}

// evict does what the taint manager does to the pods of a node that stays NotReady: a
// DisruptionTarget condition, phase Failed (the pods' node is gone), deletion.
func (in *injector) evict(ctx context.Context, now float64, node string) {
	pods := in.podsOn(node)
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, p.Namespace+"/"+p.Name)
		in.expect(p.UID, podWant{key: in.hold("api/evicted/" + string(p.UID)), terminal: true, deleted: true})
		in.clk.HoldFor(simclock.PodFailed(p.UID), time.Minute)
		ts := metav1.Now()
		dt := &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, LastTransitionTime: ts,
			Reason: "DeletionByTaintManager", Message: "kueuelab fault injection: node " + node + " NotReady"}
		err := in.patchStatus(ctx, p, failedStatus(p, in.exitCode, ts, dt))
		if err == nil {
			err = in.c.Delete(ctx, p)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			in.fail(fmt.Errorf("evict %s/%s: %w", p.Namespace, p.Name, err))
			in.unexpect(p.UID)
			in.clk.Release(simclock.PodFailed(p.UID))
		}
	}
	in.logFault(results.FaultRecord{T: now, Kind: "evict", Node: node, Pods: names, Effect: fmt.Sprintf("%d pods evicted", len(pods))})
}

// nodeDown labels and taints the node; KWOK's stage makes it NotReady.
func (in *injector) nodeDown(ctx context.Context, node string) {
	in.mu.Lock()
	in.waitUp[node] = false
	in.down[node] = true
	in.mu.Unlock()
	in.hold("api/node-down/" + node)
	in.clk.HoldFor(simclock.NodeDown(node), time.Minute)
	if err := in.updateNode(ctx, node, true); err != nil {
		in.fail(err)
		in.clk.Release(simclock.Key{Kind: simclock.KindFault, ID: "api/node-down/" + node})
		in.clk.Release(simclock.NodeDown(node))
	}
}

// nodeUp removes the label and the taint; KWOK's node-initialize makes the node Ready.
func (in *injector) nodeUp(ctx context.Context, now float64, node string) {
	in.mu.Lock()
	in.waitUp[node] = true
	delete(in.down, node)
	in.mu.Unlock()
	in.hold("api/node-up/" + node)
	in.clk.HoldFor(simclock.NodeUp(node), time.Minute)
	if err := in.updateNode(ctx, node, false); err != nil {
		in.fail(err)
		in.clk.Release(simclock.Key{Kind: simclock.KindFault, ID: "api/node-up/" + node})
		in.clk.Release(simclock.NodeUp(node))
	}
	in.logFault(results.FaultRecord{T: now, Kind: "node-up", Node: node, Effect: "node Ready again"})
}

var faultTaint = corev1.Taint{Key: contract.Fault, Value: contract.FaultNodeDown, Effect: corev1.TaintEffectNoSchedule}

func (in *injector) updateNode(ctx context.Context, name string, down bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var n corev1.Node
		if err := in.c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return err
		}
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.Fault })
		if down {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[contract.Fault] = contract.FaultNodeDown
			n.Spec.Taints = append(n.Spec.Taints, faultTaint)
		} else {
			delete(n.Labels, contract.Fault)
		}
		if err := in.c.Update(ctx, &n); err != nil {
			return err
		}
		return nil
	})
}

func (in *injector) patchStatus(ctx context.Context, p *corev1.Pod, status corev1.PodStatus) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if err := in.c.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("fault on pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// failedStatus is what the kubelet reports of a pod whose containers died: phase Failed, each
// container terminated with exit code code; cond is added to its conditions when set.
func failedStatus(p *corev1.Pod, code int32, ts metav1.Time, cond *corev1.PodCondition) corev1.PodStatus {
	st := corev1.PodStatus{Phase: corev1.PodFailed, Conditions: slices.Clone(p.Status.Conditions)}
	for i := range st.Conditions {
		if st.Conditions[i].Type == corev1.PodReady || st.Conditions[i].Type == corev1.ContainersReady {
			st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = corev1.ConditionFalse, ts
		}
	}
	if cond != nil {
		st.Conditions = append(st.Conditions, *cond)
	}
	for _, c := range p.Spec.Containers {
		started := ts
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == c.Name && cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
		}
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: started, FinishedAt: ts}}})
	}
	return st
}

// restartedStatus is what the kubelet reports after restarting the pod's containers in place:
// running again, restartCount one more, the crash as lastState.
func restartedStatus(p *corev1.Pod, code int32, ts metav1.Time) corev1.PodStatus {
	st := *p.Status.DeepCopy()
	byName := map[string]corev1.ContainerStatus{}
	for _, cs := range st.ContainerStatuses {
		byName[cs.Name] = cs
	}
	st.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		cs := byName[c.Name]
		started := ts
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt
		}
		cs.Name, cs.Image = c.Name, c.Image
		cs.RestartCount++
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: started, FinishedAt: ts}}
		cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}}
		cs.Ready, cs.Started = true, ptrTrue()
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	return st
}

func ptrTrue() *bool { b := true; return &b }

func containerRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

func (in *injector) expect(uid types.UID, w podWant) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.waitPod[uid] = w
}

func (in *injector) unexpect(uid types.UID) {
	in.mu.Lock()
	w, ok := in.waitPod[uid]
	delete(in.waitPod, uid)
	in.mu.Unlock()
	if ok {
		in.clk.Release(w.key)
	}
}

// pod is the watcher telling of a pod change (after its own handling of it).
func (in *injector) pod(p *corev1.Pod, deleted bool) {
	in.mu.Lock()
	w, ok := in.waitPod[p.UID]
	done := ok && (deleted ||
		(!w.deleted && w.terminal && podTerminal(p)) ||
		(w.restarts > 0 && containerRestarts(p) >= w.restarts))
	if done {
		delete(in.waitPod, p.UID)
	}
	in.mu.Unlock()
	if done {
		in.clk.Release(w.key)
	}
}

// node is the watcher telling of a node change.
func (in *injector) node(n *corev1.Node) {
	in.mu.Lock()
	up, ok := in.waitUp[n.Name]
	tainted := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == contract.Fault })
	done := ok && nodeReady(n) == up && tainted == !up
	if done {
		delete(in.waitUp, n.Name)
	}
	in.mu.Unlock()
	if done {
		what := "node-down"
		if up {
			what = "node-up"
		}
		in.clk.Release(simclock.Key{Kind: simclock.KindFault, ID: "api/" + what + "/" + n.Name})
	}
}

func (in *injector) fail(err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.errs) < 20 {
		in.errs = append(in.errs, err)
	}
}

// restore brings back the nodes still down when the run ended, so the cluster is left as found.
func (in *injector) restore(ctx context.Context) {
	in.mu.Lock()
	nodes := make([]string, 0, len(in.down))
	for n := range in.down {
		nodes = append(nodes, n)
	}
	in.mu.Unlock()
	sort.Strings(nodes)
	for _, n := range nodes {
		if err := in.updateNode(ctx, n, false); err != nil && !apierrors.IsNotFound(err) {
			in.fail(fmt.Errorf("restore node %s after the run: %w", n, err))
		}
	}
}

// close ends the fault log and reports what happened.
func (in *injector) close() (results.FaultMeta, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	err := in.file.Close()
	if len(in.errs) > 0 {
		msgs := make([]string, len(in.errs))
		for i, e := range in.errs {
			msgs[i] = e.Error()
		}
		err = errors.Join(err, fmt.Errorf("faults: %s", strings.Join(msgs, "; ")))
	}
	return in.meta, err
}

// recordFaultCost adds to each workload the agent's account of what faults and checkpoints cost it
// (keyed like recordLostEnergy's).
func recordFaultCost(costs map[string]agent.WorkloadFaults, p *plan, rec *results.Recorder, now float64) {
	ids := make(map[string]string, len(p.items))
	for _, it := range p.items {
		ids[it.ns+"/"+it.id] = it.id
	}
	keys := make([]string, 0, len(costs))
	for k := range costs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // events.jsonl is reproducible
	for _, k := range keys {
		f := costs[k]
		id, ok := ids[k]
		if !ok || (f.Restarts == 0 && f.LostGPUSec == 0 && f.CheckpointGPUSec == 0 && f.RestartGPUSec == 0) {
			continue
		}
		_, _ = rec.Record(results.Event{T: now, Workload: id, Type: results.EvFaultCost, Restarts: f.Restarts,
			LostGPUSec: f.LostGPUSec, CheckpointGPUSec: f.CheckpointGPUSec, RestartGPUSec: f.RestartGPUSec})
	}
}
