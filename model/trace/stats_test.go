package trace

import (
	"bytes"
	"flag"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// smallTrace: three workloads whose statistics are worked out by hand in TestInspect.
func smallTrace() ([]*Workload, [][]*Job) {
	prof := Profile{CPUUtilization: 0.5, GPUUtilization: 0.5, MemoryIntensity: 0.5, IOIntensity: 0.1, CPUFeedIntensityGPU: 0.3}
	class := Class{CPU: "cpu.mixed", GPU: "gpu.compute_bound"}
	gpu := Requests{ResourceCPU: "4", ResourceMemory: "12Gi", ResourceGPU: "1"}
	ws := []*Workload{
		{SchemaVersion: "v2", WorkloadID: "a", SubmitTimeOffsetSec: 100, Namespace: "default", WorkloadType: SingleGPUTraining,
			DurationSec: 3600, WorkloadClass: class, SharedIntensityProfile: prof, IntentClass: IntentPerformance,
			Pods: []PodGroup{{Role: RoleMain, Replicas: 1, Requests: Requests{ResourceCPU: "8", ResourceGPU: "2"}}}},
		{SchemaVersion: "v2", WorkloadID: "b", SubmitTimeOffsetSec: 86400 + 3700, Namespace: "team-a", WorkloadType: DistributedTraining,
			Gang: true, DurationSec: 7200, WorkloadClass: class, SharedIntensityProfile: prof, IntentClass: IntentEco,
			Pods: []PodGroup{{Role: RoleLauncher, Replicas: 1, Requests: Requests{ResourceCPU: "2"}, Gang: true}, {Role: RoleWorker, Replicas: 4, Requests: gpu, Gang: true}}},
		{SchemaVersion: "v2", WorkloadID: "c", SubmitTimeOffsetSec: 23*3600 + 5, Namespace: "default", WorkloadType: CPUPreprocess,
			DurationSec: 900, WorkloadClass: class, SharedIntensityProfile: prof,
			Pods: []PodGroup{{Role: RoleMain, Replicas: 1, Requests: Requests{ResourceCPU: "16"}}}},
	}
	var jobs [][]*Job
	for _, w := range ws {
		jobs = append(jobs, jobsFor(w))
	}
	return ws, jobs
}

func TestInspect(t *testing.T) {
	ws, jobs := smallTrace()
	want := &Stats{
		WorkloadRecords: 3, JobRecords: 7, Workloads: 3, Pods: 7, GPUHours: 2*1 + 4*2, GPUHoursRounded: 2*1 + 4*2,
		Families: []FamilyStats{
			{Family: SingleGPUTraining, Workloads: 1, Pods: 1, GPUHours: 2, DurationSec: Quantiles{3600, 3600, 3600, 3600}},
			{Family: DistributedTraining, Workloads: 1, Pods: 5, GPUHours: 8, DurationSec: Quantiles{7200, 7200, 7200, 7200}},
			{Family: CPUPreprocess, Workloads: 1, Pods: 1, GPUHours: 0, DurationSec: Quantiles{900, 900, 900, 900}},
		},
		GPUCounts:     []GPUCount{{0, 1}, {2, 1}, {4, 1}},
		Skipped:       []string{},
		IntentClasses: []IntentCount{{IntentPerformance, 1}, {IntentStandard, 1}, {IntentEco, 1}},
	}
	want.ArrivalsByHour[0], want.ArrivalsByHour[1], want.ArrivalsByHour[23] = 1, 1, 1
	for _, withWorkloads := range []bool{true, false} {
		path := writeFile(t, encodeTrace(t, ws, jobs, withWorkloads))
		got, err := Inspect(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want.File, want.WorkloadRecords, want.RebuiltFromJobs = path, 3, false
		if !withWorkloads {
			want.WorkloadRecords, want.RebuiltFromJobs = 0, true
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("with workload records %v:\n%+v\nwant\n%+v", withWorkloads, got, want)
		}
	}
}

func TestInspectAgreesWithLoadWorkloads(t *testing.T) {
	ws, jobs := genTrace(300, 9)
	for _, withWorkloads := range []bool{true, false} {
		path := writeFile(t, encodeTrace(t, ws, jobs, withWorkloads))
		st, err := Inspect(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := LoadWorkloads(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var gh float64
		pods := 0
		for _, w := range tr.Workloads {
			gh += float64(w.TotalGPUs()) * w.DurationSec / 3600
			pods += w.PodCount()
		}
		if st.Workloads != len(tr.Workloads) || st.Pods != pods || abs(st.GPUHours-gh) > 1e-6*gh {
			t.Fatalf("inspect %d workloads %d pods %.3f GPU-h; load %d, %d, %.3f", st.Workloads, st.Pods, st.GPUHours, len(tr.Workloads), pods, gh)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestQuantilesNearestRank(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[99-i] = float64(i + 1)
	}
	if q := quantiles(v); q != (Quantiles{P50: 50, P90: 90, P99: 99, Max: 100}) {
		t.Fatalf("%+v", q)
	}
	if q := quantiles([]float64{7}); q != (Quantiles{7, 7, 7, 7}) {
		t.Fatalf("%+v", q)
	}
}

func TestWriteTable(t *testing.T) {
	ws, jobs := smallTrace()
	st, err := Inspect(t.Context(), writeFile(t, encodeTrace(t, ws, jobs, true)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := st.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"GPU-hours          10.0", "distributed_training  1          5     8.0        7200", "23:00        1"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

var update = flag.Bool("update", false, "rewrite golden files")

// TestSmallTraceFile keeps testdata/small.jsonl (used by the CLI's tests) equal to smallTrace as
// the Writer writes it.
func TestSmallTraceFile(t *testing.T) {
	ws, jobs := smallTrace()
	got := encodeTrace(t, ws, jobs, true)
	if *update {
		if err := os.WriteFile("testdata/small.jsonl", got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/small.jsonl")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("testdata/small.jsonl is stale (go test -run TestSmallTraceFile -update): %v", err)
	}
}

// A share of a GPU counts as that share of GPU-hours, and as a whole GPU in the rounded figure;
// the expectation is worked out by hand from the records below.
func TestInspectGPUFractions(t *testing.T) {
	prof := Profile{CPUUtilization: 0.5, GPUUtilization: 0.6, MemoryIntensity: 0.3, IOIntensity: 0.1, CPUFeedIntensityGPU: 0.2}
	class := Class{CPU: "cpu.mixed", GPU: "gpu.compute_bound"}
	ws := []*Workload{
		{SchemaVersion: "v2", WorkloadID: "half", Namespace: "team-a", WorkloadType: DebugEval, DurationSec: 3600,
			WorkloadClass: class, SharedIntensityProfile: prof,
			Pods: []PodGroup{{Role: RoleMain, Replicas: 2, Requests: Requests{ResourceCPU: "2", ResourceGPUFraction: "0.5"}}}},
		{SchemaVersion: "v2", WorkloadID: "whole", Namespace: "team-a", WorkloadType: SingleGPUTraining, DurationSec: 1800,
			WorkloadClass: class, SharedIntensityProfile: prof,
			Pods: []PodGroup{{Role: RoleMain, Replicas: 1, Requests: Requests{ResourceCPU: "2", ResourceGPU: "1"}}}},
	}
	var jobs [][]*Job
	for _, w := range ws {
		if err := w.Validate(); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, jobsFor(w))
	}
	for _, withWorkloads := range []bool{true, false} {
		st, err := Inspect(t.Context(), writeFile(t, encodeTrace(t, ws, jobs, withWorkloads)), Options{})
		if err != nil {
			t.Fatal(err)
		}
		// half: 2 pods × 0.5 GPU × 1 h = 1.0 (rounded: 2 × 1 × 1 h = 2.0); whole: 1 × 0.5 h = 0.5.
		if math.Abs(st.GPUHours-1.5) > 1e-9 || math.Abs(st.GPUHoursRounded-2.5) > 1e-9 || st.FractionalGPUPods != 2 {
			t.Errorf("with workload records %v: GPU-hours %v, rounded %v, fractional pods %d; want 1.5, 2.5, 2",
				withWorkloads, st.GPUHours, st.GPUHoursRounded, st.FractionalGPUPods)
		}
	}
}

// The utilisation of the devices a workload holds: a share uses its share of its device.
func TestDeviceGPUUtilization(t *testing.T) {
	prof := Profile{GPUUtilization: 0.8}
	for _, tc := range []struct {
		name string
		pods []PodGroup
		want float64
	}{
		{"whole GPUs", []PodGroup{{Replicas: 2, Requests: Requests{ResourceGPU: "4"}}}, 0.8},
		{"a quarter of a GPU", []PodGroup{{Replicas: 1, Requests: Requests{ResourceGPUFraction: "0.25"}}}, 0.2},
		// 4 whole GPUs at 0.8 and one device at 0.5 × 0.8: (3.2 + 0.4) / 5.
		{"mixed", []PodGroup{{Replicas: 4, Requests: Requests{ResourceGPU: "1"}}, {Replicas: 1, Requests: Requests{ResourceGPUFraction: "0.5"}}}, 0.72},
		{"slices", []PodGroup{{Replicas: 1, Requests: Requests{MIGResource("1g.10gb"): "2"}}}, 0.8},
		{"no GPU", []PodGroup{{Replicas: 1, Requests: Requests{ResourceCPU: "2"}}}, 0.8},
	} {
		w := &Workload{SharedIntensityProfile: prof, Pods: tc.pods}
		if got := w.DeviceGPUUtilization(); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The utilisation of the devices a workload holds with a MIG slice counted as a device: busy
// min(1, use/c) while held, averaged over the GPUs each device holds.
func TestSliceUtilization(t *testing.T) {
	share := func(profile string) float64 {
		return map[string]float64{"1g.10gb": 1.0 / 7, "3g.40gb": 3.0 / 7, "4g.40gb": 4.0 / 7}[profile]
	}
	for _, tc := range []struct {
		name string
		u    float64
		pods []PodGroup
		want float64
	}{
		{"whole GPUs", 0.6, []PodGroup{{Replicas: 2, Requests: Requests{ResourceGPU: "4"}}}, 0.6},
		// 0.6 of a GPU's compute does not fit in 1/7 of it: the slice is saturated.
		{"a saturated slice", 0.6, []PodGroup{{Replicas: 1, Requests: Requests{MIGResource("1g.10gb"): "1"}}}, 1},
		// 0.3 of a GPU on 3/7 of one: 0.3 × 7/3.
		{"a slice partly used", 0.3, []PodGroup{{Replicas: 1, Requests: Requests{MIGResource("3g.40gb"): "1"}}}, 0.7},
		// A half share uses 0.5 × 0.6 = 0.3 of a GPU, on 4/7 of one: 0.3 × 7/4.
		{"a share on a slice", 0.6, []PodGroup{{Replicas: 1, Requests: Requests{MIGResource("4g.40gb"): "1", ResourceGPUFraction: "0.5"}}}, 0.525},
		{"a share on a whole GPU", 0.6, []PodGroup{{Replicas: 1, Requests: Requests{ResourceGPU: "1", ResourceGPUFraction: "0.5"}}}, 0.3},
		// Two 1g slices saturated (2/7 held, all used) and a 3g at 0.7 (3/7 held, 0.3 used):
		// (2/7 + 0.3) / (5/7).
		{"two profiles", 0.3, []PodGroup{
			{Replicas: 2, Requests: Requests{MIGResource("1g.10gb"): "1"}},
			{Replicas: 1, Requests: Requests{MIGResource("3g.40gb"): "1"}},
		}, (2.0/7 + 0.3) / (5.0 / 7)},
		{"a profile the cluster does not have counts as a GPU", 0.6, []PodGroup{{Replicas: 1, Requests: Requests{MIGResource("2g.20gb"): "1"}}}, 0.6},
		{"no GPU", 0.6, []PodGroup{{Replicas: 1, Requests: Requests{ResourceCPU: "2"}}}, 0.6},
	} {
		w := &Workload{SharedIntensityProfile: Profile{GPUUtilization: tc.u}, Pods: tc.pods}
		if got := w.SliceUtilization(share); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	w := &Workload{Pods: []PodGroup{
		{Replicas: 1, Requests: Requests{MIGResource("3g.40gb"): "1"}},
		{Replicas: 2, Requests: Requests{ResourceCPU: "1"}},
		{Replicas: 1, Requests: Requests{MIGResource("1g.10gb"): "2"}},
		{Replicas: 3, Requests: Requests{MIGResource("3g.40gb"): "1"}},
	}}
	if got := w.MIGProfiles(); !slices.Equal(got, []string{"3g.40gb", "1g.10gb"}) {
		t.Errorf("MIGProfiles = %v", got)
	}
}
