package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
)

// want is what one imported workload must look like; groups are "role×replicas:gpus:cpu" in order.
type want struct {
	id, family, ns, intent string
	offset, duration       float64
	groups                 string
}

func TestImportFixtures(t *testing.T) {
	tests := []struct {
		format string
		files  []string
		want   []want
		notRun map[string]int
	}{
		{"philly", []string{"philly/cluster_job_log"}, []want{
			{"philly-application_1506638472019_14199", "single_gpu_training", "vc-ee9e8c", "", 0, 193182, "main×1:8:64"},
			{"philly-application_1506638472019_14230", "debug_eval", "vc-ee9e8c", "", 451, 450, "main×1:1:4"},
			{"philly-application_1506638472019_14240", "distributed_training", "vc-b436b2", "", 2601, 10800, "worker×2:8:64 worker×1:4:32"},
			{"philly-application_1506638472019_14260", "single_gpu_training", "vc-6c71a0", "", 4641, 7200, "main×1:2:16"},
		}, map[string]int{"never started or never ended": 1}},
		{"helios", []string{"helios/cluster_log.csv"}, []want{
			{"helios-1425511", "single_gpu_training", "vc-vcjkd-", "", 0, 36848, "main×1:1:1"},
			{"helios-1425512", "debug_eval", "vc-vchbv", "", 26, 249, "main×1:4:16"},
			{"helios-1425513", "single_gpu_training", "vc-vcpdc-", "", 27, 675233, "main×1:1:1"},
			{"helios-1425514", "distributed_training", "vc-vcjkd-", "", 69, 14400, "worker×2:8:32"},
			{"helios-1425515", "cpu_analytics", "vc-vchbv", "", 119, 1800, "main×1:0:8"},
			{"helios-1425516", "cpu_preprocess", "vc-vcpdc-", "", 179, 300, "main×1:0:4"},
			{"helios-1425517", "distributed_training", "vc-vcjkd-", "", 239, 7200, "worker×1:4:10 worker×2:3:10"},
		}, map[string]int{"no run time": 1}},
		{"alibaba-pai", []string{"pai/pai_job_table.csv", "pai/pai_task_table.csv", "pai/pai_sensor_table.csv"}, []want{
			{"pai-4b3f04b66a525d2df903eb16", "debug_eval", "user-58540f191766", "", 0, 526, "main×1:0.5:6"},
			{"pai-af724763f4f5d0beef445849", "parameter_server_training", "user-58540f191766", "", 21, 9950, "ps×2:0:8 worker×4:1:4 worker×1:0.5:2"},
			{"pai-4f057009a5d481acec67b088", "distributed_training", "user-d2d3b77d342e", "", 121, 1940, "worker×8:1:12"},
			{"pai-a9449d475665e3bf0512520b", "cpu_preprocess", "user-d2d3b77d342e", "", 1121, 890, "main×1:0:16"},
		}, map[string]int{"still running or waiting": 1}},
		{"alibaba-gfs", []string{"gfs/job_info_df.csv"}, []want{
			{"gfs-239255", "single_gpu_training", "org-13", "performance", 0, 2764799, "main×1:1:20"},
			{"gfs-253689", "single_gpu_training", "org-13", "performance", 0, 15897599, "main×1:1:8"},
			{"gfs-437260", "distributed_training", "org-57", "eco", 9589663, 41060, "worker×16:1:15"},
			{"gfs-437261", "distributed_training", "org-57", "eco", 9589663, 71718, "worker×94:1:15"},
			{"gfs-500001", "debug_eval", "org-7", "eco", 9590000, 600, "main×1:0.5:4"},
			{"gfs-500002", "cpu_analytics", "org-7", "performance", 9590100, 3600, "main×1:0:16"},
		}, map[string]int{"no run time": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.format, func(t *testing.T) {
			var files []string
			for _, f := range tc.files {
				files = append(files, filepath.Join("testdata", f))
			}
			res, err := Import(tc.format, files, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Workloads) != len(tc.want) || fmt.Sprint(res.NotRun) != fmt.Sprint(tc.notRun) || res.Read != len(tc.want)+1 {
				t.Fatalf("%d workloads, not run %v, read %d", len(res.Workloads), res.NotRun, res.Read)
			}
			byID := map[string]*trace.Workload{}
			for _, w := range res.Workloads {
				byID[w.WorkloadID] = w
			}
			for _, wt := range tc.want {
				w := byID[wt.id]
				if w == nil {
					t.Fatalf("no workload %s", wt.id)
				}
				var groups []string
				for _, p := range w.Pods {
					groups = append(groups, fmt.Sprintf("%s×%d:%g:%g", p.Role, p.Replicas, p.Requests.GPUShare(), p.Requests.Value(trace.ResourceCPU)))
				}
				got := want{w.WorkloadID, string(w.WorkloadType), w.Namespace, w.IntentClass, w.SubmitTimeOffsetSec, w.DurationSec, strings.Join(groups, " ")}
				if strings.HasSuffix(wt.ns, "-") && strings.HasPrefix(got.ns, wt.ns) {
					got.ns = wt.ns // a hashed suffix: the prefix is what matters here
				}
				if got != wt {
					t.Errorf("got  %+v\nwant %+v", got, wt)
				}
				gang := w.WorkloadType == trace.DistributedTraining || w.WorkloadType == trace.ParameterServerTraining
				if w.Gang != gang || len(res.Jobs[w.WorkloadID]) != w.PodCount() {
					t.Errorf("%s: gang %v, %d job records for %d pods", w.WorkloadID, w.Gang, len(res.Jobs[w.WorkloadID]), w.PodCount())
				}
			}
			// What it writes is a valid trace, read back strictly, with the same workloads.
			var buf bytes.Buffer
			tw := trace.NewWriter(&buf)
			if err := res.Write(tw); err != nil || tw.Flush() != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "t.jsonl")
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			back, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Workloads) != len(res.Workloads) {
				t.Fatalf("read back %d workloads", len(back.Workloads))
			}
		})
	}
}

func TestPAIUtilisation(t *testing.T) {
	res, err := Import("alibaba-pai", []string{"testdata/pai/pai_job_table.csv", "testdata/pai/pai_task_table.csv", "testdata/pai/pai_sensor_table.csv"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range res.Workloads {
		p := w.SharedIntensityProfile
		switch w.WorkloadID {
		case "pai-4b3f04b66a525d2df903eb16": // 140% of 600% planned; 16% of a GPU, 32% of the half it planned
			if p.CPUUtilization != 0.2336 || p.GPUUtilization != 0.3213 {
				t.Errorf("%s: %+v", w.WorkloadID, p)
			}
		case "pai-af724763f4f5d0beef445849": // two worker instances: 220 of 800, 120 of 200
			if p.CPUUtilization != 0.275 || p.GPUUtilization != 0.6 {
				t.Errorf("%s: %+v", w.WorkloadID, p)
			}
		}
	}
	// Without the sensor table the profile's defaults stand in.
	res, err = Import("alibaba-pai", []string{"testdata/pai/pai_task_table.csv", "testdata/pai/pai_job_table.csv"}, Options{})
	if err != nil || res.Workloads[0].SharedIntensityProfile.GPUUtilization == 0.1606 {
		t.Fatalf("%v %+v", err, res.Workloads[0].SharedIntensityProfile)
	}
}

func TestTeamBy(t *testing.T) {
	res, err := Import("helios", []string{"testdata/helios/cluster_log.csv"}, Options{TeamBy: "user"})
	if err != nil || !strings.HasPrefix(res.Workloads[0].Namespace, "user-uxbbc-") {
		t.Fatalf("%v %s", err, res.Workloads[0].Namespace)
	}
	if _, err := Import("alibaba-gfs", []string{"testdata/gfs/job_info_df.csv"}, Options{TeamBy: "vc"}); err == nil || !strings.Contains(err.Error(), `--team-by "vc": want one of org`) {
		t.Fatal(err)
	}
}

func TestNamespaces(t *testing.T) {
	for _, tc := range []struct{ prefix, in, want string }{
		{"vc", "ee9e8c", "vc-ee9e8c"},
		{"org", "13", "org-13"},
		{"vc", "vcJkd", "vc-vcjkd-"},
		{"user", "", "user-none-"},
		{"user", "a_b", "user-a-b-"},
	} {
		got := namespace(tc.prefix, tc.in)
		if got != tc.want && !(strings.HasSuffix(tc.want, "-") && strings.HasPrefix(got, tc.want)) {
			t.Errorf("namespace(%q, %q) = %q, want %q", tc.prefix, tc.in, got, tc.want)
		}
	}
	if namespace("vc", "vcJkd") == namespace("vc", "vcjkd") {
		t.Error("two virtual clusters that differ in case share a namespace")
	}
	if n := namespace("user", strings.Repeat("x", 100)); len(n) > 63 {
		t.Errorf("%q is longer than a namespace may be", n)
	}
}

func TestMalformedRows(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	helios, _ := os.ReadFile("testdata/helios/cluster_log.csv")
	gfs, _ := os.ReadFile("testdata/gfs/job_info_df.csv")
	for _, tc := range []struct {
		format string
		files  []string
		want   string
	}{
		{"helios", []string{write("h1.csv", strings.Replace(string(helios), ",36848,", ",lots,", 1))}, "h1.csv:2: duration: \"lots\" is not a number"},
		{"helios", []string{write("h2.csv", strings.Replace(string(helios), "2020-06-09 18:41:27,2020", "09/06/2020,2020", 1))}, `h2.csv:3: submit_time: time "09/06/2020" is not "2006-01-02 15:04:05"`},
		{"helios", []string{write("h3.csv", string(helios)+"1,2,3\n")}, "h3.csv:10: 3 columns, want 12"},
		{"alibaba-gfs", []string{write("g1.csv", strings.Replace(string(gfs), ",Spot", ",Gold", 1))}, `g1.csv:4: job_type: "Gold": want HP or Spot`},
		{"alibaba-gfs", []string{write("g2.csv", strings.Replace(string(gfs), "\n437260,57", "\n437260,\"57", 1))}, "g2.csv:4: "},
		{"philly", []string{write("p1.json", `[{"jobid":"a","submitted_time":"2017-10-07 01:11:39","attempts":[{"start_time":"yesterday","end_time":null}]}]`)}, `p1.json:1: attempts[0]: time "yesterday" is not`},
		{"philly", []string{write("p2.json", "[\n{\"jobid\":1}]")}, "p2.json:2: jobid: want a string"},
		{"philly", []string{write("p3.json", "[\n{\"jobid\":\"x\",,}]")}, "p3.json:2: "},
		{"alibaba-pai", []string{write("x.csv", "a,b,c\n")}, "x.csv:1: 3 columns: not pai_job_table"},
		{"unknown", []string{"x"}, `unknown format "unknown"`},
	} {
		_, err := Import(tc.format, tc.files, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: error %v, want %q", tc.format, tc.files, err, tc.want)
			continue
		}
		if _, ok := fielderr.As(err); !ok && tc.format != "unknown" {
			t.Errorf("%v is not a fielderr.Error", err)
		}
	}
	// Lenient mode skips the bad row and lists it.
	res, err := Import("helios", []string{filepath.Join(dir, "h1.csv")}, Options{Lenient: true})
	if err != nil || len(res.Skipped) != 1 || len(res.Workloads) != 6 {
		t.Fatalf("lenient: %v, skipped %v, %d workloads", err, res.Skipped, len(res.Workloads))
	}
}

// fuzzImport feeds one file of arbitrary bytes to an importer: it must not panic, and an error
// must be a plain message or name the file.
func fuzzImport(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		b, err := os.ReadFile(filepath.Join("testdata", s))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "in")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, lenient := range []bool{false, true} {
			res, err := Import(format, []string{p}, Options{Lenient: lenient})
			if err != nil {
				if e, ok := fielderr.As(err); ok && e.File != p {
					t.Fatalf("error names %q: %v", e.File, err)
				}
				continue
			}
			var buf bytes.Buffer
			w := trace.NewWriter(&buf)
			if err := res.Write(w); err != nil || w.Flush() != nil {
				t.Fatalf("imported workloads do not write: %v", err)
			}
			r, _ := trace.NewReader(&buf, "out", trace.Options{})
			for {
				if _, err := r.Next(); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Fatalf("imported trace does not read back: %v", err)
					}
					break
				}
			}
			if !slices.IsSortedFunc(res.Workloads, func(a, b *trace.Workload) int {
				if a.SubmitTimeOffsetSec < b.SubmitTimeOffsetSec {
					return -1
				}
				if a.SubmitTimeOffsetSec > b.SubmitTimeOffsetSec {
					return 1
				}
				return 0
			}) {
				t.Fatal("workloads not in submit order")
			}
		}
	})
}

func FuzzPhilly(f *testing.F) { fuzzImport(f, "philly", "philly/cluster_job_log") }
func FuzzHelios(f *testing.F) { fuzzImport(f, "helios", "helios/cluster_log.csv") }
func FuzzPAI(f *testing.F) {
	fuzzImport(f, "alibaba-pai", "pai/pai_job_table.csv", "pai/pai_task_table.csv", "pai/pai_sensor_table.csv")
}
func FuzzGFS(f *testing.F) { fuzzImport(f, "alibaba-gfs", "gfs/job_info_df.csv") }

func TestHugeJobIsMalformed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "g.csv")
	if err := os.WriteFile(p, []byte("1,2,A10,4,1,1e9,0,100,HP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Import("alibaba-gfs", []string{p}, Options{}); err == nil || !strings.Contains(err.Error(), "g.csv:1: job gfs-1 asks for 1000000000 pods") {
		t.Fatal(err)
	}
}

// A share is written to the thousandth of a GPU and stays a valid request: one that rounds to a
// whole GPU is one, one below a thousandth is a thousandth.
func TestShareRounding(t *testing.T) {
	p, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	spec := p.Family(trace.DebugEval)
	for _, tc := range []struct {
		share     float64
		wantShare string
		wantGPU   string
	}{
		{0.5, "0.5", ""}, {0.12345, "0.123", ""}, {0.0004, "0.001", ""}, {0.9996, "", "1"},
	} {
		req := requests(spec, trace.RoleMain, Task{Pods: 1, GPUFraction: tc.share, CPU: 2, MemGi: 4})
		if req[trace.ResourceGPUFraction] != tc.wantShare || req[trace.ResourceGPU] != tc.wantGPU {
			t.Errorf("share %v: requests %v, want share %q, GPUs %q", tc.share, req, tc.wantShare, tc.wantGPU)
		}
		w := &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: "w", Namespace: "a", WorkloadType: trace.DebugEval, DurationSec: 60,
			WorkloadClass: trace.Class{CPU: "cpu.light", GPU: "gpu.light"}, SharedIntensityProfile: trace.Profile{GPUUtilization: 0.5},
			Pods: []trace.PodGroup{{Role: trace.RoleMain, Replicas: 1, Requests: req}}}
		if err := w.Validate(); err != nil {
			t.Errorf("share %v: %v", tc.share, err)
		}
	}
}
