package trace

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/work"
)

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRebuildFromJobsOnly(t *testing.T) {
	ws, jobs := genTrace(200, 3)
	// Jobs in reverse order of workloads: the rebuilt list must still come out sorted.
	slices.Reverse(jobs)
	path := writeFile(t, encodeTrace(t, make([]*Workload, len(jobs)), jobs, false))
	slices.Reverse(jobs)
	tr, err := LoadWorkloads(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Rebuilt || len(tr.Workloads) != len(ws) {
		t.Fatalf("rebuilt %v, %d workloads", tr.Rebuilt, len(tr.Workloads))
	}
	for i, got := range tr.Workloads {
		want := ws[i]
		if got.DurationSec != want.DurationSec {
			t.Errorf("%s: durationSec %v, want %v", want.WorkloadID, got.DurationSec, want.DurationSec)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rebuilt\n%+v\nwant\n%+v", got, want)
		}
		if !reflect.DeepEqual(tr.Jobs[want.WorkloadID], jobs[i]) {
			t.Fatalf("jobs of %s differ", want.WorkloadID)
		}
	}
}

func TestRebuildRules(t *testing.T) {
	ws, jobs := genTrace(40, 4)
	i := slices.IndexFunc(ws, func(w *Workload) bool { return w.WorkloadType == DistributedTraining })
	w, js := ws[i], slices.Clone(jobs[i])
	// Later submit and no gang on one job: min submit, gang if any job is.
	late, loose := *js[1], *js[0]
	late.SubmitTimeOffsetSec += 100
	loose.Gang = false
	js[1], js[0] = &late, &loose
	got, err := Rebuild(js, work.Rates{})
	if err != nil {
		t.Fatal(err)
	}
	if got.SubmitTimeOffsetSec != w.SubmitTimeOffsetSec || !got.Gang || got.DurationSec != w.DurationSec || got.PodCount() != w.PodCount() {
		t.Fatalf("rebuilt %+v from %+v", got, w)
	}
	// Doubling the rates halves the rebuilt duration.
	half, err := Rebuild(js, work.Rates{CPUPerCore: 2, GPUPerGPU: 2})
	if err != nil || half.DurationSec != w.DurationSec/2 {
		t.Fatalf("rates x2: %v, %v", half.DurationSec, err)
	}
	if _, err := Rebuild(js, work.Rates{CPUPerCore: -1, GPUPerGPU: 1}); err == nil {
		t.Fatal("negative rate accepted")
	}
	// Jobs with no work give no duration: an error naming the first job's line.
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(encodeTrace(t, ws[:1], jobs[:1], false))), "\n") {
		for _, f := range []string{`"cpuUnits":`, `"gpuUnits":`} {
			k := strings.Index(l, f) + len(f)
			end := k + strings.IndexAny(l[k:], ",}")
			l = l[:k] + "0" + l[end:]
		}
		lines = append(lines, l)
	}
	path := writeFile(t, []byte(strings.Join(lines, "\n")))
	_, err = LoadWorkloads(t.Context(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "t.jsonl:1: durationSec: workload rebuilt from its job records: must be > 0") {
		t.Fatalf("err %v", err)
	}
	tr, err := LoadWorkloads(t.Context(), path, Options{Lenient: true})
	if err != nil || len(tr.Workloads) != 0 || tr.SkippedCount != 1 || tr.Dropped != 1 {
		t.Fatalf("lenient: %v, %+v", err, tr)
	}
}

func TestWorkloadOnlyTrace(t *testing.T) {
	ws, _ := genTrace(10, 5)
	tr, err := LoadWorkloads(t.Context(), writeFile(t, encodeTrace(t, ws, make([][]*Job, len(ws)), true)), Options{})
	if err != nil || tr.Rebuilt || !reflect.DeepEqual(tr.Workloads, ws) || len(tr.Jobs) != 0 {
		t.Fatalf("err %v, %+v", err, tr)
	}
}
