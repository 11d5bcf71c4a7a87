package engine

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/hw"
)

func catalog(t testing.TB) *hw.Catalog {
	t.Helper()
	c, err := hw.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var training = hw.Profile{CPUUtilization: 0.3, GPUUtilization: 0.95, MemoryIntensity: 0.1}

func h100Node(name string, capW float64) NodeSpec {
	return NodeSpec{Name: name, GPUFamily: "H100-SXM", GPUs: 8, CPUModel: "2xEPYC-9654", GPUCapW: capW}
}

func trainPod(key string, d float64) PodSpec {
	return PodSpec{Key: key, WorkloadID: "w", CPURequest: 16, GPURequest: 8, CPUUnits: 16 * 0.3 * d, GPUUnits: 8 * 0.95 * d,
		DurationSec: d, Sensitivity: Sensitivity{CPU: 0.3, GPU: 0.9}, Profile: training}
}

type fixture struct {
	t     *testing.T
	e     *Engine
	nodes map[string]NodeID
}

func newFixture(t *testing.T, nodes ...NodeSpec) *fixture {
	f := &fixture{t: t, e: New(catalog(t)), nodes: map[string]NodeID{}}
	for _, n := range nodes {
		id, err := f.e.AddNode(n)
		if err != nil {
			t.Fatal(err)
		}
		f.nodes[n.Name] = id
	}
	return f
}

func (f *fixture) pod(s PodSpec, node string) PodID {
	f.t.Helper()
	id, err := f.e.AddPod(s)
	if err != nil {
		f.t.Fatal(err)
	}
	if node != "" {
		if err := f.e.Start(id, f.nodes[node]); err != nil {
			f.t.Fatal(err)
		}
	}
	return id
}

// runUntil ticks by dt until a pod finishes or maxT passes; it returns the finish events.
func (f *fixture) runUntil(dt, maxT float64) []Finished {
	for f.e.Now() < maxT {
		if done := f.e.Tick(dt); len(done) > 0 {
			return append([]Finished(nil), done...)
		}
	}
	return nil
}

func TestAloneFinishesInExactlyItsDuration(t *testing.T) {
	tests := []struct{ d, dt float64 }{{100, 0.3}, {3600, 7}, {1, 10}, {86400, 1}, {12.5, 2.5}}
	for _, tt := range tests {
		f := newFixture(t, h100Node("n", 0))
		f.pod(trainPod("ns/p", tt.d), "n")
		done := f.runUntil(tt.dt, 10*tt.d+tt.dt)
		if len(done) != 1 {
			t.Fatalf("D=%g dt=%g: finished %v", tt.d, tt.dt, done)
		}
		if math.Abs(done[0].AtSec-tt.d) > 1e-9*tt.d || done[0].Failed || done[0].WorkloadID != "w" {
			t.Errorf("D=%g dt=%g: finished at %.12f (failed=%v), want %g", tt.d, tt.dt, done[0].AtSec, done[0].Failed, tt.d)
		}
		if f.e.Now() < tt.d || f.e.Now()-tt.dt >= tt.d {
			t.Errorf("D=%g dt=%g: reported when the clock reached %g, want the tick containing D", tt.d, tt.dt, f.e.Now())
		}
	}
}

func TestCappedNodeIsSlowerWithPredictedEnergy(t *testing.T) {
	const d = 1000.0
	c := catalog(t)
	g, _ := c.GPU("H100-SXM")
	cpu, _ := c.CPU("2xEPYC-9654")
	f := newFixture(t, h100Node("capped", 600))
	id := f.pod(trainPod("ns/p", d), "capped")
	done := f.runUntil(1, 3*d)
	if len(done) != 1 {
		t.Fatal("pod did not finish")
	}
	gpuW, tput := g.Operating(training.GPUUtilization, training.MemoryIntensity, 600)
	speed := 1 - 0.9*(1-tput)
	if want := d / speed; math.Abs(done[0].AtSec-want) > 1e-6 {
		t.Errorf("capped finish at %.6f, want %.6f (throughput %.4f)", done[0].AtSec, want, tput)
	}
	if done[0].AtSec <= d*1.05 {
		t.Errorf("capped node finished at %g, not measurably later than %g", done[0].AtSec, d)
	}
	// Alone on the node, the pod is attributed its 8 GPUs plus all CPU and platform power.
	podW := 8*gpuW + cpu.Power(16*0.3/192) + cpu.PlatformW
	if want := podW * done[0].AtSec; math.Abs(done[0].EnergyJ-want) > 1e-9*want || math.Abs(f.e.PodEnergy(id)-want) > 1e-9*want {
		t.Errorf("pod energy %.3f J, want %.3f J", done[0].EnergyJ, want)
	}
	// The node draws the pod's power until the finish; CPU and platform power are held to the end
	// of that tick, while the GPUs fall back to idle.
	nodeWant := podW*f.e.Now() - 8*(gpuW-g.IdleW)*(f.e.Now()-done[0].AtSec)
	if got := f.e.NodeEnergy(f.nodes["capped"]); math.Abs(got-nodeWant) > 1e-9*nodeWant {
		t.Errorf("node energy %.3f J, want %.3f J", got, nodeWant)
	}
}

func TestIdleNodesDrawIdlePower(t *testing.T) {
	f := newFixture(t, h100Node("gpu", 0), NodeSpec{Name: "cpu", CPUModel: "2xXeon-8480+"})
	f.e.Tick(10)
	tests := []struct {
		node  string
		wantW float64
	}{
		{"gpu", 128 + 400 + 8*100}, // EPYC idle + platform + 8 idle H100s
		{"cpu", 175 + 400},
	}
	for _, tt := range tests {
		id := f.nodes[tt.node]
		if p, en := f.e.NodePower(id), f.e.NodeEnergy(id); p != tt.wantW || math.Abs(en-10*tt.wantW) > 1e-9 {
			t.Errorf("%s: power %g W, energy %g J; want %g W, %g J", tt.node, p, en, tt.wantW, 10*tt.wantW)
		}
	}
}

func TestGangWaitsForAllMembers(t *testing.T) {
	const d = 500.0
	f := newFixture(t, h100Node("a", 0), h100Node("b", 0))
	s1, s2 := trainPod("ns/w-0", d), trainPod("ns/w-1", d)
	s1.GangID, s1.GangSize, s2.GangID, s2.GangSize = "ns/w", 2, "ns/w", 2
	p1 := f.pod(s1, "a")
	p2 := f.pod(s2, "")
	for range 300 {
		if done := f.e.Tick(1); len(done) > 0 {
			t.Fatalf("gang pod finished while blocked: %v", done)
		}
	}
	if snap := f.e.Snapshot(p1); snap.RemainingSec != d {
		t.Errorf("blocked gang member progressed: remaining %g, want %g", snap.RemainingSec, d)
	}
	if st := f.e.Stats(); st.GangBlocked != 1 || st.Progressing != 0 {
		t.Errorf("stats %+v, want 1 gang-blocked, 0 progressing", st)
	}
	blocked := f.e.BlockedGangs(nil, 120)
	if len(blocked) != 1 || blocked[0].ID != "ns/w" || blocked[0].Present != 1 || blocked[0].Size != 2 || blocked[0].BlockedSince != 0 {
		t.Errorf("BlockedGangs = %+v, want ns/w 1/2 since 0", blocked)
	}
	if got := f.e.BlockedGangs(nil, 301); len(got) != 0 {
		t.Errorf("BlockedGangs(min 301s) = %+v, want none yet", got)
	}
	if err := f.e.Start(p2, f.nodes["b"]); err != nil {
		t.Fatal(err)
	}
	var done []Finished
	for len(done) < 2 && f.e.Now() < 2000 {
		done = append(done, f.e.Tick(1)...)
	}
	if len(done) != 2 {
		t.Fatalf("gang did not finish: %v", done)
	}
	for _, fin := range done {
		if math.Abs(fin.AtSec-(300+d)) > 1e-9*d {
			t.Errorf("%s finished at %g, want %g", fin.Key, fin.AtSec, 300+d)
		}
	}
	if got := f.e.BlockedGangs(nil, 0); len(got) != 0 {
		t.Errorf("gang still reported blocked: %+v", got)
	}
}

func TestGangRunsAtSlowestMember(t *testing.T) {
	const d = 1000.0
	f := newFixture(t, h100Node("fast", 0), h100Node("slow", 400))
	s1, s2 := trainPod("ns/w-0", d), trainPod("ns/w-1", d)
	s1.GangID, s1.GangSize, s2.GangID, s2.GangSize = "g", 2, "g", 2
	f.pod(s1, "fast")
	f.pod(s2, "slow")
	var done []Finished
	for len(done) < 2 && f.e.Now() < 5*d {
		done = append(done, f.e.Tick(2)...)
	}
	g, _ := catalog(t).GPU("H100-SXM")
	want := d / (1 - 0.9*(1-g.Throughput(training.GPUUtilization, training.MemoryIntensity, 400)))
	if len(done) != 2 || math.Abs(done[0].AtSec-want) > 1e-6 || math.Abs(done[1].AtSec-want) > 1e-6 {
		t.Errorf("gang finished %+v, want both at %g", done, want)
	}
}

func TestCPUContentionAndCap(t *testing.T) {
	const d = 100.0
	cpuPod := func(key string) PodSpec {
		return PodSpec{Key: key, CPURequest: 64, CPUUnits: 64 * d, DurationSec: d,
			Sensitivity: Sensitivity{CPU: 0.5}, Profile: hw.Profile{CPUUtilization: 1}}
	}
	tests := []struct {
		name   string
		pods   int
		cpuCap float64
		want   float64
	}{
		{"alone", 1, 0, d},
		// 128 cores requested on 64: share 0.5, speed 1 − 0.5·0.5 = 0.75.
		{"two on 64 cores", 2, 0, d / 0.75},
		// full load, cap 0.5 of 540 W = 270 W: f = ((270−110)/(540−110))^(1/2.5).
		{"capped cpu", 1, 0.5, d / (1 - 0.5*(1-math.Pow(160.0/430, 0.4)))},
	}
	for _, tt := range tests {
		f := newFixture(t, NodeSpec{Name: "c", CPUModel: "generic", CPUCapFraction: tt.cpuCap})
		for i := range tt.pods {
			f.pod(cpuPod(string(rune('a'+i))), "c")
		}
		done := f.runUntil(0.5, 10*d)
		if len(done) == 0 || math.Abs(done[0].AtSec-tt.want) > 1e-9*tt.want {
			t.Errorf("%s: finished %+v, want at %g", tt.name, done, tt.want)
		}
	}
}

func TestEvictionAndCheckpoints(t *testing.T) {
	const d = 100.0
	tests := []struct {
		name          string
		every         float64
		wantRemaining float64
	}{
		{"no checkpoint: from zero", 0, d},
		// 25 s of progress with checkpoints every 10 s: the last one is at 20 s.
		{"from last checkpoint", 10, 80},
		{"checkpoint exactly at eviction", 12.5, 75},
	}
	for _, tt := range tests {
		f := newFixture(t, h100Node("n", 0))
		s := trainPod("ns/p", d)
		s.CheckpointIntervalSec = tt.every
		id := f.pod(s, "n")
		for range 10 {
			f.e.Tick(2.5)
		}
		f.e.Evict(id)
		if got := f.e.Snapshot(id).RemainingSec; math.Abs(got-tt.wantRemaining) > 1e-9 {
			t.Errorf("%s: remaining after eviction %g, want %g", tt.name, got, tt.wantRemaining)
		}
		if st := f.e.Tick(1); len(st) != 0 || f.e.Snapshot(id).RemainingSec != tt.wantRemaining {
			t.Errorf("%s: evicted pod progressed", tt.name)
		}
	}
}

func TestSnapshotRestoreResumes(t *testing.T) {
	const d = 100.0
	f := newFixture(t, h100Node("n", 0))
	s := trainPod("ns/p", d)
	s.CheckpointIntervalSec = 30
	id := f.pod(s, "n")
	for range 40 {
		f.e.Tick(1)
	}
	snap := f.e.Snapshot(id)
	if math.Abs(snap.RemainingGPUUnits-8*0.95*60) > 1e-9 || math.Abs(snap.RemainingCPUUnits-16*0.3*60) > 1e-9 || snap.CheckpointSec != 70 {
		t.Fatalf("snapshot %+v, want 60 s left (456 GPU units, 288 CPU units), checkpoint at 70 s left", snap)
	}
	// A restarted agent: fresh engine, progress from the snapshot, clock restarted at 40.
	g := newFixture(t, h100Node("n", 0))
	id2 := g.pod(s, "n")
	if err := g.e.Restore(id2, snap); err != nil {
		t.Fatal(err)
	}
	done := g.runUntil(1, 1000)
	if len(done) != 1 || math.Abs(done[0].AtSec-60) > 1e-9 {
		t.Errorf("restored pod finished %+v, want 60 s after restart", done)
	}
	if done[0].EnergyJ <= snap.EnergyJ {
		t.Errorf("restored energy %g did not continue from %g", done[0].EnergyJ, snap.EnergyJ)
	}
	if err := g.e.Restore(id2, Snapshot{RemainingSec: 2 * d}); err == nil || !strings.Contains(err.Error(), "remainingSec") {
		t.Errorf("restore beyond duration: err = %v", err)
	}
}

func TestFailureInjection(t *testing.T) {
	f := newFixture(t, h100Node("n", 0))
	s := trainPod("ns/p", 100)
	s.FailAtFraction = 0.5
	f.pod(s, "n")
	done := f.runUntil(3, 1000)
	if len(done) != 1 || !done[0].Failed || math.Abs(done[0].AtSec-50) > 1e-9 {
		t.Errorf("failure = %+v, want failed at 50", done)
	}
}

func TestAddPodValidation(t *testing.T) {
	e := New(catalog(t))
	tests := []struct {
		name string
		mut  func(*PodSpec)
		want string
	}{
		{"zero duration", func(s *PodSpec) { s.DurationSec = 0 }, "durationSec"},
		{"negative units", func(s *PodSpec) { s.GPUUnits = -1 }, "work"},
		{"sensitivity > 1", func(s *PodSpec) { s.Sensitivity.GPU = 2 }, "sensitivity.gpu"},
		{"gang without size", func(s *PodSpec) { s.GangID = "g" }, "gangSize"},
		{"empty key", func(s *PodSpec) { s.Key = "" }, "key"},
		{"negative checkpoint cost", func(s *PodSpec) { s.CheckpointCostSec = -1 }, "checkpointCostSec"},
		{"costly checkpoints too often", func(s *PodSpec) { s.CheckpointIntervalSec, s.CheckpointCostSec = 0.5, 1 }, "checkpointIntervalSec"},
	}
	for _, tt := range tests {
		s := trainPod("ns/p", 10)
		tt.mut(&s)
		if _, err := e.AddPod(s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want mention of %q", tt.name, err, tt.want)
		}
	}
	if _, err := e.AddNode(NodeSpec{Name: "x", GPUFamily: "B200", GPUs: 8}); err == nil || !strings.Contains(err.Error(), "B200") {
		t.Errorf("unknown family: err = %v", err)
	}
	n, _ := e.AddNode(NodeSpec{Name: "cpu"})
	id, _ := e.AddPod(trainPod("ns/gpu", 10))
	if err := e.Start(id, n); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Errorf("GPU pod on CPU node: err = %v", err)
	}
}

func TestRemoveReusesSlots(t *testing.T) {
	f := newFixture(t, h100Node("n", 0))
	a := f.pod(trainPod("ns/a", 10), "n")
	s := trainPod("ns/b", 10)
	s.GangID, s.GangSize = "g", 1
	b := f.pod(s, "n")
	f.e.Remove(a)
	f.e.Remove(b)
	if _, ok := f.e.Pod("ns/a"); ok {
		t.Error("removed pod still found")
	}
	c := f.pod(trainPod("ns/c", 10), "n")
	if c != a && c != b {
		t.Errorf("new pod got id %d, want a reused slot (%d or %d)", c, a, b)
	}
	done := f.runUntil(1, 100)
	if len(done) != 1 || done[0].Key != "ns/c" || math.Abs(done[0].AtSec-10) > 1e-9 {
		t.Errorf("after removals: %+v", done)
	}
}

// TestEnergyIsIntegralOfPower drives a varying trajectory (caps, pods starting and stopping,
// uneven ticks) and checks that accumulated node energy equals Σ power·dt, and that node power
// splits exactly into pod shares plus idle GPUs.
func TestEnergyIsIntegralOfPower(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	f := newFixture(t, h100Node("a", 0), NodeSpec{Name: "b", GPUFamily: "L40S", GPUs: 4, CPUModel: "2xXeon-8480+"})
	var pods []PodID
	for i := range 12 {
		s := trainPod(string(rune('a'+i)), 1e9)
		s.GPURequest = 1 + i%2
		s.Profile = hw.Profile{CPUUtilization: rng.Float64(), GPUUtilization: rng.Float64(), MemoryIntensity: rng.Float64()}
		pods = append(pods, f.pod(s, ""))
	}
	integral := map[NodeID]float64{}
	for range 500 {
		pid := pods[rng.IntN(len(pods))]
		switch rng.IntN(3) {
		case 0:
			_ = f.e.Start(pid, NodeID(rng.IntN(2)))
		case 1:
			f.e.Stop(pid)
		default:
			f.e.SetGPUCap(NodeID(rng.IntN(2)), 150+rng.Float64()*600)
		}
		dt := 0.1 + rng.Float64()*10
		if done := f.e.Tick(dt); len(done) > 0 {
			t.Fatalf("unexpected finish %v", done)
		}
		for nid := range NodeID(2) {
			integral[nid] += f.e.NodePower(nid) * dt
			var share float64
			for _, p := range pods {
				if pp := &f.e.pods[p]; pp.running && pp.node == nid {
					share += f.e.PodPower(p)
				}
			}
			n := &f.e.nodes[nid]
			busy := 0.0
			for _, p := range n.pods {
				if pp := &f.e.pods[p]; pp.running {
					busy += pp.gpus
				}
			}
			idle := math.Max(0, n.gpus-busy) * n.gpu.IdleW
			if len(n.pods) > 0 && math.Abs(share+idle-n.power) > 1e-9*n.power && hasRunning(f.e, nid) {
				t.Fatalf("node %d: pod shares %g + idle GPUs %g != node power %g", nid, share, idle, n.power)
			}
		}
	}
	for nid, want := range integral {
		if got := f.e.NodeEnergy(nid); math.Abs(got-want) > 1e-9*want {
			t.Errorf("node %d energy %.6f J, integral of power %.6f J", nid, got, want)
		}
	}
}

func hasRunning(e *Engine, nid NodeID) bool {
	for _, p := range e.nodes[nid].pods {
		if e.pods[p].running {
			return true
		}
	}
	return false
}
