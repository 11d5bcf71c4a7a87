package sim

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/gen"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// BenchmarkRunScale replays the scale target's shape, the org profile (examples/profiles/org.yaml)
// on the 1,000-node org (examples/clusters/org.yaml), at two sizes, from a trace file as
// `kueuelab run --engine sim` does. Per workload it reports the time, the bytes allocated and
// the live heap at its largest (after a collection at every 200th sample): the same at both
// sizes, less the run's fixed part, means time and memory grow linearly with the trace.
// hack/bench-sim.sh measures the real scale (10^4 to 10^6 workloads).
func BenchmarkRunScale(b *testing.B) {
	spec, err := rcluster.Load(filepath.Join("..", "..", "examples", "clusters", "org.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	prof, _, err := gen.LoadProfile(filepath.Join("..", "..", "examples", "profiles", "org.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{5000, 20000} {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			path := testutil.WriteGenerated(b, prof, n, 1)
			var peak uint64
			sampleHook = func(sm *sampler) {
				if sm.k%200 != 0 {
					return
				}
				b.StopTimer()
				var ms runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
				b.StartTimer()
			}
			defer func() { sampleHook = nil }()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			for b.Loop() {
				if _, err := Run(context.Background(), Config{TracePath: path, Spec: spec, Seed: 1,
					Timing: DefaultTiming, OutDir: b.TempDir(), WallClock: fixedWall()}); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/workload")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N*n), "alloc-B/workload")
			b.ReportMetric(float64(peak)/float64(n), "peak-live-B/workload")
		})
	}
}
