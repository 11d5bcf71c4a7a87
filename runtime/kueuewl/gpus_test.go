package kueuewl

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestUsageOf(t *testing.T) {
	podSet := func(name string, n int32, gpu corev1.ResourceName, g string) kueue.PodSet {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		if g != "" {
			req[gpu] = resource.MustParse(g)
		}
		return kueue.PodSet{Name: kueue.PodSetReference(name), Count: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req}}, {Resources: corev1.ResourceRequirements{Requests: req}}}}}}
	}
	reserved := metav1.Condition{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"},
		Spec: kueue.WorkloadSpec{QueueName: "team-a-lq", PodSets: []kueue.PodSet{
			podSet("launcher", 1, "", ""), podSet("nv", 2, "nvidia.com/gpu", "2"), podSet("amd", 1, "amd.com/gpu", "1")}},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{reserved}, Admission: &kueue.Admission{ClusterQueue: "cq",
			PodSetAssignments: []kueue.PodSetAssignment{
				{Name: "launcher", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "cpu"},
					ResourceUsage: corev1.ResourceList{"cpu": resource.MustParse("8")}},
				{Name: "nv", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "h100", "nvidia.com/gpu": "h100"},
					ResourceUsage: corev1.ResourceList{"cpu": resource.MustParse("16"), "nvidia.com/gpu": resource.MustParse("8")}},
				{Name: "amd", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"amd.com/gpu": "mi300x"},
					ResourceUsage: corev1.ResourceList{"amd.com/gpu": resource.MustParse("2")}},
			}}}}

	// Two containers per pod: nv asks 2 pods × 2 containers × 2 GPUs, amd 1 × 2 × 1.
	u, ok := UsageOf(wl)
	if !ok || u.Namespace != "team-a" || u.LocalQueue != "team-a-lq" || u.ClusterQueue != "cq" || u.Requested != 10 || !u.HoldsQuota ||
		!maps.Equal(u.Reserved, map[string]int64{"h100": 8, "mi300x": 2}) {
		t.Errorf("reserved: %+v, %v", u, ok)
	}

	// Evicted: the admission is still there, the quota is not.
	wl.Status.Conditions[0].Status = metav1.ConditionFalse
	if u, ok := UsageOf(wl); !ok || u.ClusterQueue != "cq" || u.HoldsQuota || u.Reserved != nil || u.Requested != 10 {
		t.Errorf("quota released: %+v, %v", u, ok)
	}

	wl.Status.Admission = nil
	if u, ok := UsageOf(wl); !ok || u.ClusterQueue != "" || u.HoldsQuota || u.Requested != 10 {
		t.Errorf("pending: %+v, %v", u, ok)
	}

	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue})
	if _, ok := UsageOf(wl); ok {
		t.Error("a finished Workload has GPU usage")
	}
}
