package render

import (
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

func TestParseMapping(t *testing.T) {
	reg := DefaultRegistry()
	m, err := ParseMapping([]byte("kinds:\n  distributed_training: PyTorchJob\n  hpo_experiment: JobSet\n"), "m.yaml", reg)
	if err != nil {
		t.Fatal(err)
	}
	if m[trace.DistributedTraining] != "PyTorchJob" || m[trace.HPOExperiment] != "JobSet" || m[trace.DebugEval] != "Job" {
		t.Fatalf("mapping %v", m)
	}
	if _, err := NewRenderer(reg, m, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"kinds:\n  distributed_training: RayJob\n", "m.yaml:2: kinds.distributed_training: unknown kind \"RayJob\""},
		{"kinds:\n  quantum: Job\n", "m.yaml:2: kinds.quantum: unknown family"},
		{"kinds:\n  debug_eval: MPIJob\n", "m.yaml:2: kinds.debug_eval: kind MPIJob cannot render this family"},
		{"kind:\n  debug_eval: Job\n", "m.yaml:1: kind: unknown field (want kinds)"},
		{"kinds: [Job]\n", "m.yaml:1: kinds: want a map"},
		{"kinds:\n  debug_eval: [Job]\n", "m.yaml:2: kinds.debug_eval: want a kind name"},
		{"kinds: {}\n---\nkinds: {}\n", "single YAML document"},
		{"kinds: {debug_eval: Job", "m.yaml"},
	} {
		_, err := ParseMapping([]byte(tc.in), "m.yaml", reg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.want)
		}
	}
	if m, err := ParseMapping(nil, "empty.yaml", reg); err != nil || m[trace.DistributedTraining] != "MPIJob" {
		t.Errorf("empty file: %v %v, want the defaults", m, err)
	}
}

func TestRendererErrors(t *testing.T) {
	reg := DefaultRegistry()
	bad := DefaultMapping()
	bad[trace.CPUAnalytics] = "TFJob"
	if _, err := NewRenderer(reg, bad, Options{}); err == nil || !strings.Contains(err.Error(), "cpu_analytics") {
		t.Errorf("error %v, want one naming the family", err)
	}
	r, err := NewRenderer(reg, DefaultMapping(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := Placement{Queue: "q"}
	for _, tc := range []struct {
		name string
		w    *trace.Workload
		want string
	}{
		{"two launchers", makeWorkload("workload-1", trace.DistributedTraining).pods(trace.RoleLauncher, 2, "1", "1Gi", 0).pods(trace.RoleWorker, 2, "1", "1Gi", 1).obj(), "at most one launcher"},
		{"bad quantity", makeWorkload("workload-2", trace.DebugEval).pods(trace.RoleMain, 1, "4Gii", "1Gi", 1).obj(), "requests.cpu"},
		{"two groups in a Job", makeWorkload("workload-3", trace.CPUPreprocess).pods(trace.RoleMain, 1, "1", "1Gi", 0).pods(trace.RoleWorker, 1, "1", "1Gi", 0).obj(), "one pod group"},
		{"zero replicas", makeWorkload("workload-4", trace.DebugEval).pods(trace.RoleMain, 0, "1", "1Gi", 1).obj(), "replicas 0"},
		{"unknown family", makeWorkload("workload-5", "quantum").pods(trace.RoleMain, 1, "1", "1Gi", 0).obj(), "unknown family"},
		{"no pods", makeWorkload("workload-6", trace.DebugEval).obj(), "no pods"},
	} {
		_, err := r.Render(tc.w, nil, p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.w.WorkloadID) {
			t.Errorf("%s: error %v, want one naming %s and %q", tc.name, err, tc.w.WorkloadID, tc.want)
		}
	}
	w := shapeOf("workload-7", trace.DistributedTraining, 2)
	jobs := jobsOf(w)
	jobs[0].PodRole = trace.RolePS
	if _, err := r.Render(w, jobs, p); err == nil || !strings.Contains(err.Error(), "role ps") {
		t.Errorf("job with a foreign role: error %v", err)
	}
}
