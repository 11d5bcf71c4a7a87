package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// migWorkload is a one-pod debug_eval workload on n slices of profile.
func migWorkload(id, ns string, at, d float64, profile string, u, m float64) string {
	return fmt.Sprintf(`{"type":"workload","schemaVersion":"v2","workloadId":%q,"submitTimeOffsetSec":%g,"namespace":%q,"workloadType":"debug_eval","durationSec":%g,"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":%g,"memoryIntensity":%g,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"2","memory":"4Gi","nvidia.com/mig-%s":"1"}}]}`,
		id, at, ns, d, u, m, profile)
}

// TestMIGSlices replays MIG workloads on the real control plane: Kueue charges each claim's
// template to gpu.memory through its counter quota, kube-scheduler allocates the claim from the
// KWOK node's ResourceSlices, and the agent runs the pod at the slice's speed.
//
//  1. One workload per H100 profile, each alone, must be admitted at once and finish in the
//     slice-adjusted time derived by hand: slowdown S = (1−m)·max(1, u/c) + m·max(1, u/f) for
//     compute and memory fractions c and f, speed 1 − 0.6·(1 − 1/S) (the agent's GPU sensitivity of
//     debug_eval), JCT = duration / speed.
//  2. Geometry: a light 1g.10gb takes memory slice 0 for 1,000 s; a 4g.40gb submitted 10 s later
//     fits the quota (10 + 40 of 80 GiB) and is admitted, but its only placement (slices 0-3)
//     overlaps, so its pod stays pending, although 6 of 7 compute slices and 70 GiB are free, until
//     the 1g.10gb ends.
//  3. Counter quota: migq's 20 GiB hold one 2g.20gb; a 1g.10gb submitted 10 s later stays
//     unadmitted until the 2g.20gb finishes, then enters in Kueue's next requeue batch (1 s).
func TestMIGSlices(t *testing.T) {
	cat, err := hw.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	h100, _ := cat.GPU("H100-SXM")
	const u, m, d, sens = 0.6, 0.3, 600.0, 0.6
	var lines []string
	want := map[string]float64{} // phase 1: JCT
	held := map[string]float64{} // and the share of the GPU the slice holds
	at := 60.0
	for _, p := range h100.MIG.Profiles {
		c, f := h100.MIG.ComputeFraction(&p), h100.MIG.MemoryFraction(&p)
		S := (1-m)*math.Max(1, u/c) + m*math.Max(1, u/f)
		id := "slice-" + strings.ReplaceAll(p.Name, ".", "-")
		want[id] = d / (1 - sens*(1-1/S))
		held[id] = c
		lines = append(lines, migWorkload(id, "mig", at, d, p.Name, u, m))
		at += 1500
	}
	// Phase 2 at 9,000 s; light pods (u = 0.1 fits a 1g slice: no slowdown).
	lines = append(lines,
		migWorkload("geo-small", "mig", 9000, 1000, "1g.10gb", 0.1, 0),
		migWorkload("geo-big", "mig", 9010, 600, "4g.40gb", 0.1, 0),
		migWorkload("quota-first", "migq", 12000, 1000, "2g.20gb", 0.1, 0),
		migWorkload("quota-second", "migq", 12010, 300, "1g.10gb", 0.1, 0))
	// Shares of a GPU at 15,000 s, each alone: on the smallest slice that holds the share (0.5:
	// 4g.40gb, 0.1: 1g.10gb) the pod uses share × u of it, within the slice: its duration exactly.
	for i, share := range []string{"0.5", "0.1"} {
		id := "share-" + strings.ReplaceAll(share, ".", "-")
		line := migWorkload(id, "mig", 15000+1500*float64(i), d, "x", u, m)
		lines = append(lines, strings.Replace(line, `"nvidia.com/mig-x":"1"`, `"`+trace.ResourceGPUFraction+`":"`+share+`"`, 1))
		want[id] = d
		held[id] = map[string]float64{"0.5": 4.0 / 7, "0.1": 1.0 / 7}[share]
	}
	path, tr := testutil.WriteTrace(t, lines...)
	specText, err := os.ReadFile(filepath.Join("..", "..", "testdata", "mig", "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, dir := replaySpec(t, tr, path, string(specText))
	by := map[string]results.Record{}
	for _, r := range dir.Workloads {
		by[r.ID] = r
		if r.State != results.StateSucceeded {
			t.Errorf("%s: state %s (%s)", r.ID, r.State, r.Error)
		}
	}
	near := func(id, what string, got *float64, want, tol float64) {
		t.Helper()
		switch {
		case got == nil:
			t.Errorf("%s: never %s, want at %.1f", id, what, want)
		case math.Abs(*got-want) > tol:
			t.Errorf("%s: %s at trace %.3f s, want %.3f (±%g)", id, what, *got, want, tol)
		}
	}
	for id, jct := range want {
		r := by[id]
		near(id, "admitted", r.Admitted, r.SubmitOffsetSec, 1)
		got, ok := r.JCT()
		// GPU allocation counts the slice as its share of the GPU's 7 compute slices.
		if c := held[id]; c == 0 || math.Abs(r.GPUSeconds-c*got) > math.Max(0.01*c*got, 1) {
			t.Errorf("%s: %.1f GPU-seconds over a JCT of %.1f s, want %.3f of it", id, r.GPUSeconds, got, c)
		}
		t.Logf("%s: JCT %.3f trace s, slice model %.3f", id, got, jct)
		if !ok || math.Abs(got-jct) > math.Max(0.01*jct, 1) {
			t.Errorf("%s alone on its slice took %.3f trace s, want %.3f", id, got, jct)
		}
		if !strings.Contains(fmt.Sprint(r.Flavors), "h100-sxm-mig") {
			t.Errorf("%s admitted on flavors %v, want h100-sxm-mig", id, r.Flavors)
		}
	}
	small, big := by["geo-small"], by["geo-big"]
	near("geo-big", "admitted", big.Admitted, 9010, 1)
	if small.Finished != nil {
		near("geo-big", "running", big.FirstPodRunning, *small.Finished, 2)
		near("geo-big", "finished", big.Finished, *small.Finished+600, 3)
	}
	first, second := by["quota-first"], by["quota-second"]
	if first.Finished != nil {
		near("quota-first", "finished", first.Finished, 13000, 1)
		near("quota-second", "admitted", second.Admitted, *first.Finished+1, 1)
		near("quota-second", "finished", second.Finished, *first.Finished+1+300, 2)
	}
}
