package main

import (
	"cmp"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// TestRunControlPlaneFlag: --control-plane picks the sim engine's control-plane model; it is
// refused where it cannot apply, and a run's summary names the model it ran with.
func TestRunControlPlaneFlag(t *testing.T) {
	harness := filepath.Join("..", "..", "examples", "control-plane", "kueue-perf-harness.yaml")
	spec := filepath.Join("..", "..", "examples", "clusters", "small.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cluster engine", []string{"--engine", "cluster", "--control-plane", "kueue"}, "--control-plane does not apply to --engine cluster"},
		{"missing file", []string{"--engine", "sim", "--control-plane", "/nonexistent/cp.yaml"}, "/nonexistent/cp.yaml"},
		{"with --sim-cycle", []string{"--engine", "sim", "--control-plane", "kueue", "--sim-cycle", "5ms"}, "--sim-cycle: with a control-plane model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"run", "--gen-jobs", "5", "--cluster", spec, "--out", t.TempDir()}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v does not say %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ flag, want string }{{"none", ""}, {"kueue", "kueue"}, {harness, "kueue-perf-harness"}} {
		t.Run("runs with "+tc.flag, func(t *testing.T) {
			out := t.TempDir()
			stdout, _, err := runCLI(t, "run", "--engine", "sim", "--gen-jobs", "20", "--cluster", spec, "--out", out, "--control-plane", tc.flag)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(out, results.SummaryFile))
			if err != nil {
				t.Fatal(err)
			}
			var s results.Summary
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			name := ""
			if s.Kueue != nil && s.Kueue.ControlPlane != nil {
				name = s.Kueue.ControlPlane.Name
			}
			if name != tc.want {
				t.Errorf("summary's control plane %q, want %q", name, tc.want)
			}
			if want := "control plane " + cmp.Or(tc.want, "none"); !strings.Contains(stdout, want) {
				t.Errorf("the run does not say %q:\n%s", want, stdout)
			}
		})
	}
}
