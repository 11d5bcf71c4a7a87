package replay

import (
	"math"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// A record describes the devices its workload runs on as placed: examples/clusters/mig-small.yaml
// moves debug_eval onto 2g.20gb slices (2/7 of an H100) and gives a share of a GPU of another family
// the smallest H100 profile holding it; whole-GPU workloads keep the profile's utilisation.
func TestRecordsDescribeTheDevicesAsPlaced(t *testing.T) {
	spec, err := rcluster.Load("../../examples/clusters/mig-small.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(spec)
	if c.PartitionedGPUs != 8 || c.GPUCapacity != 24 {
		t.Fatalf("partitioned %d of %d GPUs, want 8 of 24", c.PartitionedGPUs, c.GPUCapacity)
	}
	p := NewPlacer(spec, c, 1)
	workload := func(id string, fam trace.Family, u float64, req trace.Requests) *trace.Workload {
		return &trace.Workload{WorkloadID: id, WorkloadType: fam, Namespace: "team-a", IntentClass: trace.IntentStandard,
			DurationSec: 600, SharedIntensityProfile: trace.Profile{GPUUtilization: u, MemoryIntensity: 0.3},
			Pods: []trace.PodGroup{{Role: "main", Replicas: 1, Requests: req}}}
	}
	for _, tc := range []struct {
		name    string
		w       *trace.Workload
		profile string
		share   float64
		util    float64
	}{
		// 0.6 of a GPU does not fit in 2/7: the slice is saturated.
		{"migFor moves a one-GPU debug job", workload("d", trace.DebugEval, 0.6, trace.Requests{"cpu": "4", "memory": "16Gi", trace.ResourceGPU: "1"}), "2g.20gb", 2.0 / 7, 1},
		// A quarter of a GPU goes on a 2g.20gb (1/7 < 0.25 ≤ 2/7, 10 GB < 20 GB): it uses 0.25 × 0.8 of a GPU, 0.7 of the slice.
		{"a share of a GPU", workload("s", trace.SingleGPUTraining, 0.8, trace.Requests{"cpu": "4", "memory": "16Gi", trace.ResourceGPUFraction: "0.25"}), "2g.20gb", 2.0 / 7, 0.7},
		{"whole GPUs", workload("g", trace.SingleGPUTraining, 0.8, trace.Requests{"cpu": "4", "memory": "16Gi", trace.ResourceGPU: "1"}), "", 0, 0.8},
	} {
		rec, pl := p.Place(tc.w)
		if pl == nil {
			t.Fatalf("%s: not placed: %s", tc.name, rec.Error)
		}
		if rec.MIGProfile != tc.profile || math.Abs(rec.SliceShare-tc.share) > 1e-12 || math.Abs(rec.GPUUtil-tc.util) > 1e-12 {
			t.Errorf("%s: profile %q, slice share %v, utilisation %v; want %q, %v, %v", tc.name, rec.MIGProfile, rec.SliceShare, rec.GPUUtil, tc.profile, tc.share, tc.util)
		}
	}
}
