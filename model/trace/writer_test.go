package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The two example lines of trace schema v2 (a workload record and one of its job records), as the
// writer must reproduce them: identical except that a float is written in its shortest form
// (0.90 -> 0.9).
const (
	writerExampleWorkload = `{"type":"workload","schemaVersion":"v2","workloadId":"workload-000001","submitTimeOffsetSec":12.4,"namespace":"default","workloadType":"distributed_training","gang":true,"durationSec":14400,"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"sharedIntensityProfile":{"cpuUtilization":0.28,"gpuUtilization":0.47,"memoryIntensity":0.58,"ioIntensity":0.08,"cpuFeedIntensityGpu":0.56},"pods":[{"role":"launcher","replicas":1,"requests":{"cpu":"2","memory":"4Gi"},"gang":true},{"role":"worker","replicas":4,"requests":{"cpu":"4","memory":"12Gi","nvidia.com/gpu":"1"},"gang":true}]}`
	writerExampleJob      = `{"type":"job","schemaVersion":"v2","jobId":"workload-000001-worker-01","workloadId":"workload-000001","workloadType":"distributed_training","podRole":"worker","gang":true,"submitTimeOffsetSec":12.4,"namespace":"default","podTemplate":{"requests":{"cpu":"4","memory":"12Gi","nvidia.com/gpu":"1"}},"work":{"cpuUnits":1024,"gpuUnits":6800},"sensitivity":{"cpu":0.65,"gpu":0.90},"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"workloadProfile":{"cpuUtilization":0.28,"gpuUtilization":0.47,"memoryIntensity":0.58,"ioIntensity":0.08,"cpuFeedIntensityGpu":0.56}}`
)

// writerDecodeLine decodes a line into the struct its type names, ignoring the type discriminator.
func writerDecodeLine(t *testing.T, line string) any {
	t.Helper()
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(line), &head); err != nil {
		t.Fatalf("decode %q: %v", line, err)
	}
	var v any
	switch head.Type {
	case TypeWorkload:
		v = &Workload{}
	case TypeJob:
		v = &Job{}
	default:
		t.Fatalf("unknown type %q", head.Type)
	}
	if err := json.Unmarshal([]byte(line), v); err != nil {
		t.Fatalf("decode %q: %v", line, err)
	}
	return v
}

func writerWriteRecord(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	var err error
	switch r := v.(type) {
	case *Workload:
		err = w.WriteWorkload(r)
	case *Job:
		err = w.WriteJob(r)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestWriterExampleLines(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"workload", writerExampleWorkload, writerExampleWorkload},
		{"job", writerExampleJob, strings.Replace(writerExampleJob, `"gpu":0.90`, `"gpu":0.9`, 1)},
		{
			"seed generator extras",
			strings.Replace(writerExampleJob, `"podTemplate":{"requests":{"cpu":"4","memory":"12Gi","nvidia.com/gpu":"1"}}`,
				`"podTemplate":{"requests":{"nvidia.com/gpu":"1","cpu":"4","memory":"12Gi"},"affinity":{"nodeAffinity": {"x": [1, 2]}}}`, 1) +
				"",
			strings.Replace(strings.Replace(writerExampleJob, `"gpu":0.90`, `"gpu":0.9`, 1),
				`"podTemplate":{"requests":{"cpu":"4","memory":"12Gi","nvidia.com/gpu":"1"}}`,
				`"podTemplate":{"requests":{"cpu":"4","memory":"12Gi","nvidia.com/gpu":"1"},"affinity":{"nodeAffinity":{"x":[1,2]}}}`, 1),
		},
		{
			"intent and tags, gang false",
			strings.Replace(strings.Replace(writerExampleWorkload, `"gang":true,`, ``, -1), `}]}`, `}],"intentClass":"eco","tags":{"a":"b"},"checkpointIntervalSec":600}`, 1),
			strings.Replace(strings.Replace(writerExampleWorkload, `"gang":true,`, ``, -1), `}]}`, `}],"intentClass":"eco","tags":{"a":"b"},"checkpointIntervalSec":600}`, 1),
		},
		{
			"checkpoint cost, restart overhead and budget",
			strings.Replace(writerExampleWorkload, `}]}`, `}],"maxRestarts":3,"restartOverheadSec":600.0,"checkpointIntervalSec":1800,"checkpointCostSec":60.5}`, 1),
			strings.Replace(writerExampleWorkload, `}]}`, `}],"checkpointIntervalSec":1800,"checkpointCostSec":60.5,"restartOverheadSec":600,"maxRestarts":3}`, 1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := writerDecodeLine(t, tt.in)
			got := writerWriteRecord(t, rec)
			if got != tt.want+"\n" {
				t.Fatalf("written line differs\n got: %s\nwant: %s", got, tt.want)
			}
			// The written line decodes back to the same struct.
			if back := writerDecodeLine(t, strings.TrimSuffix(got, "\n")); !reflect.DeepEqual(writerNormalizeRaw(back), writerNormalizeRaw(rec)) {
				t.Fatalf("round trip differs:\n got %+v\nwant %+v", back, rec)
			}
		})
	}
}

// writerNormalizeRaw compacts raw JSON fields so records that differ only in their whitespace compare equal.
func writerNormalizeRaw(v any) any {
	compact := func(r json.RawMessage) json.RawMessage {
		if len(r) == 0 {
			return r
		}
		var b bytes.Buffer
		if err := json.Compact(&b, r); err != nil {
			return r
		}
		return b.Bytes()
	}
	switch r := v.(type) {
	case *Workload:
		c := *r
		c.Tags = compact(c.Tags)
		return &c
	case *Job:
		c := *r
		c.Tags = compact(c.Tags)
		c.PodTemplate.Affinity = compact(c.PodTemplate.Affinity)
		return &c
	}
	return v
}

func TestWriterEmptySchemaVersionWritesV2(t *testing.T) {
	got := writerWriteRecord(t, &Job{JobID: "j", PodTemplate: PodTemplate{Requests: Requests{}}})
	if !strings.HasPrefix(got, `{"type":"job","schemaVersion":"v2","jobId":"j",`) {
		t.Fatalf("got %s", got)
	}
}

func TestWriterRejectsUnwritableValues(t *testing.T) {
	tests := []struct {
		name  string
		rec   any
		field string
	}{
		{"NaN duration", &Workload{WorkloadID: "w", DurationSec: math.NaN()}, "durationSec"},
		{"Inf submit", &Job{JobID: "j", SubmitTimeOffsetSec: math.Inf(1)}, "submitTimeOffsetSec"},
		{"NaN gpu units", &Job{JobID: "j", Work: Work{GPUUnits: math.NaN()}}, "work.gpuUnits"},
		{"NaN profile", &Job{JobID: "j", WorkloadProfile: Profile{IOIntensity: math.NaN()}}, "workloadProfile.ioIntensity"},
		{"bad tags", &Workload{WorkloadID: "w", Tags: json.RawMessage(`{"a":`)}, "tags"},
		{"bad affinity", &Job{JobID: "j", PodTemplate: PodTemplate{Affinity: json.RawMessage(`nope`)}}, "podTemplate.affinity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWriter(io.Discard)
			var err error
			switch r := tt.rec.(type) {
			case *Workload:
				err = w.WriteWorkload(r)
			case *Job:
				err = w.WriteJob(r)
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %v does not name %s", err, tt.field)
			}
		})
	}
}

func TestAppendJSONFloatMatchesEncodingJSON(t *testing.T) {
	values := []float64{0, 1, -1, 0.1, 0.9, 12.4, 14400, 1e-6, 9.99e-7, 1e-7, 1.5e-300, 123456789012345678, 1e20, 1e21, 1.7976931348623157e308,
		5e-324, -2.5e-8, 0.30000000000000004, 1.0 / 3, 86400 * 14, math.Nextafter(1, 2)}
	// Decimals with few fraction digits (the writer's fast path) and arbitrary bit patterns (the fallback).
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		k := r.Int64N(1 << 40)
		values = append(values, float64(k)/math.Pow10(r.IntN(9)), -float64(k)/1e4, math.Float64frombits(r.Uint64()),
			float64(r.Float64()*1e9), 1e9-float64(r.IntN(1000))/1e6)
	}
	for _, v := range values {
		checkFloatLikeEncodingJSON(t, v)
	}
}

func FuzzAppendJSONFloat(f *testing.F) {
	for _, v := range []float64{0, 0.1, 12.4, 999999999.999999, 1e-6, 123.456789} {
		f.Add(v)
	}
	f.Fuzz(checkFloatLikeEncodingJSON)
}

func checkFloatLikeEncodingJSON(t *testing.T, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(appendJSONFloat(nil, v)); got != string(want) {
		t.Fatalf("%v (bits %#x): got %s, encoding/json %s", v, math.Float64bits(v), got, want)
	}
}

func TestAppendJSONStringRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "new\nline\ttab\r", "\x00\x1f", "héllo wörld", "\u2028\u2029", "bad\xffutf8", "<&>", "日本",
		"workload-000001-worker-01", "0123456789abcdef\"", "0123456\\789abcdef", "abcdefgh\x7fijklmnop\x1f", "abcdefgh\u00e9"} {
		writerCheckString(t, s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\xff\xfe", "\u2028", "\x7f"} {
		f.Add(s)
	}
	f.Fuzz(writerCheckString)
}

func writerCheckString(t *testing.T, s string) {
	enc := appendJSONString(nil, s)
	if !json.Valid(enc) {
		t.Fatalf("%q: invalid JSON %s", s, enc)
	}
	var got, want string
	if err := json.Unmarshal(enc, &got); err != nil {
		t.Fatal(err)
	}
	ref, _ := json.Marshal(s)
	if err := json.Unmarshal(ref, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%q: decodes to %q, encoding/json round trip gives %q", s, got, want)
	}
}

func TestWriterAllocatesNothingPerRecord(t *testing.T) {
	wl := writerDecodeLine(t, writerExampleWorkload).(*Workload)
	job := writerDecodeLine(t, writerExampleJob).(*Job)
	w := NewWriter(io.Discard)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := w.WriteWorkload(wl); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteJob(job); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per workload+job", allocs)
	}
}

func TestCreateFiles(t *testing.T) {
	job := writerDecodeLine(t, writerExampleJob).(*Job)
	want := writerWriteRecord(t, job)
	for _, name := range []string{"t.jsonl", "t.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name)
			fw, err := Create(path)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := fw.WriteJob(job); err != nil {
					t.Fatal(err)
				}
			}
			if err := fw.Close(); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var r io.Reader = bufio.NewReader(f)
			if strings.HasSuffix(name, ".gz") {
				gz, err := gzip.NewReader(r)
				if err != nil {
					t.Fatalf("not gzip: %v", err)
				}
				r = gz
			}
			got, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != strings.Repeat(want, 3) {
				t.Fatalf("file content differs:\n%s", got)
			}
		})
	}
}

func TestCreateStdoutStaysOpen(t *testing.T) {
	fw, err := Create("-")
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stdout.Stat(); err != nil {
		t.Fatalf("stdout closed: %v", err)
	}
}

func TestCreateBadPath(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "missing", "t.jsonl"))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("error %v does not name the path", err)
	}
}

// TestWriteFileRoundTrip: WriteFile writes each workload with its job records (or, without
// them, alone), and LoadWorkloads, indexed by ByID, reads back the same workloads and jobs.
func TestWriteFileRoundTrip(t *testing.T) {
	ws, jobs := genTrace(5, 3)
	byWorkload := map[string][]*Job{}
	for i, w := range ws {
		byWorkload[w.WorkloadID] = jobs[i]
	}
	for _, js := range []map[string][]*Job{byWorkload, nil} {
		path := filepath.Join(t.TempDir(), "t.jsonl.gz")
		if err := WriteFile(path, ws, js); err != nil {
			t.Fatal(err)
		}
		tr, err := LoadWorkloads(t.Context(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := tr.ByID()
		if len(got) != len(ws) {
			t.Fatalf("read %d workloads, want %d", len(got), len(ws))
		}
		for _, w := range ws {
			if g := got[w.WorkloadID]; g == nil || g.DurationSec != w.DurationSec || len(tr.Jobs[w.WorkloadID]) != len(js[w.WorkloadID]) {
				t.Errorf("%s: read %+v with %d jobs, want duration %g and %d jobs", w.WorkloadID, g, len(tr.Jobs[w.WorkloadID]), w.DurationSec, len(js[w.WorkloadID]))
			}
		}
	}
	if err := WriteFile(filepath.Join(t.TempDir(), "missing", "t.jsonl"), ws, nil); err == nil || !strings.Contains(err.Error(), "create trace") {
		t.Errorf("a trace in a missing directory: %v", err)
	}
}
