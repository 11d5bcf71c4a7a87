package engine

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kueuelab/kueuelab/model/hw"
)

// buildCluster makes nodes×8-GPU H100 nodes with podsPerNode pods each: 4 one-GPU gang members
// (gangs of 8 spread over 8 nodes, every 10th gang missing a member so it stays blocked), 4
// one-GPU singles and CPU-only pods for the rest. Every third node is capped.
func buildCluster(tb testing.TB, nodes, podsPerNode int) *Engine {
	e := New(catalog(tb))
	prof := hw.Profile{CPUUtilization: 0.4, GPUUtilization: 0.9, MemoryIntensity: 0.2}
	cpuProf := hw.Profile{CPUUtilization: 0.8}
	for n := range nodes {
		capW := 0.0
		if n%3 == 0 {
			capW = 500
		}
		nid, err := e.AddNode(NodeSpec{Name: fmt.Sprintf("node-%04d", n), GPUFamily: "H100-SXM", GPUs: 8, CPUModel: "2xEPYC-9654", GPUCapW: capW})
		if err != nil {
			tb.Fatal(err)
		}
		for i := range podsPerNode {
			s := PodSpec{Key: fmt.Sprintf("ns/p-%04d-%03d", n, i), WorkloadID: fmt.Sprintf("w-%04d-%03d", n, i), DurationSec: 1e12}
			pending := false
			switch {
			case i < 4:
				gangNo := (n/8)*4 + i
				s.WorkloadID = fmt.Sprintf("gang-%d", gangNo)
				s.GangID, s.GangSize = s.WorkloadID, 8
				s.CPURequest, s.GPURequest, s.Profile = 8, 1, prof
				s.Sensitivity = Sensitivity{CPU: 0.2, GPU: 0.9}
				pending = gangNo%10 == 0 && n%8 == 7 // never started: its gang stays blocked
			case i < 8:
				s.CPURequest, s.GPURequest, s.Profile = 8, 1, prof
				s.Sensitivity = Sensitivity{CPU: 0.3, GPU: 0.7}
			default:
				s.CPURequest, s.Profile = 2, cpuProf
				s.Sensitivity = Sensitivity{CPU: 0.9}
			}
			s.CPUUnits, s.GPUUnits = s.CPURequest*s.DurationSec, float64(s.GPURequest)*s.DurationSec
			id, err := e.AddPod(s)
			if err != nil {
				tb.Fatal(err)
			}
			if pending {
				continue
			}
			if err := e.Start(id, nid); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return e
}

func BenchmarkTick100kPods1kNodes(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := buildCluster(b, 1000, 100)
	e.Tick(1) // fill the per-pod caches once, as a running agent would have
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if done := e.Tick(1); len(done) != 0 {
			b.Fatalf("unexpected finish: %v", done[0])
		}
	}
	b.StopTimer()
	st := e.Stats()
	// Reported after the loop: ResetTimer discards metrics reported before it.
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(st.Running), "running-pods")
	b.ReportMetric(float64(st.GangBlocked), "gang-blocked-pods")
}

// TestBenchClusterShape keeps the benchmark honest: the cluster it builds has the intended mix.
func TestBenchClusterShape(t *testing.T) {
	e := buildCluster(t, 80, 100)
	e.Tick(1)
	st := e.Stats()
	// 80 nodes × 100 pods; gangs 0, 10, 20, … (4 gangs per 8-node group) miss their last member.
	blockedGangs := len(e.BlockedGangs(nil, 0))
	if blockedGangs == 0 || st.GangBlocked != blockedGangs*7 {
		t.Errorf("blocked gangs %d, gang-blocked pods %d; want 7 running members per blocked gang", blockedGangs, st.GangBlocked)
	}
	if st.Running != 8000-blockedGangs || st.Progressing != st.Running-st.GangBlocked {
		t.Errorf("stats %+v with %d blocked gangs", st, blockedGangs)
	}
}

// BenchmarkTick100kPods1kNodesCapChange is the worst case: every node's cap changes before every
// tick, so every GPU pod's operating point is recomputed.
func BenchmarkTick100kPods1kNodesCapChange(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	e := buildCluster(b, 1000, 100)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		for n := range NodeID(1000) {
			e.SetGPUCap(n, float64(400+(i+int(n))%300))
		}
		e.Tick(1)
	}
}

// churn keeps 1000 nodes × 5 one-GPU pods busy: every pod that finishes is replaced by a new one
// on its node, as a loaded cluster in the sim engine does. The engine jumps from finish to finish;
// each iteration handles one completion. Event-driven engines do it without touching the other
// nodes; the ticked engine (the baseline, same run) ticks and predicts over all of them.
func churn(b *testing.B, e *Engine) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	prof := hw.Profile{CPUUtilization: 0.4, GPUUtilization: 0.9, MemoryIntensity: 0.2}
	seq := 0
	add := func(n NodeID) {
		seq++
		d := 600 + float64(seq%977)
		s := PodSpec{Key: fmt.Sprintf("ns/p-%d", seq), WorkloadID: "w", DurationSec: d, CPURequest: 8, GPURequest: 1,
			CPUUnits: 8 * d, GPUUnits: d, Profile: prof, Sensitivity: Sensitivity{CPU: 0.3, GPU: 0.9}}
		id, err := e.AddPod(s)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Start(id, n); err != nil {
			b.Fatal(err)
		}
	}
	nodeOf := map[string]NodeID{}
	for n := range 1000 {
		id, err := e.AddNode(NodeSpec{Name: fmt.Sprintf("node-%04d", n), GPUFamily: "H100-SXM", GPUs: 8, CPUModel: "2xEPYC-9654"})
		if err != nil {
			b.Fatal(err)
		}
		for range 5 {
			add(id)
			nodeOf[fmt.Sprintf("ns/p-%d", seq)] = id
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for b.Loop() {
		if e.ev == nil {
			e.Tick(0) // a ticked engine predicts from its last tick's speeds
		}
		at, ok := e.NextFinish()
		if !ok {
			b.Fatal("nothing runs")
		}
		var fs []Finished
		if e.ev != nil {
			fs = e.AdvanceTo(at)
		} else {
			fs = e.Tick(at - e.Now())
		}
		for _, f := range fs {
			done++
			n := nodeOf[f.Key]
			e.Remove(f.Pod)
			add(n)
			nodeOf[fmt.Sprintf("ns/p-%d", seq)] = n
		}
	}
	b.ReportMetric(float64(done)/float64(b.N), "finishes/op")
}

func BenchmarkChurn5kPods1kNodesTicked(b *testing.B)      { churn(b, New(catalog(b))) }
func BenchmarkChurn5kPods1kNodesEventDriven(b *testing.B) { churn(b, NewEventDriven(catalog(b))) }
