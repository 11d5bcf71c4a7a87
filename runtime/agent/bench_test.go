package agent

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/simclock"

	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
)

// benchAgent is an agent whose caches hold nodes × podsPerNode Running pods (a quarter in gangs
// of 4), synced into the engine without informers or an API server.
func benchAgent(b *testing.B, nodes, podsPerNode int, checkpoint time.Duration) (*Agent, *clocktesting.FakeClock) {
	b.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	trace := simclock.New(simclock.Options{Disabled: true, MaxRate: 60, Wall: clk})
	trace.Start(b.Context())
	a, err := New(Config{Trace: trace, Wall: clk, CheckpointInterval: checkpoint}, fake.NewClientset(), nil)
	if err != nil {
		b.Fatal(err)
	}
	a.alarm = trace.NewAlarm("agent", simclock.OrderCompletion)
	for i := range nodes {
		n := makeNode(fmt.Sprintf("n%d", i), 8, nil)
		if i%10 == 0 {
			n.Labels[contract.PowerCap] = "eco"
		}
		if err := a.nodeInf.GetIndexer().Add(n); err != nil {
			b.Fatal(err)
		}
		a.syncNode(n.Name, n, map[string]struct{}{})
		for j := range podsPerNode {
			gang := 0
			if j%4 == 0 {
				gang = 4
			}
			// Durations long enough that nothing finishes during the benchmark.
			c := podContract(fmt.Sprintf("wl-%d-%d", i, j/4), gang)
			c.DurationSec = 1e9
			p := makePod(fmt.Sprintf("p-%d-%d", i, j), n.Name, c, nil)
			if err := a.podInf.GetIndexer().Add(p); err != nil {
				b.Fatal(err)
			}
			a.syncPod(p.Namespace+"/"+p.Name, p, "")
		}
	}
	return a, clk
}

// BenchmarkAgentTick100kPods1kNodes is one agent sync with nothing changed (engine to the clock's
// time, gang reports, next completion, node power) for 100,000 pods on 1,000 nodes; the target is
// ≤ 100 ms on one core.
func BenchmarkAgentTick100kPods1kNodes(b *testing.B) {
	a, clk := benchAgent(b, 1000, 100, time.Hour)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	for b.Loop() {
		clk.Step(200 * time.Millisecond)
		a.sync()
	}
	// Informer caches, engine and agent state, as a running agent holds them.
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap")
	if s := a.eng.Stats(); s.Running != 100000 {
		b.Fatalf("engine runs %d pods, want 100000", s.Running)
	}
}

// BenchmarkAgentProgressFlush100kPods queues progress writes for 100,000 pods (every checkpoint).
func BenchmarkAgentProgressFlush100kPods(b *testing.B) {
	a, clk := benchAgent(b, 1000, 100, time.Hour)
	b.ResetTimer()
	for b.Loop() {
		clk.Step(200 * time.Millisecond)
		a.flushProgress()
		a.w.mu.Lock()
		clear(a.w.pending) // no writer runs: keep the next flush writing everything again
		a.w.mu.Unlock()
		for _, st := range a.podState {
			st.written = -1
		}
	}
}
