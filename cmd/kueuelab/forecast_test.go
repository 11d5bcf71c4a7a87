package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestForecastErrors(t *testing.T) {
	dir := t.TempDir()
	bad := "apiVersion: kueuelab.io/v1alpha1\nkind: ClusterState\nnowSec: 10\ntrace: w.jsonl\ncluster: c.yaml\narrivals: none\nworkloads:\n- id: a\n  phase: Running\n  createdSec: 1\n"
	if err := os.WriteFile(filepath.Join(dir, "state.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	// No kubeconfig anywhere: without a directory, nothing to forecast.
	t.Setenv("KUBECONFIG", filepath.Join(dir, "none"))
	t.Setenv("HOME", dir)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"neither, no kubeconfig", []string{"forecast"}, "no snapshot directory given, so the cluster of the default kubeconfig"},
		{"both", []string{"forecast", dir, "--kubeconfig", "k"}, "give a snapshot directory or --kubeconfig, not both"},
		{"manifest missing", []string{"forecast", dir, "-f", filepath.Join(dir, "job.yaml")}, "-f: open " + filepath.Join(dir, "job.yaml")},
		{"context alone", []string{"forecast", dir, "--context", "c"}, "--context goes with --kubeconfig"},
		{"output", []string{"forecast", dir, "-o", "yaml"}, `--output "yaml": want table or json`},
		{"repeats", []string{"forecast", dir, "--repeats", "0"}, "--repeats must be ≥ 1"},
		{"state field", []string{"forecast", dir}, `state.yaml:9: workloads[0].phase: "Running": want Pending or Admitted`},
		{"no state", []string{"forecast", t.TempDir()}, "state.yaml: no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runTrace(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestForecastOnTheStatesRelease: a state from a cluster on Kueue v0.18.x is forecast by Kueue
// v0.18.3's own scheduler (a kueuelab built for it), one on a minor kueuelab does not replay is
// refused with the supported list, and --kueue-version picks the release.
func TestForecastOnTheStatesRelease(t *testing.T) {
	dir := t.TempDir()
	st := filepath.Join(dir, "state")
	if _, _, err := runTrace(t, "run", "--engine", "sim", "--trace", "../../runtime/simver/testdata/hashing.jsonl",
		"--cluster", "../../runtime/simver/testdata/spec.yaml", "--sim-max-trace", "30m", "--state-out", st,
		"--out", filepath.Join(dir, "run")); err == nil || !strings.Contains(err.Error(), "trace time limit") {
		t.Fatalf("run to 30 min: %v", err)
	}
	setRelease := func(v string) {
		t.Helper()
		p := filepath.Join(st, "state.yaml")
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "kueueVersion:") {
				lines[i] = "kueueVersion: " + v
			}
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setRelease("v0.16.4")
	if _, _, err := runTrace(t, "forecast", st, "--repeats", "2"); err == nil ||
		!strings.Contains(err.Error(), "the cluster runs Kueue v0.16.4: kueuelab replays no release of its minor (supported: v0.15.0, v0.17.1, v0.18.3, v0.19.2)") {
		t.Errorf("v0.16.4: %v", err)
	}
	out, _, err := runTrace(t, "forecast", st, "--repeats", "2", "--kueue-version", "v0.19.2")
	if err != nil || !strings.Contains(out, "on Kueue v0.19.2:") {
		t.Errorf("--kueue-version v0.19.2: %v\n%s", err, out)
	}
	setRelease("v0.18.2")
	var stderr string
	out, stderr, err = runTrace(t, "forecast", st, "--repeats", "2")
	if err != nil || !strings.Contains(out, "on Kueue v0.18.3:") || !strings.Contains(out, "b5") {
		t.Errorf("v0.18.2: %v\n%s\n%s", err, out, stderr)
	}
}
