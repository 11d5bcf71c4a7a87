package render

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kueuelab/kueuelab/model/trace"
)

// A workload placed on an AMD family must ask for the resource its nodes advertise.
func TestGPUResourceFromPlacement(t *testing.T) {
	tests := []struct {
		name     string
		resource corev1.ResourceName
		want     corev1.ResourceName
	}{
		{"default keeps the trace's name", "", "nvidia.com/gpu"},
		{"nvidia family", "nvidia.com/gpu", "nvidia.com/gpu"},
		{"amd family", "amd.com/gpu", "amd.com/gpu"},
	}
	w := makeWorkload("w-1", trace.SingleGPUTraining).pods(trace.RoleMain, 1, "8", "64Gi", 4).obj()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := testPlacer{}.Place(w)
			p.GPUResource = tc.resource
			b, err := newBuild(w, nil, p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			rr := b.roles[0].resources
			four := resource.MustParse("4")
			if q, ok := rr.Requests[tc.want]; !ok || q.Cmp(four) != 0 {
				t.Errorf("requests %v, want %s: 4", rr.Requests, tc.want)
			}
			if q, ok := rr.Limits[tc.want]; !ok || q.Cmp(four) != 0 {
				t.Errorf("limits %v, want %s: 4", rr.Limits, tc.want)
			}
			if tc.want != "nvidia.com/gpu" {
				if _, ok := rr.Requests["nvidia.com/gpu"]; ok {
					t.Errorf("requests %v still ask for nvidia.com/gpu", rr.Requests)
				}
			}
			if !b.roles[0].gpu {
				t.Error("role not marked as a GPU role")
			}
		})
	}
}
