package e2e

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// TestStormOnBothEngines replays testdata/storm on both engines: Kueue v0.19's inadmissible-
// requeue batches and waitForPodsReady (on by default) where they bite. At trace 20 s p (storm-a,
// 8 GPUs) preempts the seven eco workloads of its ClusterQueue and is admitted; q (storm-c, older,
// parked as inadmissible) would return to its heap only a batch (1 s) after the quota freed, by
// when p holds it — the preemption loop Kueue v0.15 went round here is gone. No node has 8 free
// GPUs (a0 and c1 hold one, b1 the other, until 20000 s), so p's pod never starts: Kueue evicts p
// 30 min after each admission (PodsReadyTimeout), the eco workloads return a batch later, p is
// requeued when its backoff ends (60 s, doubling, from the eviction, at the API's one-second
// resolution) and preempts them again. Derived from Kueue's documented defaults, checked on both
// engines for p's first three rounds; the engines must also agree with each other on every
// admission and eviction of p and e1 within a second.
func TestStormOnBothEngines(t *testing.T) {
	tracePath, _ := filepath.Abs(filepath.Join("..", "..", "testdata", "storm", "trace.jsonl"))
	tr, err := trace.LoadWorkloads(t.Context(), tracePath, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := rcluster.Load(filepath.Join("..", "..", "testdata", "storm", "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	simOut := filepath.Join(t.TempDir(), "sim")
	if _, err := sim.Run(t.Context(), sim.Config{Trace: tr, TraceName: tracePath, Spec: spec, Seed: 1,
		Timing: sim.Timing{}, OutDir: simOut, Out: &testWriter{t: t}}); err != nil {
		t.Fatalf("sim engine: %v", err)
	}
	_, out, err := runInProcess(t, tr, tracePath, spec, 10*time.Minute)
	if err != nil {
		t.Fatalf("cluster engine: %v", err)
	}
	steps := map[string][]stormStep{}
	for engine, dir := range map[string]string{"sim": simOut, "cluster": out} {
		d, err := results.Load(dir)
		if err != nil {
			t.Fatalf("%s engine: %v", engine, err)
		}
		steps[engine] = stormSteps(d)
		checkStorm(t, engine, steps[engine])
	}
	s, c := steps["sim"], steps["cluster"]
	for i := range max(len(s), len(c)) {
		if i >= len(s) || i >= len(c) || s[i].what != c[i].what || math.Abs(s[i].t-c[i].t) > 1 {
			t.Errorf("the engines part at step %d: sim %v, cluster %v\nsim from there:     %v\ncluster from there: %v",
				i, at(s, i), at(c, i), s[min(i, len(s)):], c[min(i, len(c)):])
			break
		}
	}
}

// stormStep is one admission, eviction or requeue of p or e1.
type stormStep struct {
	what string // "p admitted", "e1 evicted Preempted", ...
	t    float64
}

func (s stormStep) String() string { return fmt.Sprintf("%s at %.3f", s.what, s.t) }

func at(s []stormStep, i int) string {
	if i < len(s) {
		return s[i].String()
	}
	return "(none)"
}

func stormSteps(d *results.Dir) []stormStep {
	var out []stormStep
	for _, e := range d.Events {
		if e.Workload != "p" && e.Workload != "e1" {
			continue
		}
		switch e.Type {
		case results.EvAdmitted:
			out = append(out, stormStep{e.Workload + " admitted", e.T})
		case results.EvEvicted, results.EvRequeued:
			out = append(out, stormStep{e.Workload + " " + string(e.Type) + " " + e.Reason, e.T})
		}
	}
	// The engines may record one instant's events in either order (a preemption's victim evicted,
	// its preemptor admitted): within an instant, in a fixed order.
	rank := func(s stormStep) int {
		for i, w := range []string{" evicted ", " requeued ", " admitted"} {
			if strings.Contains(s.what+" ", w) {
				return i
			}
		}
		return 3
	}
	slices.SortStableFunc(out, func(a, b stormStep) int {
		return cmp.Or(cmp.Compare(toMs(a.t), toMs(b.t)), rank(a)-rank(b), strings.Compare(a.what, b.what))
	})
	return out
}

// checkStorm checks p's first three rounds against Kueue's documented timings.
func checkStorm(t *testing.T, engine string, steps []stormStep) {
	t.Helper()
	var p []stormStep
	for _, s := range steps {
		if strings.HasPrefix(s.what, "p ") {
			p = append(p, s)
		}
	}
	const timeout = 1800.0
	admit, backoff := 20.0, 60.0
	var want []stormStep
	for range 3 {
		evict := admit + timeout
		requeue := math.Floor(evict + backoff)
		want = append(want, stormStep{"p admitted", admit}, stormStep{"p evicted PodsReadyTimeout", evict},
			stormStep{"p requeued BackoffFinished", requeue})
		admit, backoff = requeue, 2*backoff
	}
	for i, w := range want {
		if i >= len(p) || p[i].what != w.what || math.Abs(p[i].t-w.t) > 1 {
			t.Errorf("%s engine: p's step %d is %s, want %s (within 1 s)", engine, i, at(p, i), w)
			return
		}
	}
}
