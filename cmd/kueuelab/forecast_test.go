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
