package experiment

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestSchedulerOp: the scheduler operation replaces the spec's section with a scoring strategy or
// a configuration file (relative to the experiment file), {} removes it, and a bad strategy is an
// error naming the variant and the patched spec's field.
func TestSchedulerOp(t *testing.T) {
	dir := t.TempDir()
	sched := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- pluginConfig:\n" +
		"  - name: NodeResourcesFit\n    args: {scoringStrategy: {type: MostAllocated, resources: [{name: nvidia.com/gpu, weight: 7}]}}\n"
	if err := os.WriteFile(filepath.Join(dir, "sched.yaml"), []byte(sched), 0o644); err != nil {
		t.Fatal(err)
	}
	teamsAbs, err := filepath.Abs(teams)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(header(`variants:
- name: packed
  patch:
  - scheduler: {scoringStrategy: {type: MostAllocated, resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]}}
- name: file
  patch:
  - scheduler: {config: sched.yaml}
- name: back-to-default
  clusterPatch:
    scheduler: {scoringStrategy: {type: MostAllocated}}
  patch:
  - scheduler: {}
- name: bad
  patch:
  - scheduler: {scoringStrategy: {type: MostAllocated, resources: [{name: nvidia.com/gpu, weight: 0}, {name: nvidia.com/gpu}]}}
`), teams, teamsAbs, 1)
	file := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"MostAllocated nvidia.com/gpu=5,cpu=1", "MostAllocated nvidia.com/gpu=7", "LeastAllocated cpu=1,memory=1"} {
		s, _, err := e.Spec(&e.Variants[i])
		if err != nil {
			t.Fatalf("variant %s: %v", e.Variants[i].Name, err)
		}
		if got := s.Scoring().String(); got != want {
			t.Errorf("variant %s scores with %q, want %q", e.Variants[i].Name, got, want)
		}
	}
	_, _, err = e.Spec(&e.Variants[3])
	if err == nil || !strings.Contains(err.Error(), "variant bad: the patched cluster spec is invalid") ||
		!strings.Contains(err.Error(), "scheduler.scoringStrategy.resources[1].name: nvidia.com/gpu is listed twice") {
		t.Errorf("error %v", err)
	}
}

func TestKubeconfigRejectsScheduler(t *testing.T) {
	e, err := Parse("exp.yaml", []byte(header("variants:\n- name: a\n  patch:\n  - scheduler: {scoringStrategy: {type: MostAllocated}}\n")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(t.Context(), e, Options{OutDir: t.TempDir(), REST: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "exp.yaml:7: variant a: a scheduler section needs a fresh local cluster") {
		t.Errorf("error %v", err)
	}
}
