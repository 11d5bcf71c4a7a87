package engine

import (
	"fmt"
	"math"
	"testing"

	"github.com/kueuelab/kueuelab/model/hw"
)

// Time-sliced GPUs, worked out by hand for both engine modes: pods whose demands on one GPU sum
// to D > 1 each run at 1/D of their speed there (GPU sensitivity 1), below 1 as fast as alone; the
// device plugin spreads replicas over the GPUs, the least used first; the GPU draws the power of
// one GPU at min(1, D), shared among its tenants by demand.
func TestTimeSlicedGPUs(t *testing.T) {
	const d = 100.0
	g, _ := catalog(t).GPU("H100-SXM")
	cpu, _ := catalog(t).CPU("2xEPYC-9654")
	cpuW, _ := cpu.Capped(0, 0)
	type pod struct {
		u        float64
		replicas int
		finish   float64
	}
	tests := []struct {
		name   string
		gpus   int
		pods   []pod
		gpuW   float64 // the node's GPUs' draw once every pod runs
		podGPU []float64
	}{
		{"two tenants asking 1.2 of one GPU share it", 1, []pod{{0.6, 1, 120}, {0.6, 1, 120}},
			g.NaturalPower(1, 0), []float64{g.NaturalPower(1, 0) / 2, g.NaturalPower(1, 0) / 2}},
		{"two tenants asking 0.8 run as fast as alone", 1, []pod{{0.5, 1, d}, {0.3, 1, d}},
			g.NaturalPower(0.8, 0), []float64{g.NaturalPower(0.8, 0) * 5 / 8, g.NaturalPower(0.8, 0) * 3 / 8}},
		// Replicas go to GPU 0, 1, then 0 again (both hold one: the lowest index): GPU 0 asks 1.2.
		{"replicas spread over the GPUs", 2, []pod{{0.6, 1, 120}, {0.6, 1, d}, {0.6, 1, 120}},
			g.NaturalPower(1, 0) + g.NaturalPower(0.6, 0), []float64{g.NaturalPower(1, 0) / 2, g.NaturalPower(0.6, 0), g.NaturalPower(1, 0) / 2}},
		// One pod's two replicas land on GPUs 0 and 1; a third pod on GPU 0 makes it ask 1.5: the
		// two-replica pod runs at its slowest GPU's pace, 1/1.5.
		{"a pod with two replicas runs at its slowest GPU's pace", 2, []pod{{0.75, 2, 150}, {0.75, 1, 150}},
			g.NaturalPower(1, 0) + g.NaturalPower(0.75, 0), []float64{g.NaturalPower(1, 0)/2 + g.NaturalPower(0.75, 0), g.NaturalPower(1, 0) / 2}},
		{"an idle GPU draws idle power", 3, []pod{{0.6, 1, d}},
			g.NaturalPower(0.6, 0) + 2*g.IdleW, []float64{g.NaturalPower(0.6, 0)}},
	}
	for _, mode := range []string{"ticked", "event-driven"} {
		for _, tc := range tests {
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				e := New(catalog(t))
				if mode == "event-driven" {
					e = NewEventDriven(catalog(t))
				}
				nid, err := e.AddNode(NodeSpec{Name: "ts", GPUFamily: "H100-SXM", GPUs: tc.gpus, GPUReplicas: 4, CPUModel: "2xEPYC-9654"})
				if err != nil {
					t.Fatal(err)
				}
				ids := make([]PodID, len(tc.pods))
				for i, p := range tc.pods {
					id, err := e.AddPod(PodSpec{Key: fmt.Sprintf("ns/p%d", i), WorkloadID: fmt.Sprintf("w%d", i), GPURequest: p.replicas,
						GPUUnits: d, DurationSec: d, Sensitivity: Sensitivity{GPU: 1}, Profile: hw.Profile{GPUUtilization: p.u}})
					if err != nil {
						t.Fatal(err)
					}
					if err := e.Start(id, nid); err != nil {
						t.Fatal(err)
					}
					ids[i] = id
				}
				e.AdvanceTo(1)
				if got, want := e.NodePower(nid), cpuW+cpu.PlatformW+tc.gpuW; math.Abs(got-want) > 1e-6 {
					t.Errorf("node power %g W, want %g", got, want)
				}
				for i, id := range ids {
					if got := e.pods[id].podGPURunW; math.Abs(got-tc.podGPU[i]) > 1e-6 {
						t.Errorf("pod %d draws %g W of GPU, want %g", i, got, tc.podGPU[i])
					}
					if want := float64(tc.pods[i].replicas) / 4; e.pods[id].gpus != want {
						t.Errorf("pod %d holds %g GPUs, want %g", i, e.pods[id].gpus, want)
					}
				}
				finished := map[PodID]Finished{}
				for len(finished) < len(ids) {
					at, ok := e.NextFinish()
					if !ok || at > 10*d {
						t.Fatalf("no finish ahead (%v, %v); finished %v", at, ok, finished)
					}
					for _, f := range e.AdvanceTo(at) {
						finished[f.Pod] = f
					}
				}
				for i, id := range ids {
					p := tc.pods[i]
					if math.Abs(finished[id].AtSec-p.finish) > 1e-6 {
						t.Errorf("pod %d finished at %g s, want %g", i, finished[id].AtSec, p.finish)
					}
					// At full GPU sensitivity a pod does its work at its pace: it uses its demand
					// on each replica's GPU for its duration's worth of compute, however slowed.
					if want := p.u * float64(p.replicas) * d; math.Abs(finished[id].BusyGPUSec-want) > 1e-6 {
						t.Errorf("pod %d used %g GPU-s, want %g", i, finished[id].BusyGPUSec, want)
					}
				}
			})
		}
	}
}

// A pod's compute used on time-sliced GPUs survives a snapshot and restore (an agent restarted, a
// resumed sim): the restored pod goes on counting from it.
func TestTimeSlicedBusySurvivesRestore(t *testing.T) {
	e := New(catalog(t))
	nid, err := e.AddNode(NodeSpec{Name: "ts", GPUFamily: "H100-SXM", GPUs: 1, GPUReplicas: 4})
	if err != nil {
		t.Fatal(err)
	}
	spec := PodSpec{Key: "ns/p", WorkloadID: "w", GPURequest: 1, GPUUnits: 100, DurationSec: 100, Sensitivity: Sensitivity{GPU: 1}, Profile: hw.Profile{GPUUtilization: 0.5}}
	id, err := e.AddPod(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(id, nid); err != nil {
		t.Fatal(err)
	}
	e.AdvanceTo(40)
	snap := e.Snapshot(id)
	if math.Abs(snap.BusyGPUSec-0.5*40) > 1e-9 {
		t.Fatalf("busy %g GPU-s after 40 s at 0.5, want 20", snap.BusyGPUSec)
	}
	e.Remove(id)
	spec.Key = "ns/q"
	id, err = e.AddPod(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(id, snap); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(id, nid); err != nil {
		t.Fatal(err)
	}
	done := e.AdvanceTo(200)
	if len(done) != 1 || math.Abs(done[0].AtSec-100) > 1e-9 || math.Abs(done[0].BusyGPUSec-50) > 1e-9 {
		t.Errorf("finished %+v, want at 100 s having used 0.5 × 100 GPU-s", done)
	}
}

// A tenant that pauses (a restart reloading its checkpoint) draws nothing of a GPU another tenant
// keeps busy: the node draws one GPU at the busy tenant's demand, not that plus a share of idle
// power; once both pause, the GPU draws its idle power, split between them.
func TestTimeSlicedPausedTenantDrawsNothing(t *testing.T) {
	g, _ := catalog(t).GPU("H100-SXM")
	cpu, _ := catalog(t).CPU("2xEPYC-9654")
	cpuW, _ := cpu.Capped(0, 0)
	for _, mode := range []string{"ticked", "event-driven"} {
		for _, tc := range []struct {
			pauses []float64
			gpuW   float64
		}{{[]float64{0, 50}, g.NaturalPower(0.6, 0)}, {[]float64{50, 50}, g.IdleW}} {
			e := New(catalog(t))
			if mode == "event-driven" {
				e = NewEventDriven(catalog(t))
			}
			nid, err := e.AddNode(NodeSpec{Name: "ts", GPUFamily: "H100-SXM", GPUs: 1, GPUReplicas: 4, CPUModel: "2xEPYC-9654"})
			if err != nil {
				t.Fatal(err)
			}
			for i, pause := range tc.pauses {
				id, err := e.AddPod(PodSpec{Key: fmt.Sprintf("ns/p%d", i), WorkloadID: "w", GPURequest: 1, GPUUnits: 100, DurationSec: 100,
					Sensitivity: Sensitivity{GPU: 1}, Profile: hw.Profile{GPUUtilization: 0.6}})
				if err != nil {
					t.Fatal(err)
				}
				e.Pause(id, pause)
				if err := e.Start(id, nid); err != nil {
					t.Fatal(err)
				}
			}
			e.AdvanceTo(1)
			if got, want := e.NodePower(nid), cpuW+cpu.PlatformW+tc.gpuW; math.Abs(got-want) > 1e-6 {
				t.Errorf("%s, pauses %v: node power %g W, want %g", mode, tc.pauses, got, want)
			}
		}
	}
}
