package runner

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kueuelab/kueuelab/render/contract"
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
