package kueuewl

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func TestFlavors(t *testing.T) {
	wl := &kueue.Workload{Status: kueue.WorkloadStatus{Admission: &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{
		{Name: "worker", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "cpu-pool", "nvidia.com/gpu": "h100", "memory": "cpu-pool"}},
		{Name: "launcher", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "cpu-pool", "memory": "mem"}},
		{Name: "odd", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"memory": "mem", "example.com/fpga": "fpga"}},
	}}}}
	want := map[string]string{"worker": "h100", "launcher": "cpu-pool", "odd": "fpga"}
	if got := Flavors(wl); !maps.Equal(got, want) {
		t.Errorf("Flavors = %v, want %v", got, want)
	}
	if got := Flavors(&kueue.Workload{}); got != nil {
		t.Errorf("no admission: %v", got)
	}
	for r, want := range map[string]bool{"nvidia.com/gpu": true, "amd.com/gpu": true, "cpu": false, "gpu": false} {
		if IsGPU(r) != want {
			t.Errorf("IsGPU(%q) = %v", r, !want)
		}
	}
}
