package trace

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSpecLinesRoundTrip(t *testing.T) {
	wl, job := specLines(t)
	for _, line := range []string{wl, job} {
		recs, warnings, _, err := readAll(t, line+"\n", Options{})
		if err != nil || len(recs) != 1 || len(warnings) != 0 {
			t.Fatalf("read %q: %v, %d records, warnings %v", line, err, len(recs), warnings)
		}
		// Field for field: the same struct encoding/json decodes.
		var got, want any
		if recs[0].Workload != nil {
			got, want = recs[0].Workload, &Workload{}
		} else {
			got, want = recs[0].Job, &Job{}
		}
		if err := json.Unmarshal([]byte(line), want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("reader decoded\n%+v\nencoding/json decoded\n%+v", got, want)
		}
		// Write and read back.
		var buf bytes.Buffer
		w := NewWriter(&buf)
		if r := recs[0]; r.Workload != nil {
			err = w.WriteWorkload(r.Workload)
		} else {
			err = w.WriteJob(r.Job)
		}
		if err != nil || w.Flush() != nil {
			t.Fatal(err)
		}
		again, _, _, err := readAll(t, buf.String(), Options{})
		if err != nil || len(again) != 1 {
			t.Fatalf("read back %q: %v", buf.String(), err)
		}
		again[0].Line = recs[0].Line
		if !reflect.DeepEqual(again[0], recs[0]) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", again[0], recs[0])
		}
	}
	// A few values, so that a decoder dropping fields cannot pass by symmetry.
	recs, _, _, err := readAll(t, job, Options{})
	if err != nil {
		t.Fatal(err)
	}
	j := recs[0].Job
	if j.Sensitivity.GPU != 0.9 || j.Work.GPUUnits != 6800 || j.PodTemplate.Requests[ResourceGPU] != "1" || !j.Gang || j.WorkloadProfile.CPUFeedIntensityGPU != 0.56 {
		t.Fatalf("job decoded wrong: %+v", j)
	}
}

func TestSpecTraceIsValid(t *testing.T) {
	recs, _, r, err := readAll(t, strings.Join(specTrace(t), "\n"), Options{})
	if err != nil || len(recs) != 6 {
		t.Fatalf("%d records, err %v", len(recs), err)
	}
	if w, j := r.Counts(); w != 1 || j != 5 {
		t.Fatalf("counts %d %d", w, j)
	}
}

// plus returns a new slice: lines followed by more.
func plus(lines []string, more ...string) []string {
	return append(append([]string(nil), lines...), more...)
}

// replace returns lines with line i (0-based) edited.
func replace(lines []string, i int, old, new string) []string {
	out := append([]string(nil), lines...)
	if !strings.Contains(out[i], old) {
		panic("test case: " + old + " not in line")
	}
	out[i] = strings.Replace(out[i], old, new, 1)
	return out
}

func TestStrictErrors(t *testing.T) {
	full := specTrace(t) // line 1 workload, 2 launcher, 3-6 workers
	wl, job := full[0], full[2]
	tests := []struct {
		name  string
		lines []string
		want  string // the whole message, or a prefix ending in the field
	}{
		{"unknown record type", []string{`{"type":"pod","x":1}`}, `t.jsonl:1: type: unknown record type "pod"`},
		{"type missing", []string{`{"schemaVersion":"v2"}`}, `t.jsonl:1: type: missing required field`},
		{"type not a string", []string{`{"type":1}`}, `t.jsonl:1: type: want a string, got a number`},
		{"missing field", replace([]string{wl}, 0, `"durationSec":14400,`, ``), `t.jsonl:1: durationSec: missing required field`},
		{"missing nested field", replace([]string{job}, 0, `,"gpuUnits":6800`, ``), `t.jsonl:1: work.gpuUnits: missing required field`},
		{"missing pod field", replace([]string{wl}, 0, `"replicas":4,`, ``), `t.jsonl:1: pods[1].replicas: missing required field`},
		{"wrong type", replace([]string{wl}, 0, `"durationSec":14400`, `"durationSec":"14400"`), `t.jsonl:1: durationSec: want a number, got a string`},
		{"wrong type bool", replace([]string{job}, 0, `"gang":true`, `"gang":"yes"`), `t.jsonl:1: gang: want a boolean, got a string`},
		{"requests not strings", replace([]string{job}, 0, `"cpu":"4"`, `"cpu":4`), `t.jsonl:1: podTemplate.requests.cpu: want a string, got a number`},
		{"bad quantity", replace([]string{job}, 0, `"12Gi"`, `"4Gii"`), `t.jsonl:1: podTemplate.requests.memory: bad quantity "4Gii": unknown suffix "Gii"`},
		{"bad pod quantity", replace([]string{wl}, 0, `"cpu":"4"`, `"cpu":"four"`), `t.jsonl:1: pods[1].requests.cpu: bad quantity "four": no digits`},
		{"negative quantity", replace([]string{wl}, 0, `"cpu":"2"`, `"cpu":"-2"`), `t.jsonl:1: pods[0].requests.cpu: must be >= 0`},
		{"fractional GPU", replace([]string{job}, 0, `"nvidia.com/gpu":"1"`, `"nvidia.com/gpu":"500m"`), `t.jsonl:1: podTemplate.requests.nvidia.com/gpu: must be a whole number of GPUs`},
		{"negative duration", replace([]string{wl}, 0, `14400`, `-14400`), `t.jsonl:1: durationSec: must be >= 0, got -14400`},
		{"zero duration", replace([]string{wl}, 0, `14400`, `0`), `t.jsonl:1: durationSec: must be > 0`},
		{"negative work", replace([]string{job}, 0, `"cpuUnits":1024`, `"cpuUnits":-1`), `t.jsonl:1: work.cpuUnits: must be >= 0`},
		{"NaN", replace([]string{wl}, 0, `14400`, `NaN`), `t.jsonl:1: durationSec: want a number, got NaN (NaN and Infinity are not JSON`},
		{"Infinity", replace([]string{job}, 0, `1024`, `Infinity`), `t.jsonl:1: work.cpuUnits: want a number, got Infinity`},
		{"-Infinity", replace([]string{job}, 0, `12.4`, `-Infinity`), `t.jsonl:1: submitTimeOffsetSec: want a number, got -Infinity`},
		{"huge exponent", replace([]string{wl}, 0, `14400`, `1e999`), `t.jsonl:1: durationSec: number "1e999" is out of range`},
		{"intensity above 1", replace([]string{wl}, 0, `"gpuUtilization":0.47`, `"gpuUtilization":1.5`), `t.jsonl:1: sharedIntensityProfile.gpuUtilization: must be in [0, 1], got 1.5`},
		{"sensitivity below 0", replace([]string{job}, 0, `"cpu":0.65`, `"cpu":-0.1`), `t.jsonl:1: sensitivity.cpu: must be in [0, 1]`},
		{"replicas 0", replace([]string{wl}, 0, `"replicas":4`, `"replicas":0`), `t.jsonl:1: pods[1].replicas: must be >= 1, got 0`},
		{"replicas fraction", replace([]string{wl}, 0, `"replicas":4`, `"replicas":2.5`), `t.jsonl:1: pods[1].replicas: want an integer, got "2.5"`},
		{"no pods", replace([]string{wl}, 0, wl[strings.Index(wl, `"pods":`):len(wl)-1], `"pods":[]`), `t.jsonl:1: pods: must list at least one pod group`},
		{"unknown schema", replace([]string{wl}, 0, `"v2"`, `"v3"`), `t.jsonl:1: schemaVersion: unknown schema version "v3"`},
		{"unknown family", replace([]string{job}, 0, `"workloadType":"distributed_training"`, `"workloadType":"llm_serving"`), `t.jsonl:1: workloadType: unknown workload type "llm_serving"`},
		{"bad namespace", replace([]string{job}, 0, `"default"`, `"Team A"`), `t.jsonl:1: namespace: "Team A" is not a valid namespace name`},
		{"bad intent", replace([]string{job}, 0, `"namespace"`, `"intentClass":"gold","namespace"`), `t.jsonl:1: intentClass: unknown intent class "gold"`},
		{"affinity not an object", replace([]string{job}, 0, `"nvidia.com/gpu":"1"}}`, `"nvidia.com/gpu":"1"},"affinity":[1]}`), `t.jsonl:1: podTemplate.affinity: want an object, got an array`},
		{"key twice", replace([]string{wl}, 0, `"durationSec":14400`, `"durationSec":14400,"durationSec":1`), `t.jsonl:1: durationSec: appears twice`},
		{"request twice", replace([]string{job}, 0, `"cpu":"4"`, `"cpu":"4","cpu":"5"`), `t.jsonl:1: podTemplate.requests.cpu: appears twice`},
		{"nested key twice", replace([]string{job}, 0, `"cpuUnits":1024`, `"cpuUnits":1024,"cpuUnits":1`), `t.jsonl:1: work.cpuUnits: appears twice`},
		{"unknown key twice", replace([]string{wl}, 0, `"durationSec"`, `"x":1,"x":2,"durationSec"`), `t.jsonl:1: x: appears twice`},
		{"key twice in tags", replace([]string{wl}, 0, `"durationSec"`, `"tags":{"a":{"b":1,"b":2}},"durationSec"`), `t.jsonl:1: tags.a.b: appears twice`},
		{"negative restarts", replace([]string{wl}, 0, `"durationSec":14400,`, `"durationSec":14400,"maxRestarts":-1,`), `t.jsonl:1: maxRestarts: must be >= 0, got -1`},
		{"fractional restarts", replace([]string{wl}, 0, `"durationSec":14400,`, `"durationSec":14400,"maxRestarts":1.5,`), `t.jsonl:1: maxRestarts: want an integer`},
		{"negative checkpoint cost", replace([]string{wl}, 0, `"durationSec":14400,`, `"durationSec":14400,"checkpointCostSec":-60,`), `t.jsonl:1: checkpointCostSec: must be >= 0, got -60`},
		{"truncated", []string{wl[:100]}, `t.jsonl:1: invalid JSON`},
		{"trailing data", []string{wl + ` {}`}, `t.jsonl:1: invalid JSON at column`},
		{"not an object", []string{`[1,2]`}, `t.jsonl:1: want an object, got an array`},
		{"bad UTF-8", replace([]string{job}, 0, `"workload-000001-worker-01"`, "\"w\xff\""), `t.jsonl:1: jobId: invalid UTF-8 in a string`},
		{"bad line later", plus(full[:2], `{"type":"job",`), `t.jsonl:3: invalid JSON`},
		{"duplicate workloadId", plus(full, wl), `t.jsonl:7: workloadId: duplicate workloadId "workload-000001" (first workload record at line 1)`},
		{"duplicate jobId", replace(full, 3, `worker-02`, `worker-01`), `t.jsonl:4: jobId: duplicate jobId "workload-000001-worker-01" (first at line 3)`},
		{"job without workload record", plus(full, strings.ReplaceAll(job, `workload-000001`, `workload-000009`)), `t.jsonl:7: workloadId: no workload record for workload "workload-000009"`},
		{"type contradiction", replace(full, 2, `"workloadType":"distributed_training"`, `"workloadType":"single_gpu_training"`), `t.jsonl:3: workloadType: "single_gpu_training" contradicts the workload record at line 1`},
		{"namespace contradiction", replace(full, 4, `"default"`, `"team-a"`), `t.jsonl:5: namespace: "team-a" contradicts the workload record at line 1`},
		{"gang contradiction", replace(full, 1, `"gang":true,`, ``), `t.jsonl:2: gang: false contradicts the workload record at line 1 (true)`},
		{"intent contradiction", replace(full, 1, `"namespace"`, `"intentClass":"eco","namespace"`), `t.jsonl:2: intentClass: "eco" contradicts the workload record at line 1`},
		{"role not in pods", replace(full, 2, `"podRole":"worker"`, `"podRole":"trial"`), `t.jsonl:3: podRole: "trial" is not a role of workload "workload-000001"`},
		{"requests contradiction", replace(full, 2, `"memory":"12Gi"`, `"memory":"16Gi"`), `t.jsonl:3: podTemplate.requests: {cpu=4,memory=16Gi,nvidia.com/gpu=1} differs from the "worker" requests at line 1`},
		{"too few jobs", full[:5], `t.jsonl:1: pods[1].replicas: 4 "worker" pods, but 3 job records`},
		{"too many jobs", plus(full, strings.Replace(job, "worker-01", "worker-05", 1)), `t.jsonl:7: workloadId: workload "workload-000001" already has the job records its pods ask for`},
		{"jobs before a contradicting workload", plus(full[1:], replace([]string{wl}, 0, `"distributed_training"`, `"hpo_experiment"`)...), `t.jsonl:6: workloadType: "hpo_experiment" contradicts the job records of this workload (first at line 1)`},
		{"jobs before a workload with fewer replicas", plus(full[1:], replace([]string{wl}, 0, `"replicas":4`, `"replicas":3`)...), `t.jsonl:6: pods[1].replicas: 3, but there are already 4 "worker" job records`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := readAll(t, strings.Join(tc.lines, "\n")+"\n", Options{})
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error\n  %v\nwant it to start with\n  %s", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "t.jsonl" || e.Line < 1 {
				t.Fatalf("error %v is not an *Error with file and line", err)
			}
			// Lenient mode never fails on the same input, and lists the problem.
			_, _, r, err := readAll(t, strings.Join(tc.lines, "\n")+"\n", Options{Lenient: true})
			if err != nil || r.SkippedCount() == 0 {
				t.Fatalf("lenient: err %v, %d skipped", err, r.SkippedCount())
			}
		})
	}
}

// TestRereadSkipsCrossRecordChecks: a second pass (Options.Reread) does not repeat the checks
// across records, which a first pass made, but still refuses a bad line.
func TestRereadSkipsCrossRecordChecks(t *testing.T) {
	full := specTrace(t)
	wl, job := full[0], full[2]
	for name, lines := range map[string][]string{
		"duplicate workloadId": plus(full, wl),
		"too few jobs":         full[:5],
	} {
		if _, _, _, err := readAll(t, strings.Join(lines, "\n")+"\n", Options{}); err == nil {
			t.Fatalf("%s: the first pass finds no error", name)
		}
		recs, _, _, err := readAll(t, strings.Join(lines, "\n")+"\n", Options{Reread: true})
		if err != nil || len(recs) != len(lines) {
			t.Errorf("%s: reread: %d records, error %v; want %d records", name, len(recs), err, len(lines))
		}
	}
	bad := replace([]string{job}, 0, `"12Gi"`, `"4Gii"`)
	if _, _, _, err := readAll(t, strings.Join(bad, "\n")+"\n", Options{Reread: true}); err == nil {
		t.Error("reread: a bad quantity passes")
	}
}

func TestEquivalentQuantitiesAgree(t *testing.T) {
	lines := replace(specTrace(t), 2, `"cpu":"4"`, `"cpu":"4000m"`)
	if _, _, _, err := readAll(t, strings.Join(lines, "\n"), Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestSeedGeneratorCompatibility(t *testing.T) {
	lines := specTrace(t)
	// The seed generator omits gang when false, adds intentClass and tags, may carry an affinity.
	for i := range lines {
		lines[i] = strings.ReplaceAll(lines[i], `"gang":true,`, ``)
		lines[i] = strings.ReplaceAll(lines[i], `,"gang":true}`, `}`)
		lines[i] = strings.Replace(lines[i], `"namespace"`, `"intentClass":"eco","tags":{"team":"vision","cost center":[1, 2]},"namespace"`, 1)
	}
	lines[2] = strings.Replace(lines[2], `"nvidia.com/gpu":"1"}}`, `"nvidia.com/gpu":"1"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"gpu","operator":"In","values":["a100"]}]}]}}}}`, 1)
	recs, warnings, _, err := readAll(t, strings.Join(lines, "\n"), Options{})
	if err != nil || len(warnings) > 0 {
		t.Fatalf("err %v, warnings %v", err, warnings)
	}
	w := recs[0].Workload
	if w.Gang || w.Pods[1].Gang || w.Intent() != IntentEco || string(w.Tags) != `{"team":"vision","cost center":[1,2]}` {
		t.Fatalf("workload: %+v (tags %s)", w, w.Tags)
	}
	if a := recs[2].Job.PodTemplate.Affinity; !json.Valid(a) || !strings.Contains(string(a), `"a100"`) {
		t.Fatalf("affinity %s", a)
	}
}

func TestUnknownFieldsWarnOncePerField(t *testing.T) {
	lines := specTrace(t)
	for i := range lines {
		lines[i] = strings.Replace(lines[i], `"namespace"`, `"priority":{"x":[1,{"y":null}]},"namespace"`, 1)
		lines[i] = strings.Replace(lines[i], `"cpu":"cpu.mixed"`, `"cpu":"cpu.mixed","mem":"m.high"`, 1)
	}
	lines[0] = strings.Replace(lines[0], `"replicas":4`, `"replicas":4,"minAvailable":4`, 1)
	recs, warnings, _, err := readAll(t, strings.Join(lines, "\n"), Options{})
	if err != nil || len(recs) != 6 {
		t.Fatal(err)
	}
	want := []string{
		"t.jsonl:1: ignoring unknown field workload.priority (said once per field)",
		"t.jsonl:1: ignoring unknown field workload.workloadClass.mem (said once per field)",
		"t.jsonl:1: ignoring unknown field workload.pods[].minAvailable (said once per field)",
		"t.jsonl:2: ignoring unknown field job.priority (said once per field)",
		"t.jsonl:2: ignoring unknown field job.workloadClass.mem (said once per field)",
	}
	if !reflect.DeepEqual(warnings, want) {
		t.Fatalf("warnings\n%q\nwant\n%q", warnings, want)
	}
}

func TestLenientSkipsAndDrops(t *testing.T) {
	ws, jobs := genTrace(20, 1)
	text := strings.Split(strings.TrimSpace(string(encodeTrace(t, ws, jobs, true))), "\n")
	// Break a job of workload 3 (its workload must be dropped), a workload line (its jobs then
	// have no workload record), and add a line that is not JSON (no workload known).
	badJob, badWorkload := -1, -1
	for i, l := range text {
		if badJob < 0 && strings.Contains(l, `"type":"job"`) && strings.Contains(l, `"workloadId":"workload-000003"`) {
			badJob = i
		}
		if badWorkload < 0 && strings.HasPrefix(l, `{"type":"workload","schemaVersion":"v2","workloadId":"workload-000007"`) {
			badWorkload = i
		}
	}
	text[badJob] = strings.Replace(text[badJob], `"cpuUnits":`, `"cpuUnits":-`, 1)
	text[badWorkload] = strings.Replace(text[badWorkload], `"durationSec":`, `"durationSec":-`, 1)
	text = append(text, "not json")
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(text, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkloads(t.Context(), path, Options{}); err == nil {
		t.Fatal("strict mode accepted a bad trace")
	}
	tr, err := LoadWorkloads(t.Context(), path, Options{Lenient: true})
	if err != nil {
		t.Fatal(err)
	}
	// Skipped: the bad job, the bad workload and "not json". The jobs of workload 7 are dropped
	// with it, not listed once more each.
	if want := 3; tr.SkippedCount != want || len(tr.Skipped) != want {
		t.Fatalf("skipped %d (%d listed), want %d: %v", tr.SkippedCount, len(tr.Skipped), want, tr.Skipped)
	}
	if tr.Dropped != 2 || len(tr.Workloads) != 18 {
		t.Fatalf("dropped %d, %d workloads", tr.Dropped, len(tr.Workloads))
	}
	for _, w := range tr.Workloads {
		if w.WorkloadID == "workload-000003" || w.WorkloadID == "workload-000007" {
			t.Fatalf("kept %s", w.WorkloadID)
		}
	}
	if _, ok := tr.Jobs["workload-000003"]; ok {
		t.Fatal("kept the jobs of a dropped workload")
	}
	for i, want := range []string{":6: work.cpuUnits: must be >= 0", ":17: durationSec: must be >= 0", ":62: invalid JSON at column 2"} {
		if got := tr.Skipped[i].Error(); !strings.Contains(got, want) {
			t.Errorf("skipped[%d] = %s, want %s", i, got, want)
		}
	}
}

func TestGzipRoundTrip(t *testing.T) {
	ws, jobs := genTrace(50, 2)
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl.gz")
	fw, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		if err := fw.WriteWorkload(ws[i]); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs[i] {
			if err := fw.WriteJob(j); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		t.Fatal("not gzip")
	}
	// Detected by magic bytes, not by name.
	renamed := filepath.Join(dir, "trace.data")
	if err := os.WriteFile(renamed, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, renamed} {
		tr, err := LoadWorkloads(t.Context(), p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tr.Rebuilt || !reflect.DeepEqual(tr.Workloads, ws) {
			t.Fatalf("%s: workloads differ after the round trip", p)
		}
		for i, w := range ws {
			if !reflect.DeepEqual(tr.Jobs[w.WorkloadID], jobs[i]) {
				t.Fatalf("%s: jobs of %s differ", p, w.WorkloadID)
			}
		}
	}
	// A corrupt gzip stream is an error naming the line reached, not a short trace.
	bad := filepath.Join(dir, "bad.gz")
	if err := os.WriteFile(bad, raw[:len(raw)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWorkloads(t.Context(), bad, Options{Lenient: true}); err == nil || !strings.Contains(err.Error(), "bad.gz:") {
		t.Fatalf("truncated gzip: %v", err)
	}
}

func TestStdin(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	_, _ = gz.Write([]byte(strings.Join(specTrace(t), "\n")))
	_ = gz.Close()
	path := filepath.Join(dir, "in")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = old }()
	tr, err := LoadWorkloads(t.Context(), "-", Options{})
	if err != nil || len(tr.Workloads) != 1 || len(tr.Jobs["workload-000001"]) != 5 {
		t.Fatalf("stdin: %v", err)
	}
}

func TestLongLinesAndBlankLines(t *testing.T) {
	lines := specTrace(t)
	tags := `"tags":{"note":"` + strings.Repeat("x", 1<<20) + `"},`
	lines[0] = strings.Replace(lines[0], `"namespace"`, tags+`"namespace"`, 1)
	text := "\xef\xbb\xbf" + strings.Join(lines, "\r\n\n  \n") + "\n\n"
	recs, _, _, err := readAll(t, text, Options{})
	if err != nil || len(recs) != 6 || recs[5].Line != 16 {
		t.Fatalf("err %v, %d records", err, len(recs))
	}
	_, _, _, err = readAll(t, text, Options{MaxLineBytes: 1 << 16})
	if err == nil || !strings.HasPrefix(err.Error(), "t.jsonl:1: line longer than 65536 bytes") {
		t.Fatalf("err %v", err)
	}
}
