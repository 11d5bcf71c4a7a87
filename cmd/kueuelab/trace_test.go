package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runTrace runs the CLI with args and returns its standard output and error.
func runTrace(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd()
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err = cmd.ExecuteContext(t.Context())
	return out.String(), errb.String(), err
}

func TestTraceInspectJSON(t *testing.T) {
	got, _, err := runTrace(t, "trace", "inspect", "-o", "json", "../../model/trace/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "trace-inspect.json")
	if *updateTraceGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (rerun with -update-trace-inspect if intended):\n%s", golden, got)
	}
	// Independently of the golden file: the numbers of the three workloads, worked out by hand.
	var st struct {
		Workloads      int
		Pods           int
		GPUHours       float64
		ArrivalsByHour []int
		Families       []struct {
			Family      string
			DurationSec struct{ P50 float64 }
		}
	}
	if err := json.Unmarshal([]byte(got), &st); err != nil {
		t.Fatal(err)
	}
	if st.Workloads != 3 || st.Pods != 7 || st.GPUHours != 10 || st.ArrivalsByHour[23] != 1 || len(st.Families) != 3 || st.Families[1].DurationSec.P50 != 7200 {
		t.Fatalf("unexpected statistics: %+v", st)
	}
}

func TestTraceInspectErrors(t *testing.T) {
	dir := t.TempDir()
	small, err := os.ReadFile("../../model/trace/testdata/small.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(small)), "\n")
	lines[2] = strings.Replace(lines[2], `"memory":"12Gi"`, `"memory":"12Gii"`, 1)
	lines[1] = strings.Replace(lines[1], `"namespace":"default"`, `"namespace":"default","newField":1`, 1)
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"strict", []string{"trace", "inspect", bad}, "bad.jsonl:3: pods[1].requests.memory: bad quantity \"12Gii\": unknown suffix \"Gii\"", ""},
		{"lenient", []string{"trace", "inspect", "--lenient", bad}, "", "skipped: " + bad + ":3: pods[1].requests.memory"},
		{"missing file", []string{"trace", "inspect", filepath.Join(dir, "nope")}, "no such file", ""},
		{"bad output", []string{"trace", "inspect", "-o", "yaml", bad}, `--output "yaml": want table or json`, ""},
		{"no file", []string{"trace", "inspect"}, "accepts 1 arg", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := runTrace(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !strings.Contains(out, tc.wantOut) {
				t.Fatalf("err %v, output:\n%s", err, out)
			}
			if !strings.Contains(stderr, "ignoring unknown field job.newField") {
				t.Fatalf("no warning on stderr: %q", stderr)
			}
		})
	}
}

var updateTraceGolden = flag.Bool("update-trace-inspect", false, "rewrite testdata/trace-inspect.json")
