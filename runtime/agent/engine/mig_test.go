package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/hw"
)

// TestMIGSlicePhysics runs pods on MIG slices of one H100 and checks completion times and power
// against the slice model written out by hand: slowdown S = (1−m)·max(1, u/c) + m·max(1, u/f) on
// a slice with compute fraction c and memory fraction f, speed = 1 − s_gpu·(1 − 1/S); slice power
// = c·idle + (max − idle)·c·min(1, u/c)^α·(1 − β·m).
func TestMIGSlicePhysics(t *testing.T) {
	const d = 700.0
	g, _ := catalog(t).GPU("H100-SXM")
	node := NodeSpec{Name: "mig", GPUFamily: "H100-SXM", GPUs: 1, CPUModel: "2xEPYC-9654"}
	tests := []struct {
		name    string
		profile string
		prof    hw.Profile
		sens    float64
		c, f    float64 // the profile's compute and memory fractions (H100: 7 compute, 8 memory slices)
	}{
		{"light eval on 1g.10gb runs at full speed", "1g.10gb", hw.Profile{GPUUtilization: 0.1, MemoryIntensity: 0}, 0.9, 1.0 / 7, 1.0 / 8},
		{"busy compute on 1g.10gb is 7x slower at full sensitivity", "1g.10gb", hw.Profile{GPUUtilization: 1}, 1, 1.0 / 7, 1.0 / 8},
		{"half memory-bound on 3g.40gb", "3g.40gb", hw.Profile{GPUUtilization: 0.8, MemoryIntensity: 0.5}, 0.8, 3.0 / 7, 4.0 / 8},
		{"the whole 7g.80gb is the whole GPU", "7g.80gb", hw.Profile{GPUUtilization: 0.95, MemoryIntensity: 0.2}, 0.9, 1, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, node)
			u, m := tc.prof.GPUUtilization, tc.prof.MemoryIntensity
			S := (1-m)*math.Max(1, u/tc.c) + m*math.Max(1, u/tc.f)
			want := d / (1 - tc.sens*(1-1/S))
			f.pod(PodSpec{Key: "ns/p", WorkloadID: "w", GPUUnits: d, DurationSec: d, MIGProfile: tc.profile, MIGSlices: 1,
				Sensitivity: Sensitivity{GPU: tc.sens}, Profile: tc.prof}, "mig")
			f.e.Tick(1)
			slice := tc.c*g.IdleW + (g.MaxW-g.IdleW)*tc.c*math.Pow(math.Min(1, u/tc.c), g.UtilExponent)*(1-g.MemoryPowerDrop*m)
			cpu, _ := catalog(t).CPU("2xEPYC-9654")
			cpuW, _ := cpu.Capped(0, 0)
			wantNode := cpuW + cpu.PlatformW + slice + (1-tc.c)*g.IdleW
			if got := f.e.NodePower(f.nodes["mig"]); math.Abs(got-wantNode) > 1e-6 {
				t.Errorf("node power %g W, want %g (slice %g W)", got, wantNode, slice)
			}
			done := f.runUntil(1, 20*d)
			if len(done) != 1 || math.Abs(done[0].AtSec-want) > 1e-6 {
				t.Errorf("finished %+v, want at %g s (slowdown %g)", done, want, S)
			}
		})
	}
}

func TestMIGPodNeedsItsProfile(t *testing.T) {
	f := newFixture(t, NodeSpec{Name: "l40s", GPUFamily: "L40S", GPUs: 4}, NodeSpec{Name: "h100", GPUFamily: "H100-SXM", GPUs: 8})
	spec := PodSpec{Key: "ns/p", WorkloadID: "w", DurationSec: 10, MIGProfile: "1g.10gb", MIGSlices: 1}
	id, err := f.e.AddPod(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.e.Start(id, f.nodes["l40s"]); err == nil || !strings.Contains(err.Error(), "no MIG-capable GPUs") {
		t.Errorf("MIG pod on an L40S: error %v", err)
	}
	spec.Key, spec.MIGProfile = "ns/q", "1g.5gb"
	id, err = f.e.AddPod(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.e.Start(id, f.nodes["h100"]); err == nil || !strings.Contains(err.Error(), "has no MIG profile 1g.5gb") {
		t.Errorf("unknown profile: error %v", err)
	}
	if _, err := f.e.AddPod(PodSpec{Key: "ns/r", DurationSec: 10, MIGSlices: 1, GPURequest: 1, MIGProfile: "1g.10gb"}); err == nil {
		t.Error("a pod asking for slices and whole GPUs was accepted")
	}
}
