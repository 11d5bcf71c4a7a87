package trace

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// joulieDir holds real traces written by Joulie's workloadgen (see its README).
const joulieDir = "../../testdata/joulie"

// TestJoulieFixturesReadStrict reads every Joulie trace in strict mode: no line is skipped, no
// workload dropped, no field unknown, and what the generator writes beyond the documented examples
// (optional GPU fields, repeated role groups with their own requests, amd.com/gpu) is kept.
func TestJoulieFixturesReadStrict(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(joulieDir, "*.jsonl"))
	if err != nil || len(files) < 4 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var warnings []string
			tr, err := LoadWorkloads(t.Context(), f, Options{Warn: func(s string) { warnings = append(warnings, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 || tr.SkippedCount > 0 || tr.Dropped > 0 {
				t.Fatalf("warnings %v, %d skipped, %d dropped", warnings, tr.SkippedCount, tr.Dropped)
			}
			want := map[string]int{"default-60.jsonl": 60, "diurnal-amd.jsonl": 488, "jobs-only-40.jsonl": 40, "amd-40.jsonl": 40}[filepath.Base(f)]
			if len(tr.Workloads) != want {
				t.Fatalf("%d workloads, want %d", len(tr.Workloads), want)
			}
			pods, jobs := 0, 0
			for _, w := range tr.Workloads {
				pods += w.PodCount()
				jobs += len(tr.Jobs[w.WorkloadID])
				if !w.WorkloadType.GPU() && (w.TotalGPUs() != 0 || w.SharedIntensityProfile.GPUUtilization != 0) {
					t.Errorf("%s: CPU workload with GPUs or GPU utilisation", w.WorkloadID)
				}
			}
			if pods != jobs {
				t.Fatalf("%d pods in workloads, %d job records", pods, jobs)
			}
		})
	}
}

// TestJoulieRepeatedGroups checks the shapes the generator writes: an HPO experiment's trials as
// one group each with their own requests, a distributed run's workers as repeated groups, AMD GPUs.
func TestJoulieRepeatedGroups(t *testing.T) {
	tr, err := LoadWorkloads(t.Context(), filepath.Join(joulieDir, "default-60.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*Workload{}
	for _, w := range tr.Workloads {
		byID[w.WorkloadID] = w
	}
	hpo := byID["workload-000015"]
	if hpo == nil || len(hpo.Pods) != 4 || hpo.Pods[1].Role != RoleTrial || hpo.Pods[2].Role != RoleTrial ||
		hpo.Pods[1].Requests[ResourceCPU] != "2.32" || hpo.Pods[2].Requests[ResourceCPU] != "1.14" || hpo.TotalGPUs() != 3 {
		t.Fatalf("hpo workload: %+v", hpo)
	}
	dist := byID["workload-000006"]
	if dist == nil || dist.PodCount() != 5 || dist.TotalGPUs() != 4 || !dist.Gang {
		t.Fatalf("distributed workload: %+v", dist)
	}
	// Job records only: the trials are rebuilt as one group per set of requests.
	jo, err := LoadWorkloads(t.Context(), filepath.Join(joulieDir, "jobs-only-40.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	trialGroups := 0
	for _, w := range jo.Workloads {
		if w.WorkloadType != HPOExperiment {
			continue
		}
		for _, p := range w.Pods {
			if p.Role == RoleTrial {
				trialGroups++
			}
		}
	}
	if !jo.Rebuilt || trialGroups != 19 {
		t.Fatalf("rebuilt %v, %d trial groups (the 19 trial records ask for distinct requests)", jo.Rebuilt, trialGroups)
	}

	amd, err := LoadWorkloads(t.Context(), filepath.Join(joulieDir, "amd-40.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	vendors := map[string]int{}
	for _, w := range amd.Workloads {
		vendors[w.GPUResource()]++
	}
	if vendors[ResourceAMDGPU] == 0 || vendors[ResourceGPU] == 0 {
		t.Fatalf("vendors %v", vendors)
	}
}

func TestRepeatedGroupErrors(t *testing.T) {
	// An HPO workload with three trials of different requests and their job records.
	wl := `{"type":"workload","schemaVersion":"v2","workloadId":"w1","submitTimeOffsetSec":1,"namespace":"default","workloadType":"hpo_experiment","durationSec":100,"workloadClass":{"cpu":"cpu.mixed"},"sharedIntensityProfile":{"cpuUtilization":0.5},"pods":[` +
		`{"role":"controller","replicas":1,"requests":{"cpu":"1"}},{"role":"trial","replicas":1,"requests":{"cpu":"2","nvidia.com/gpu":"1"}},{"role":"trial","replicas":1,"requests":{"cpu":"3","nvidia.com/gpu":"1"}},{"role":"trial","replicas":1,"requests":{"cpu":"2","nvidia.com/gpu":"1"}}]}`
	job := func(id, role, cpu string) string {
		gpu := `,"nvidia.com/gpu":"1"`
		if role == RoleController {
			gpu = ""
		}
		return `{"type":"job","schemaVersion":"v2","jobId":"` + id + `","workloadId":"w1","workloadType":"hpo_experiment","podRole":"` + role + `","submitTimeOffsetSec":1,"namespace":"default","podTemplate":{"requests":{"cpu":"` + cpu + `"` + gpu + `}},"work":{"cpuUnits":1,"gpuUnits":1},"sensitivity":{"cpu":0,"gpu":0},"workloadClass":{"cpu":"cpu.mixed"},"workloadProfile":{"cpuUtilization":0.5}}`
	}
	good := []string{wl, job("c", "controller", "1"), job("t1", "trial", "2"), job("t2", "trial", "3000m"), job("t3", "trial", "2")}
	recs, _, _, err := readAll(t, strings.Join(good, "\n"), Options{})
	if err != nil || len(recs) != 5 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	// Job records first, then the workload record: counted per shape all the same.
	if _, _, _, err := readAll(t, strings.Join(append(good[1:], wl), "\n"), Options{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"requests of no trial", replace(good, 2, `"cpu":"2"`, `"cpu":"5"`), `t.jsonl:3: podTemplate.requests: {cpu=5,nvidia.com/gpu=1} matches none of the 2 "trial" pod groups of the workload record at line 1 ({cpu=2,nvidia.com/gpu=1}, {cpu=3,nvidia.com/gpu=1})`},
		{"one trial too many", plus(good, job("t4", "trial", "3")), `t.jsonl:6: workloadId: workload "w1" already has the job records its pods ask for`},
		{"a shape over-filled", plus(good[:4], job("t4", "trial", "3")), `t.jsonl:5: podRole: more "trial" job records than the 1 of pods[2].replicas`},
		{"a shape of two groups over-filled", plus(good[:3], job("t4", "trial", "2"), job("t5", "trial", "2")), `t.jsonl:5: podRole: more "trial" job records with requests {cpu=2,nvidia.com/gpu=1} than the 2 pods of its 2 pod groups (first pods[1]`},
		{"a shape of two groups short", good[:4], `t.jsonl:1: pods[1].replicas: 2 "trial" pods with requests {cpu=2,nvidia.com/gpu=1} in 2 pod groups, but 1 job records`},
		{"jobs before a workload without their requests", plus(good[1:], replace([]string{wl}, 0, `"cpu":"3"`, `"cpu":"4"`)...), `t.jsonl:5: pods[1].requests: {cpu=2,nvidia.com/gpu=1} differs from the job record at line 3 ({cpu=3000m,nvidia.com/gpu=1})`},
		{"two GPU vendors", replace([]string{wl}, 0, `"cpu":"3","nvidia.com/gpu":"1"`, `"cpu":"3","amd.com/gpu":"1"`), `t.jsonl:1: pods[2].requests: asks for amd.com/gpu but pods[1] for nvidia.com/gpu`},
		{"both vendors in a pod", replace([]string{wl}, 0, `"cpu":"3","nvidia.com/gpu":"1"`, `"cpu":"3","nvidia.com/gpu":"1","amd.com/gpu":"1"`), `t.jsonl:1: pods[2].requests.amd.com/gpu: a pod asks for both`},
		{"fractional AMD GPU", replace([]string{wl}, 0, `"cpu":"3","nvidia.com/gpu":"1"`, `"cpu":"3","amd.com/gpu":"0.5"`), `t.jsonl:1: pods[2].requests.amd.com/gpu: must be a whole number of GPUs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := readAll(t, strings.Join(tc.lines, "\n"), Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\nwant a prefix\n  %s", err, tc.want)
			}
		})
	}
}

// TestOptionalFields reads the fields Joulie's writer omits when zero or false as zero values.
func TestOptionalFields(t *testing.T) {
	wl := `{"type":"workload","schemaVersion":"v2","workloadId":"w1","submitTimeOffsetSec":0,"namespace":"default","workloadType":"cpu_analytics","durationSec":60,"workloadClass":{},"sharedIntensityProfile":{"cpuUtilization":0.7},"pods":[{"role":"worker","replicas":1,"requests":{"cpu":"4"}}]}`
	recs, warnings, _, err := readAll(t, wl, Options{})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	w := recs[0].Workload
	if w.Gang || w.WorkloadClass != (Class{}) || w.SharedIntensityProfile != (Profile{CPUUtilization: 0.7}) {
		t.Fatalf("%+v", w)
	}
	// Still required: the profile object itself, and a job's work.
	for _, tc := range []struct{ line, want string }{
		{strings.Replace(wl, `"sharedIntensityProfile":{"cpuUtilization":0.7},`, ``, 1), "1: sharedIntensityProfile: missing required field"},
		{strings.Replace(wl, `"sharedIntensityProfile":{"cpuUtilization":0.7}`, `"sharedIntensityProfile":null`, 1), "1: sharedIntensityProfile: missing required field"},
	} {
		if _, _, _, err := readAll(t, tc.line, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %s", err, tc.want)
		}
	}
	var v map[string]any
	if json.Unmarshal([]byte(wl), &v) != nil {
		t.Fatal("test line is not JSON")
	}
}

func TestJobGroups(t *testing.T) {
	tr, err := LoadWorkloads(t.Context(), filepath.Join(joulieDir, "default-60.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range tr.Workloads {
		jobs := tr.Jobs[w.WorkloadID]
		g, err := w.JobGroups(jobs)
		if err != nil {
			t.Fatal(err)
		}
		count := make([]int, len(w.Pods))
		for k, i := range g {
			count[i]++
			if jobs[k].PodTemplate.Requests[ResourceCPU] != w.Pods[i].Requests[ResourceCPU] {
				t.Fatalf("%s: job %s in group %d of other requests", w.WorkloadID, jobs[k].JobID, i)
			}
		}
		for i, p := range w.Pods {
			if count[i] != p.Replicas {
				t.Fatalf("%s: group %d has %d jobs, wants %d", w.WorkloadID, i, count[i], p.Replicas)
			}
		}
	}
	w := tr.Workloads[0]
	if _, err := w.JobGroups(append(tr.Jobs[w.WorkloadID], tr.Jobs[w.WorkloadID][0])); err == nil {
		t.Fatal("a job record too many was assigned")
	}
}
