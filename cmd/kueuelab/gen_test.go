package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/gen"
)

// runCLI runs kueuelab with args and returns its stdout and stderr.
func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errOut)
	err := root.Execute()
	return out.String(), errOut.String(), err
}

func TestGenGolden(t *testing.T) {
	// The golden file belongs to model/gen (go test ./model/gen -update rewrites it).
	want, err := os.ReadFile("../../model/gen/testdata/jobs50-seed7-workloads.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, "gen", "--jobs", "50", "--seed", "7", "--emit-workload-records")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatal("gen --jobs 50 --seed 7 --emit-workload-records differs from the golden trace")
	}
	if !strings.Contains(errOut, "50 workloads, 89 job records -> stdout") {
		t.Fatalf("summary line: %q", errOut)
	}
}

func TestGenOutFiles(t *testing.T) {
	dir := t.TempDir()
	stdout, _, err := runCLI(t, "gen", "--jobs", "200", "--seed", "3")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t.jsonl", "t.jsonl.gz"} {
		path := filepath.Join(dir, name)
		out, errOut, err := runCLI(t, "gen", "--jobs", "200", "--seed", "3", "--out", path)
		if err != nil {
			t.Fatal(err)
		}
		if out != "" || !strings.Contains(errOut, "-> "+path) {
			t.Fatalf("stdout %q, stderr %q", out, errOut)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = f
		if strings.HasSuffix(name, ".gz") {
			if r, err = gzip.NewReader(f); err != nil {
				t.Fatal(err)
			}
		}
		got, err := io.ReadAll(r)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != stdout {
			t.Fatalf("%s differs from the stdout trace", name)
		}
		if strings.Contains(stdout, `"type":"workload"`) {
			t.Fatal("workload records without --emit-workload-records")
		}
	}
}

func TestGenFlagsOverrideProfile(t *testing.T) {
	// A profile with only CPU work; --gpu-ratio 1 must override it, an unset flag must not.
	p := strings.Replace(string(gen.DefaultProfileYAML()), "gpuRatio: 0.8", "gpuRatio: 0", 1)
	path := filepath.Join(t.TempDir(), "cpu.yaml")
	if err := os.WriteFile(path, []byte(p), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		gpu, cpu  bool
		wantInOut string
	}{
		{"profile only", []string{"--profile", path}, false, true, ""},
		{"flag wins", []string{"--profile", path, "--gpu-ratio", "1"}, true, false, ""},
		{"default profile", nil, true, true, ""},
		{"eco everywhere", []string{"--eco-ratio", "1", "--perf-ratio", "0"}, true, true, `"intentClass":"eco"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCLI(t, append([]string{"gen", "--jobs", "300", "--seed", "1"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			hasGPU := strings.Contains(out, `"nvidia.com/gpu"`)
			hasCPU := strings.Contains(out, `"workloadType":"cpu_`)
			if hasGPU != tt.gpu || hasCPU != tt.cpu {
				t.Fatalf("GPU records %v (want %v), CPU records %v (want %v)", hasGPU, tt.gpu, hasCPU, tt.cpu)
			}
			if tt.wantInOut != "" && strings.Count(out, tt.wantInOut) != strings.Count(out, "\n") {
				t.Fatalf("not every record has %s", tt.wantInOut)
			}
		})
	}
}

func TestGenRejectsBadInput(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--gpu-ratio", "1.5"}, "gpuRatio"},
		{[]string{"--perf-ratio", "0.6", "--eco-ratio", "0.6"}, "intent"},
		{[]string{"--mean-inter-arrival-sec", "0"}, "arrival.meanInterArrivalSec"},
		{[]string{"--jobs", "-1"}, "--jobs"},
		{[]string{"--profile", "/nonexistent/p.yaml"}, "/nonexistent/p.yaml"},
		{[]string{"--out", "/nonexistent/dir/t.jsonl"}, "/nonexistent/dir/t.jsonl"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"gen", "--jobs", "5"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not mention %q", err, tt.want)
			}
		})
	}
}

func TestProfileShow(t *testing.T) {
	out, _, err := runCLI(t, "profile", "show")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(gen.DefaultProfileYAML()) {
		t.Fatal("profile show does not print the embedded profile")
	}
	// What it prints is a valid profile for --profile.
	dir := t.TempDir()
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if again, _, err := runCLI(t, "profile", "show", "--profile", path); err != nil || again != out {
		t.Fatalf("profile show --profile: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(out, "sigma: 1.2", "sigma: 0", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if printed, _, err := runCLI(t, "profile", "show", "--profile", bad); err == nil || printed != "" ||
		!strings.Contains(err.Error(), "bad.yaml:141: families[2].duration.sigma") {
		t.Fatalf("invalid profile: printed %d bytes, error %v", len(printed), err)
	}
}
