package trace

import (
	"strings"
	"testing"
)

func TestMIGRequests(t *testing.T) {
	tests := []struct {
		name    string
		req     Requests
		profile string
		slices  int64
		err     string
	}{
		{"one profile", Requests{"cpu": "2", "nvidia.com/mig-1g.10gb": "2"}, "1g.10gb", 2, ""},
		{"zero slices ask for none", Requests{"nvidia.com/mig-1g.10gb": "0"}, "", 0, ""},
		{"whole GPUs only", Requests{"nvidia.com/gpu": "1"}, "", 0, ""},
		{"fractional slices", Requests{"nvidia.com/mig-2g.20gb": "1.5"}, "", 0, "nvidia.com/mig-2g.20gb: must be a whole number of MIG slices"},
		{"two profiles", Requests{"nvidia.com/mig-1g.10gb": "1", "nvidia.com/mig-2g.20gb": "1"}, "", 0, "a pod asks for two MIG profiles"},
		{"slices and whole GPUs", Requests{"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": "1"}, "", 0, "a pod uses slices or whole GPUs, not both"},
		{"no profile", Requests{"nvidia.com/mig-": "1"}, "", 0, "names no MIG profile"},
		{"a share of a GPU", Requests{"cpu": "2", ResourceGPUFraction: "0.25"}, "", 0, ""},
		{"a share written in milli", Requests{ResourceGPUFraction: "500m"}, "", 0, ""},
		{"a share of one or more", Requests{ResourceGPUFraction: "1"}, "", 0, "kueuelab.io/gpu-fraction: must be a share of one GPU, > 0 and < 1"},
		{"a share of none", Requests{ResourceGPUFraction: "0"}, "", 0, "must be a share of one GPU"},
		{"a share and whole GPUs", Requests{ResourceGPUFraction: "0.5", "nvidia.com/gpu": "1"}, "", 0, "a share of a GPU and whole GPUs (nvidia.com/gpu)"},
		{"a share and slices", Requests{ResourceGPUFraction: "0.5", "nvidia.com/mig-1g.10gb": "1"}, "", 0, "a share of a GPU and MIG slices (nvidia.com/mig-1g.10gb)"},
		{"a share that is no number", Requests{ResourceGPUFraction: "half"}, "", 0, "kueuelab.io/gpu-fraction"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validRequests(tc.req)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p, n := tc.req.MIG(); p != tc.profile || n != tc.slices {
				t.Errorf("MIG() = %q, %d; want %q, %d", p, n, tc.profile, tc.slices)
			}
			if tc.req.GPUs() != 0 && tc.slices != 0 {
				t.Errorf("MIG slices counted as whole GPUs: %d", tc.req.GPUs())
			}
		})
	}
	w := &Workload{Pods: []PodGroup{{Replicas: 3, Requests: Requests{"nvidia.com/mig-1g.10gb": "2"}}, {Replicas: 1, Requests: Requests{"cpu": "1"}}}}
	if got := w.MIGSlices(); got != 6 {
		t.Errorf("MIGSlices = %d, want 6", got)
	}
}
