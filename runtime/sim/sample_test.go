package sim

import (
	"context"
	"path/filepath"
	"testing"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// recount computes the sampler's gauges from the workloads and pods alive, the way the cluster
// engine's sampler reads them from its informers.
func (sm *sampler) recount() (cq, fl []gauge) {
	s := sm.s
	cq, fl = make([]gauge, len(sm.g.cq)), make([]gauge, len(sm.g.fl))
	for _, w := range s.wls {
		q := &cq[sm.g.cqIndex[w.it.rec.Queue]]
		q.requested += w.gpus
		if w.cq == "" {
			q.pending++
		} else {
			q.reserved += w.gpus
		}
		for f, n := range w.reservedGPU {
			fl[sm.g.flIndex[f]].reserved += n
		}
		for _, pd := range w.pods {
			if pd.done || pd.node < 0 {
				continue
			}
			q.inUse += pd.gpus
			if j := sm.g.nodeFlavor[pd.node]; j >= 0 {
				fl[j].inUse += pd.gpus
			}
		}
	}
	return cq, fl
}

// TestSampleGauges: the counters the roles keep equal a recount at every row of a contended run
// (preemptions, borrowing, pods waiting for nodes).
func TestSampleGauges(t *testing.T) {
	s, err := rcluster.Load(filepath.Join("..", "..", "examples", "clusters", "teams.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	sampleHook = func(sm *sampler) {
		rows++
		cq, fl := sm.recount()
		for i := range cq {
			if cq[i] != sm.g.cq[i] {
				t.Fatalf("t=%g queue %d: gauges %+v, recount %+v", sm.s.loop.Now(), i, sm.g.cq[i], cq[i])
			}
		}
		for i := range fl {
			if fl[i] != sm.g.fl[i] {
				t.Fatalf("t=%g flavor %d: gauges %+v, recount %+v", sm.s.loop.Now(), i, sm.g.fl[i], fl[i])
			}
		}
	}
	defer func() { sampleHook = nil }()
	if _, err := Run(context.Background(), Config{Trace: generated(t, 120, 3), Spec: s, Seed: 1, Timing: DefaultTiming,
		OutDir: t.TempDir(), WallClock: fixedWall()}); err != nil {
		t.Fatal(err)
	}
	if rows < 100 {
		t.Fatalf("%d rows checked", rows)
	}
}
