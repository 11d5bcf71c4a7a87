package forecast

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/state"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// BenchmarkForecastDeepState forecasts the speed goal's shape (1,000 pending and 500 running
// workloads): the default profile submitting every 2.9 s on teams.yaml ten times over
// (testdata/teams-x10.yaml, 960 GPUs), stopped at 3 h with 1,002 pending and 774 admitted, the
// arrivals none, the control plane none. Each iteration runs two repeats, one per core; the
// metric is wall seconds per repeat on two cores (the goal: 100 repeats in 30 s, 0.3 s).
func BenchmarkForecastDeepState(b *testing.B) {
	dir := deepState(b)
	st, err := state.Load(filepath.Join(dir, state.StateFile))
	if err != nil {
		b.Fatal(err)
	}
	pending := 0
	for _, w := range st.Workloads {
		if w.Phase == state.Pending {
			pending++
		}
	}
	b.Logf("state at 3 h: %d pending, %d admitted", pending, len(st.Workloads)-pending)
	for b.Loop() {
		rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 2, Parallel: 2, Seed: 1, Arrivals: state.ArrivalsNone})
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Workloads) != pending {
			b.Fatalf("%d pending forecast: want the state's %d", len(rep.Workloads), pending)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(2*b.N), "s/repeat")
}

// deepState replays the benchmark's trace to 3 h and returns the directory of its state.
func deepState(b *testing.B) string {
	b.Helper()
	spec, err := rcluster.Load(filepath.Join("testdata", "teams-x10.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	path := generated(b, 2.9, 4000, 1) // 4,000 workloads reach past 3 h at this rate
	dir := b.TempDir()
	cfg := sim.Config{TracePath: path, TraceName: "deep", Spec: spec, Seed: 1, Timing: sim.DefaultTiming, OutDir: b.TempDir(),
		MaxTraceSec: 3 * 3600, StateOut: dir, WallClock: func() time.Time { return time.Time{} }}
	if _, err := sim.Run(context.Background(), cfg); !errors.Is(err, replay.ErrIncomplete) {
		b.Fatalf("the replay stopped at 3 h: %v", err)
	}
	return dir
}
