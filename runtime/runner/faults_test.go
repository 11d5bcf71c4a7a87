package runner

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// TestGPUFaultPicksThePodOnThatGPU: a node's running pods take its GPUs in name order; a fault of
// GPU k hits the pod holding it, and a GPU no pod holds hits nothing.
func TestGPUFaultPicksThePodOnThatGPU(t *testing.T) {
	mk := func(name string, gpus int64, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{contract.WorkloadLabel: name}},
			Spec: corev1.PodSpec{NodeName: "h100-001", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	c := fakeclient.NewClientBuilder().WithObjects(mk("b", 4, corev1.PodRunning), mk("a", 2, corev1.PodRunning),
		mk("c", 1, corev1.PodSucceeded), mk("d", 1, corev1.PodRunning)).Build()
	in := &injector{reader: c}
	for k, want := range map[int]string{0: "a", 1: "a", 2: "b", 5: "b", 6: "d", 7: ""} {
		p := in.podOnGPU("h100-001", k)
		got := ""
		if p != nil {
			got = p.Name
		}
		if got != want {
			t.Errorf("GPU %d: pod %q, want %q", k, got, want)
		}
	}
}

func TestFaultStatuses(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "img"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", RestartCount: 2,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	now := metav1.Now()
	f := failedStatus(p, 137, now, &corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
	if f.Phase != corev1.PodFailed || f.ContainerStatuses[0].State.Terminated.ExitCode != 137 || f.Conditions[len(f.Conditions)-1].Type != corev1.DisruptionTarget {
		t.Errorf("failed status %+v", f)
	}
	r := restartedStatus(p, 137, now)
	cs := r.ContainerStatuses[0]
	if r.Phase != corev1.PodRunning || cs.RestartCount != 3 || cs.State.Running == nil || cs.LastTerminationState.Terminated.ExitCode != 137 {
		t.Errorf("restarted status %+v", r)
	}
}

// TestInjectorPlaysANodeFault drives the injector on a fake API: a node fault labels and taints the
// node and holds the clock until the node shows NotReady and the agent acknowledged; at
// evictAfter the node's pods are failed (DisruptionTarget) and deleted, and at the end of the
// fault the node is back.
func TestInjectorPlaysANodeFault(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h100-000", Labels: map[string]string{contract.Pool: "h100"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "w-0", Namespace: "team-a", UID: "uid-w0", Labels: map[string]string{contract.WorkloadLabel: "w"}},
		Spec:   corev1.PodSpec{NodeName: "h100-000", RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	c := fakeclient.NewClientBuilder().WithObjects(node, pod).WithStatusSubresource(&corev1.Pod{}, &corev1.Node{}).Build()
	p := &plan{clusterObjs: []client.Object{node}, byLabel: map[string]string{"team-a/w": "w"}, items: []*item{{id: "w", ns: "team-a"}}}
	rec, err := results.NewRecorder([]*results.Record{{ID: "w"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := simclock.New(simclock.Options{})
	spec := &fault.Spec{Events: []fault.EventSpec{{At: 3600, Node: "h100-000", For: 7200}}}
	in, err := newInjector(spec, p, clk, c, rec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in.reader = c
	ctx := t.Context()
	in.act(ctx, 3600)
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: "h100-000"}, &n); err != nil {
		t.Fatal(err)
	}
	if n.Labels[contract.Fault] != contract.FaultNodeDown || len(n.Spec.Taints) != 1 {
		t.Fatalf("node after the fault: labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	apiDown := simclock.Key{Kind: simclock.KindFault, ID: "api/node-down/h100-000"}
	if !clk.Held(apiDown) || !clk.Held(simclock.NodeDown("h100-000")) {
		t.Fatal("node fault: the clock is not held for the API and the agent")
	}
	n.Status.Conditions[0].Status = corev1.ConditionFalse // what KWOK's stage does
	in.node(&n)
	if clk.Held(apiDown) {
		t.Error("node NotReady and tainted: the API hold must end")
	}
	if len(in.steps) != 2 || in.steps[0].at != 3600+300 || in.steps[0].kind != "evict" {
		t.Fatalf("steps %+v, want the eviction at 3900 first", in.steps)
	}
	in.act(ctx, 3900)
	var gone corev1.Pod
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &gone); err == nil {
		t.Errorf("pod still there after the eviction: phase %s", gone.Status.Phase)
	}
	evicted := simclock.Key{Kind: simclock.KindFault, ID: "api/evicted/uid-w0"}
	if !clk.Held(evicted) {
		t.Fatal("eviction: no hold on the pod's deletion")
	}
	in.pod(pod, true)
	if clk.Held(evicted) {
		t.Error("pod deleted: the hold must end")
	}
	in.act(ctx, 3600+7200)
	if err := c.Get(ctx, client.ObjectKey{Name: "h100-000"}, &n); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels[contract.Fault]; ok || len(n.Spec.Taints) != 0 {
		t.Errorf("node after the repair: labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	meta, err := in.close()
	if err != nil || meta.Node != 1 || meta.HitPods != 1 {
		t.Errorf("meta %+v, %v", meta, err)
	}
	if r := rec.Records()[0]; r.Faults != 1 {
		t.Errorf("workload faults %d, want 1", r.Faults)
	}
}

// TestInjectorRestartsOnFailurePods: a GPU fault on a pod whose restart policy is OnFailure
// restarts its container in place (the pod stays Running) and holds the clock until the watcher
// sees the new restart count, the agent acknowledged it, and the owner's grace has passed.
func TestInjectorRestartsOnFailurePods(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h100-000"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mpi-worker-0", Namespace: "team-a", UID: "uid-m0", Labels: map[string]string{contract.WorkloadLabel: "mpi"}},
		Spec: corev1.PodSpec{NodeName: "h100-000", RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "mpi",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "mpi",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	c := fakeclient.NewClientBuilder().WithObjects(node, pod).WithStatusSubresource(&corev1.Pod{}).Build()
	p := &plan{clusterObjs: []client.Object{node}, byLabel: map[string]string{"team-a/mpi": "mpi"}, items: []*item{{id: "mpi", ns: "team-a"}}}
	rec, _ := results.NewRecorder([]*results.Record{{ID: "mpi"}}, nil)
	clk := simclock.New(simclock.Options{})
	gpu := 0
	in, err := newInjector(&fault.Spec{Events: []fault.EventSpec{{At: 60, Node: "h100-000", GPU: &gpu}}}, p, clk, c, rec, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	in.reader = c
	in.act(t.Context(), 60)
	var got corev1.Pod
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(pod), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodRunning || containerRestarts(&got) != 1 {
		t.Fatalf("pod %s with %d restarts, want Running with 1", got.Status.Phase, containerRestarts(&got))
	}
	api := simclock.Key{Kind: simclock.KindFault, ID: "api/restart/uid-m0/1"}
	owner := simclock.Key{Kind: simclock.KindFault, ID: "owner/uid-m0/1"}
	if !clk.Held(api) || !clk.Held(simclock.PodRestart("uid-m0", 1)) || !clk.Held(owner) {
		t.Fatal("in-place restart: the clock is not held for the API, the agent and the owner")
	}
	in.pod(&got, false)
	if clk.Held(api) {
		t.Error("restart count seen: the API hold must end")
	}
	deadline := time.Now().Add(5 * time.Second)
	for clk.Held(owner) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if clk.Held(owner) {
		t.Error("the owner's grace never ended")
	}
}
