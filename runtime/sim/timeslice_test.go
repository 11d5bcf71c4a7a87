package sim

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// TestTimeSlicedGPU replays the time-slicing case (testutil.TimeSliceCase) on the sim engine.
func TestTimeSlicedGPU(t *testing.T) {
	b, err := os.ReadFile(testutil.TimeSliceSpec)
	if err != nil {
		t.Fatal(err)
	}
	lines, want := testutil.TimeSliceCase()
	_, tr := testutil.WriteTrace(t, lines...)
	out := t.TempDir()
	if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "ts.jsonl", Spec: spec(t, string(b)), Seed: 1, OutDir: out, WallClock: fixedWall()}); err != nil {
		t.Fatal(err)
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Workloads) != len(want) {
		t.Fatalf("%d workloads, want %d", len(d.Workloads), len(want))
	}
	for _, r := range d.Workloads {
		w := want[r.ID]
		if r.State != results.StateSucceeded {
			t.Errorf("%s: state %s (%s)", r.ID, r.State, r.Error)
		}
		at(t, r.ID, "admitted", r.Admitted, r.SubmitOffsetSec)
		if got, ok := r.JCT(); !ok || math.Abs(got-w.JCT) > 1e-3 {
			t.Errorf("%s: JCT %.3f, want %.3f", r.ID, got, w.JCT)
		}
		if !strings.Contains(fmt.Sprint(r.Flavors), "h100-sxm-shared") {
			t.Errorf("%s: admitted on flavors %v, want h100-sxm-shared", r.ID, r.Flavors)
		}
		if math.Abs(r.GPUSeconds-w.Held) > 1e-3 || math.Abs(r.TimeSlicedGPUSeconds-w.Held) > 1e-3 {
			t.Errorf("%s: %.3f GPU-seconds (%.3f time-sliced), want %.3f", r.ID, r.GPUSeconds, r.TimeSlicedGPUSeconds, w.Held)
		}
		if math.Abs(r.BusyGPUSeconds-w.Busy) > 1e-3 {
			t.Errorf("%s: used %.3f GPU-seconds, want %.3f", r.ID, r.BusyGPUSeconds, w.Busy)
		}
	}
	if ts := d.Summary.TimeSliced; ts == nil || ts.GPUs != 1 || ts.Workloads != len(want) {
		t.Errorf("summary's time-sliced GPUs: %+v", ts)
	}
}
