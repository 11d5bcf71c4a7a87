package forecast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// small is 16 GPUs under one ClusterQueue: a generated load queues.
const small = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: small}
nodePools:
- {name: cpu, gpuFamily: CPU, count: 1, cpu: 64, memory: 256Gi}
- {name: h100, gpuFamily: H100-SXM, count: 2, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
clusterQueues:
- name: q
  preemption: {withinClusterQueue: LowerPriority}
  quotas:
  - flavor: cpu
    resources: {cpu: 64, memory: 256Gi}
  - flavor: h100-sxm
    resources: {cpu: 384, memory: 4000Gi, nvidia.com/gpu: 16}
teams:
- {name: team-a, clusterQueue: q}
- {name: team-b, clusterQueue: q}
- {name: team-c, clusterQueue: q}
priorityClasses:
  performance: {value: 1000}
  standard: {value: 100}
  eco: {value: 10}
`

// replayed runs a generated trace on small to the end and again to at, writing the state there.
func replayed(t *testing.T, n int, at float64) (full *results.Dir, dir string) {
	t.Helper()
	path := generated(t, 60, n, 4)
	spec, err := rcluster.Parse("small.yaml", []byte(small))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(context.Background(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Without experiments: a state holds an experiment's live trials, not the trials to come, so
	// from one the rest of a replay is not exact.
	tr.Workloads = slices.DeleteFunc(tr.Workloads, func(w *trace.Workload) bool { return w.WorkloadType == trace.HPOExperiment })
	wall := func() time.Time { return time.Time{} }
	cfg := sim.Config{Trace: tr, TraceName: "generated", Spec: spec, Seed: 1, Timing: sim.DefaultTiming, OutDir: t.TempDir(), WallClock: wall}
	if _, err := sim.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if full, err = results.Load(cfg.OutDir); err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	cfg.OutDir, cfg.MaxTraceSec, cfg.StateOut = t.TempDir(), at, dir
	if _, err := sim.Run(context.Background(), cfg); !errors.Is(err, replay.ErrIncomplete) {
		t.Fatalf("a run stopped at %gs: %v", at, err)
	}
	return full, dir
}

// generated writes n workloads of the default profile, one every meanSec on average, and returns
// the trace's path.
func generated(tb testing.TB, meanSec float64, n int, seed uint64) string {
	tb.Helper()
	p, err := gen.DefaultProfile()
	if err != nil {
		tb.Fatal(err)
	}
	p.Arrival.MeanInterArrivalSec = meanSec
	return testutil.WriteGenerated(tb, p, n, seed)
}

// TestOracleForecastIsTheReplay: from a replay's own state, with the work left known and the
// recorded arrivals, every run is the rest of the replay: each pending workload's p10, p50 and
// p90 are the time the replay admitted it, and the score is full coverage with no error.
func TestOracleForecastIsTheReplay(t *testing.T) {
	full, dir := replayed(t, 80, 3600)
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Workloads) == 0 || rep.Drawn != 0 || rep.Known == 0 {
		t.Fatalf("forecast of %d pending workloads, %d known, %d drawn: the test needs a queue and a replay's state", len(rep.Workloads), rep.Known, rep.Drawn)
	}
	s := ScoreAgainst(rep, full)
	if s.Inside != s.Workloads || s.MedianAbsErrSec != 0 {
		t.Errorf("score %+v: want every workload inside, no error", s)
	}
	for _, w := range rep.Workloads {
		if w.P10 == nil || w.P90 == nil || *w.P10 != *w.P90 {
			t.Errorf("%s: p10 %v p90 %v: the runs of an oracle forecast are one", w.ID, w.P10, w.P90)
		}
	}
	t.Logf("%d pending workloads at 3600s", len(rep.Workloads))
}

// TestDrawnForecastSpreads: drawing the work left from the history, the runs differ and the
// interval widens; the forecast still names every pending workload.
func TestDrawnForecastSpreads(t *testing.T) {
	_, dir := replayed(t, 80, 3600)
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 4, Seed: 1, DrawKnown: true, Arrivals: state.ArrivalsNone})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Drawn == 0 || rep.Known != 0 || rep.History == 0 {
		t.Fatalf("%d drawn, %d known from %d finished", rep.Drawn, rep.Known, rep.History)
	}
	wide := 0
	for _, w := range rep.Workloads {
		if len(w.ETAs) != 4 {
			t.Errorf("%s: %d ETAs, want one per run", w.ID, len(w.ETAs))
		}
		if w.P10 != nil && w.P90 != nil && *w.P90 > *w.P10 {
			wide++
		}
	}
	if wide == 0 {
		t.Error("no pending workload's interval is wider than a point: the draws change nothing")
	}
}

func TestKaplanMeier(t *testing.T) {
	// Finished 10, 20, 30; one censored at 25: S steps to 3/4 at 10, 2/4 at 20, and at 30 the one
	// left at risk ends: 0.
	k := newKM([]obs{{sec: 10}, {sec: 20}, {sec: 25, censored: true}, {sec: 30}})
	for _, tc := range []struct{ x, want float64 }{{5, 1}, {10, 0.75}, {19, 0.75}, {20, 0.5}, {29, 0.5}, {30, 0}} {
		if got := k.survival(tc.x); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("S(%g) = %g, want %g", tc.x, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if d := k.draw(22, rng); d != 30 {
			t.Fatalf("a duration longer than 22 is 30 here, drew %g", d)
		}
	}
	// Censored beyond every finished duration: draws past the longest observation.
	k = newKM([]obs{{sec: 10}, {sec: 100, censored: true}})
	if d := k.draw(50, rng); d < 100 {
		t.Errorf("drew %g beyond 50 when only a censored 100 is known there", d)
	}
}

func TestQuantileAndWilson(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	for _, tc := range []struct {
		q    float64
		want *float64
	}{{0.1, ptr(1)}, {0.5, ptr(5)}, {0.9, nil}} {
		got := quantile(xs, 10, tc.q) // two of ten runs did not admit
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("q%g: %v, want %v", tc.q, got, tc.want)
		}
	}
	// Wilson's interval for 8 of 10 at 95%: 0.490 to 0.943.
	if lo, hi := wilson(8, 10); math.Abs(lo-0.4902) > 1e-3 || math.Abs(hi-0.9433) > 1e-3 {
		t.Errorf("wilson(8, 10) = %g, %g", lo, hi)
	}
}

func ptr(x float64) *float64 { return &x }

// Kueue deactivates a workload whose admitted time reaches its maximum execution time: the
// forecast ends its work there whatever it drew or knew, and leaves it alone within the limit.
func TestTruncateToMaxExec(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name                     string
		max, remaining           *float64
		elapsed, traceLeft, want float64
		progress                 float64 // the main role's work left
		progressKept, noProgress bool
	}{
		{name: "no limit", remaining: f(5000), elapsed: 100, want: 5000, progressKept: true},
		{name: "within the limit", max: f(3600), remaining: f(1000), elapsed: 600, want: 1000, progressKept: true},
		{name: "past the limit, running", max: f(3600), remaining: f(5000), elapsed: 600, want: 3000},
		{name: "past the limit, pending", max: f(3600), remaining: f(5000), want: 3600},
		{name: "overdue: deactivated at once", max: f(3600), remaining: f(5000), elapsed: 4000, want: 1},
		{name: "unknown work left, the trace's past the limit", max: f(600), elapsed: 100, traceLeft: 900, want: 500, noProgress: true},
		{name: "unknown work left, the trace's within it", max: f(600), elapsed: 100, traceLeft: 300, noProgress: true},
		{name: "progress known within the limit", max: f(3600), elapsed: 600, traceLeft: 4400, progress: 100, progressKept: true},
		{name: "progress known past the limit", max: f(3600), elapsed: 600, traceLeft: 100, progress: 4000, want: 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &state.Workload{MaxExecutionSec: tc.max, RemainingSec: tc.remaining, Progress: []state.RoleProgress{{Role: "main", RemainingSec: tc.progress}}}
			if tc.noProgress {
				w.Progress = nil
			}
			truncateToMaxExec(w, tc.elapsed, tc.traceLeft)
			got := 0.0
			if w.RemainingSec != nil {
				got = *w.RemainingSec
			}
			if got != tc.want || (len(w.Progress) > 0) != tc.progressKept {
				t.Errorf("work left %v (progress kept %v), want %v (%v)", got, len(w.Progress) > 0, tc.want, tc.progressKept)
			}
		})
	}
}

// TestForecastSaysWhatItWaitsFor: a one-GPU job behind a 16-GPU job that holds the ClusterQueue's
// whole nvidia.com/gpu quota waits, in every run, for what Kueue's flavor assigner says of each
// flavor it tried in the quota's order: the cpu flavor has no GPU quota at all ("insufficient
// quota for %s in flavor %s, previously considered podsets requests (%s) + current podset request
// (%s) > maximum capacity (%s)"), h100-sxm's is used up ("insufficient unused quota for %s in
// flavor %s, %s more needed"); numbers written N.
func TestForecastSaysWhatItWaitsFor(t *testing.T) {
	dir := handState(t, 200, handWorkload("big", "distributed_training", 0, 10000, 2, 8), handWorkload("small", "single_gpu_training", 100, 600, 1, 1))
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Workloads) != 1 || rep.Workloads[0].ID != "small" {
		t.Fatalf("forecast of %+v, want the small job pending", rep.Workloads)
	}
	want := []Wait{{Reason: "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor cpu, previously considered podsets requests (N) + current podset request (N) > maximum capacity (N), " +
		"insufficient unused quota for nvidia.com/gpu in flavor h100-sxm, N more needed", Share: 1}}
	if got := rep.Workloads[0].WaitsFor; !slices.Equal(got, want) {
		t.Errorf("waits for %+v, want %+v", got, want)
	}
	if w := shares([][]string{{NoWait}, {"h100 x 4 more"}, {NoWait}}, 0, 3); len(w) != 2 || w[0].Reason != NoWait || math.Abs(w[0].Share-2.0/3) > 1e-12 || w[1].Reason != "h100 x N more" {
		t.Errorf("shares: %+v", w)
	}
}

// handWorkload is a trace line of a workload of pods pods of gpus GPUs each, on small's team-a.
func handWorkload(id, fam string, at, d float64, pods, gpus int) string {
	return fmt.Sprintf(`{"type":"workload","schemaVersion":"v2","workloadId":%q,"submitTimeOffsetSec":%g,"namespace":"team-a","workloadType":%q,"durationSec":%g,`+
		`"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":0.5,"memoryIntensity":0.3,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},`+
		`"pods":[{"role":"worker","replicas":%d,"requests":{"cpu":"4","memory":"16Gi","nvidia.com/gpu":"%d"}}],"intentClass":"standard"}`, id, at, fam, d, pods, gpus)
}

// handState replays the trace lines on small to at and returns the directory of the state there.
func handState(t *testing.T, at float64, lines ...string) string {
	t.Helper()
	return handStateOn(t, small, at, lines...)
}

// handStateOn is handState on the cluster spec specYAML.
func handStateOn(t *testing.T, specYAML string, at float64, lines ...string) string {
	t.Helper()
	_, tr := testutil.WriteTrace(t, lines...)
	spec, err := rcluster.Parse("small.yaml", []byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := sim.Config{Trace: tr, TraceName: "hand", Spec: spec, Seed: 1, Timing: sim.DefaultTiming, OutDir: t.TempDir(),
		WallClock: func() time.Time { return time.Time{} }, MaxTraceSec: at, StateOut: dir}
	if _, err := sim.Run(context.Background(), cfg); !errors.Is(err, replay.ErrIncomplete) {
		t.Fatalf("a run stopped at %gs: %v", at, err)
	}
	return dir
}
