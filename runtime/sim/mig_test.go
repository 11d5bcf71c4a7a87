package sim

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// migSpecPath is the MIG case test/e2e's TestMIGSlices replays too, so that both engines are
// checked on one case.
const migSpecPath = "../../testdata/mig/spec.yaml"

// migSpec is the spec file's text.
var migSpec = func() string {
	b, err := os.ReadFile(migSpecPath)
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// migWorkload is test/e2e's: a one-pod debug_eval workload on one slice of profile.
func migWorkload(id, ns string, at, d float64, profile string, u, m float64) string {
	return fmt.Sprintf(`{"type":"workload","schemaVersion":"v2","workloadId":%q,"submitTimeOffsetSec":%g,"namespace":%q,"workloadType":"debug_eval","durationSec":%g,"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":%g,"memoryIntensity":%g,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"2","memory":"4Gi","nvidia.com/mig-%s":"1"}}]}`,
		id, at, ns, d, u, m, profile)
}

// runMIG replays the workload lines on migSpec.
func runMIG(t *testing.T, lines ...string) map[string]results.Record {
	t.Helper()
	_, tr := testutil.WriteTrace(t, lines...)
	out := t.TempDir()
	if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "mig.jsonl", Spec: spec(t, migSpec), Seed: 1, OutDir: out, WallClock: fixedWall()}); err != nil {
		t.Fatal(err)
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]results.Record{}
	for _, r := range d.Workloads {
		by[r.ID] = r
		if r.State != results.StateSucceeded {
			t.Errorf("%s: state %s (%s)", r.ID, r.State, r.Error)
		}
	}
	return by
}

// at checks that a record's time is want (to 1 ms: the sim's times are exact up to the engine's
// floating point).
func at(t *testing.T, id, what string, got *float64, want float64) {
	t.Helper()
	switch {
	case got == nil:
		t.Errorf("%s: never %s, want at %.3f", id, what, want)
	case math.Abs(*got-want) > 1e-3:
		t.Errorf("%s: %s at %.3f, want %.3f", id, what, *got, want)
	}
}

// TestMIGSliceSpeed runs one workload per H100 MIG profile, each alone on the 1-GPU node:
// admitted at its submission (its gpu.memory charge is within the 80 GiB), it finishes in the
// slice-adjusted time. With compute fraction c = computeSlices/7 and memory fraction
// f = memorySlices/8 of the profile (NVIDIA's table, written here by hand), a pod of GPU
// utilization u = 0.6 and memory intensity m = 0.3 is slowed by S = (1−m)·max(1, u/c) +
// m·max(1, u/f); debug_eval's GPU sensitivity 0.6 makes its speed 1 − 0.6·(1 − 1/S), and its JCT
// duration/speed. The same case as test/e2e TestMIGSlices, phase 1.
func TestMIGSliceSpeed(t *testing.T) {
	const u, m, d, sens = 0.6, 0.3, 600.0, 0.6
	tests := []struct {
		profile         string
		compute, memory float64 // slices of 7 and of 8
		jct             float64 // by hand, to 0.01 s
	}{
		{"1g.10gb", 1, 1, 1117.35}, // S = 0.7·4.2 + 0.3·4.8 = 4.38
		{"1g.20gb", 1, 2, 1063.95}, // S = 2.94 + 0.3·2.4 = 3.66
		{"2g.20gb", 2, 2, 890.24},  // S = 0.7·2.1 + 0.72 = 2.19
		{"3g.40gb", 3, 4, 707.75},  // S = 0.7·1.4 + 0.3·1.2 = 1.34
		{"4g.40gb", 4, 4, 632.95},  // S = 0.7·1.05 + 0.36 = 1.095
		{"7g.80gb", 7, 8, 600},     // S = 1
	}
	var lines []string
	for i, tt := range tests {
		lines = append(lines, migWorkload("slice-"+tt.profile, "mig", 60+1500*float64(i), d, tt.profile, u, m))
	}
	by := runMIG(t, lines...)
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			c, f := tt.compute/7, tt.memory/8
			S := (1-m)*math.Max(1, u/c) + m*math.Max(1, u/f)
			want := d / (1 - sens*(1-1/S))
			if math.Abs(want-tt.jct) > 0.01 {
				t.Fatalf("the formula gives %.3f, the table %.2f", want, tt.jct)
			}
			id := "slice-" + tt.profile
			r := by[id]
			at(t, id, "admitted", r.Admitted, r.SubmitOffsetSec)
			if got, ok := r.JCT(); !ok || math.Abs(got-want) > 1e-3 {
				t.Errorf("JCT %.3f, want %.3f", got, want)
			}
			if !strings.Contains(fmt.Sprint(r.Flavors), "h100-sxm-mig") {
				t.Errorf("admitted on flavors %v, want h100-sxm-mig", r.Flavors)
			}
		})
	}
}

// TestMIGGeometry: a light 1g.10gb (u = 0.1 fits a 1g slice: no slowdown) takes memory slice 0 for
// 1,000 s (the allocator's first placement of the profile); a 4g.40gb submitted 10 s later fits
// the quota (10 + 40 of 80 GiB) and is admitted, but its only placement (memory slices 0-3)
// overlaps, so its pod waits, although 6 of 7 compute slices and 70 GiB are free, until the
// 1g.10gb ends at 1,000 s; it then runs its 600 s. The same case as test/e2e TestMIGSlices,
// phase 2.
func TestMIGGeometry(t *testing.T) {
	by := runMIG(t,
		migWorkload("geo-small", "mig", 0, 1000, "1g.10gb", 0.1, 0),
		migWorkload("geo-big", "mig", 10, 600, "4g.40gb", 0.1, 0))
	small, big := by["geo-small"], by["geo-big"]
	at(t, "geo-small", "running", small.FirstPodRunning, 0)
	at(t, "geo-small", "finished", small.Finished, 1000)
	at(t, "geo-big", "admitted", big.Admitted, 10)
	at(t, "geo-big", "running", big.FirstPodRunning, 1000)
	at(t, "geo-big", "finished", big.Finished, 1600)
}

// TestMIGCounterQuota: migq's 20 GiB of gpu.memory hold one 2g.20gb (its devices consume 20,480
// MiB of the memory counter); a 1g.10gb (10,240 MiB) submitted 10 s later does not fit beside it
// and stays unadmitted until the 2g.20gb finishes at 1,000 s, then enters in Kueue v0.19's next
// requeue batch, 1 s later, and runs its 300 s. The same case as test/e2e TestMIGSlices, phase 3.
func TestMIGCounterQuota(t *testing.T) {
	by := runMIG(t,
		migWorkload("quota-first", "migq", 0, 1000, "2g.20gb", 0.1, 0),
		migWorkload("quota-second", "migq", 10, 300, "1g.10gb", 0.1, 0))
	first, second := by["quota-first"], by["quota-second"]
	at(t, "quota-first", "admitted", first.Admitted, 0)
	at(t, "quota-first", "finished", first.Finished, 1000)
	at(t, "quota-second", "admitted", second.Admitted, 1001)
	at(t, "quota-second", "finished", second.Finished, 1301)
}

// TestMIGResume stops the geometry and counter quota cases at 500 s and resumes them from the
// state written then: the resumed Kueue charges the admitted 2g.20gb's gpu.memory again (the
// 1g.10gb still waits for it) and the resumed 1g.10gb holds its slice again (the 4g.40gb's pod
// still waits), so every time is the uninterrupted run's. (With the local cluster's timing: a
// cycle of no duration admits a Workload at the instant of its creation, before the nanosecond
// the sim adds to its creation timestamp, which the state refuses.)
func TestMIGResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mig.jsonl")
	lines := []string{
		migWorkload("geo-small", "mig", 0, 1000, "1g.10gb", 0.1, 0),
		migWorkload("geo-big", "mig", 10, 600, "4g.40gb", 0.1, 0),
		migWorkload("quota-first", "migq", 0, 1000, "2g.20gb", 0.1, 0),
		migWorkload("quota-second", "migq", 10, 300, "1g.10gb", 0.1, 0),
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(context.Background(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Trace: tr, TraceName: "mig.jsonl", Spec: spec(t, migSpec), Seed: 1, Timing: DefaultTiming, WallClock: fixedWall()}
	load := func(c Config) map[string]results.Record {
		t.Helper()
		d, err := results.Load(c.OutDir)
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]results.Record{}
		for _, r := range d.Workloads {
			by[r.ID] = r
		}
		return by
	}
	full := base
	full.OutDir = t.TempDir()
	if _, err := Run(context.Background(), full); err != nil {
		t.Fatal(err)
	}
	want := load(full)
	// The waits the resumed run must keep.
	if *want["geo-big"].FirstPodRunning < 1000 || *want["quota-second"].Admitted < 1001 {
		t.Fatalf("the full run does not wait: 4g.40gb running at %g, second admitted at %g",
			*want["geo-big"].FirstPodRunning, *want["quota-second"].Admitted)
	}
	stop := base
	stop.OutDir, stop.MaxTraceSec, stop.StateOut = t.TempDir(), 500, t.TempDir()
	if _, err := Run(context.Background(), stop); err == nil {
		t.Fatal("a run stopped at the limit is incomplete, and says so")
	}
	st, err := state.Load(filepath.Join(stop.StateOut, state.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	rest, err := trace.LoadWorkloads(context.Background(), filepath.Join(stop.StateOut, st.Trace), trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := rcluster.Load(filepath.Join(stop.StateOut, st.Cluster))
	if err != nil {
		t.Fatal(err)
	}
	resumed := base
	resumed.Trace, resumed.Spec, resumed.Resume, resumed.OutDir = rest, cs, st, t.TempDir()
	if _, err := Run(context.Background(), resumed); err != nil {
		t.Fatal(err)
	}
	got := load(resumed)
	for _, tc := range []struct {
		id, what string
		time     func(results.Record) *float64
	}{
		{"geo-big", "running", func(r results.Record) *float64 { return r.FirstPodRunning }},
		{"geo-big", "finished", func(r results.Record) *float64 { return r.Finished }},
		{"quota-first", "finished", func(r results.Record) *float64 { return r.Finished }},
		{"quota-second", "admitted", func(r results.Record) *float64 { return r.Admitted }},
		{"quota-second", "finished", func(r results.Record) *float64 { return r.Finished }},
	} {
		at(t, tc.id, tc.what, tc.time(got[tc.id]), *tc.time(want[tc.id]))
	}
}

// TestGPUFractionTakesItsDuration runs one workload per share of a GPU, each alone: render puts
// it on the smallest H100 slice that holds the share of both compute and memory, where the pod
// uses share × u of the slice's GPU, never more than the slice has (c ≥ share and f ≥ share), so
// S = 1 and the workload takes exactly its duration, as on a whole GPU.
func TestGPUFractionTakesItsDuration(t *testing.T) {
	const u, m, d = 0.6, 0.3, 600.0
	shares := []string{"0.1", "0.25", "0.5", "0.9"}
	// The slice each runs on holds this much of the GPU (compute slices of 7): GPU allocation.
	held := map[string]float64{"0.1": 1.0 / 7, "0.25": 2.0 / 7, "0.5": 4.0 / 7, "0.9": 1}
	var lines []string
	for i, s := range shares {
		line := migWorkload("share-"+s, "mig", 60+1500*float64(i), d, "x", u, m)
		lines = append(lines, strings.Replace(line, `"nvidia.com/mig-x":"1"`, `"kueuelab.io/gpu-fraction":"`+s+`"`, 1))
	}
	by := runMIG(t, lines...)
	for _, s := range shares {
		id := "share-" + s
		r := by[id]
		at(t, id, "admitted", r.Admitted, r.SubmitOffsetSec)
		if got, ok := r.JCT(); !ok || math.Abs(got-d) > 1e-3 {
			t.Errorf("%s: JCT %.3f, want its duration %.0f", id, got, d)
		}
		if !strings.Contains(fmt.Sprint(r.Flavors), "h100-sxm-mig") {
			t.Errorf("%s: admitted on flavors %v, want h100-sxm-mig", id, r.Flavors)
		}
		if want := held[s] * d; math.Abs(r.GPUSeconds-want) > 1e-3 {
			t.Errorf("%s: %.3f GPU-seconds, want %.3f (its slice's share of the GPU × %g s)", id, r.GPUSeconds, want, d)
		}
	}
}
