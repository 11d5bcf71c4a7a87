package e2e

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// TestTimeSlicedGPU replays the time-slicing case (testutil.TimeSliceCase, the sim's too) on the
// real stack: the KWOK node advertises its one GPU as 4 nvidia.com/gpu replicas with GPU Feature
// Discovery's labels, Kueue admits on the time-sliced flavor, kube-scheduler binds the pods, and
// the agent runs the three co-tenants at the GPU's shared pace. Every JCT, GPU-seconds held and
// compute used within 1 % (or 1 s) of the hand-derived values.
func TestTimeSlicedGPU(t *testing.T) {
	lines, want := testutil.TimeSliceCase()
	path, tr := testutil.WriteTrace(t, lines...)
	specText, err := os.ReadFile(testutil.TimeSliceSpec)
	if err != nil {
		t.Fatal(err)
	}
	_, dir := replaySpec(t, tr, path, string(specText))
	if len(dir.Workloads) != len(want) {
		t.Fatalf("%d workloads, want %d", len(dir.Workloads), len(want))
	}
	near := func(id, what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > math.Max(0.01*want, 1) {
			t.Errorf("%s: %s %.3f, want %.3f", id, what, got, want)
		}
	}
	for _, r := range dir.Workloads {
		w := want[r.ID]
		if r.State != results.StateSucceeded {
			t.Errorf("%s: state %s (%s)", r.ID, r.State, r.Error)
		}
		if r.Admitted == nil || math.Abs(*r.Admitted-r.SubmitOffsetSec) > 1 {
			t.Errorf("%s: admitted at %v, want at its submission %.0f", r.ID, r.Admitted, r.SubmitOffsetSec)
		}
		jct, _ := r.JCT()
		t.Logf("%s: JCT %.3f trace s (model %.3f), %.1f GPU-s held, %.1f used", r.ID, jct, w.JCT, r.GPUSeconds, r.BusyGPUSeconds)
		near(r.ID, "JCT", jct, w.JCT)
		near(r.ID, "GPU-seconds held", r.GPUSeconds, w.Held)
		near(r.ID, "GPU-seconds held on time-sliced GPUs", r.TimeSlicedGPUSeconds, w.Held)
		near(r.ID, "GPU-seconds used", r.BusyGPUSeconds, w.Busy)
		if !strings.Contains(fmt.Sprint(r.Flavors), "h100-sxm-shared") {
			t.Errorf("%s: admitted on flavors %v, want h100-sxm-shared", r.ID, r.Flavors)
		}
	}
	if ts := dir.Summary.TimeSliced; ts == nil || ts.GPUs != 1 || ts.Workloads != len(want) {
		t.Errorf("summary's time-sliced GPUs: %+v", ts)
	}
}
