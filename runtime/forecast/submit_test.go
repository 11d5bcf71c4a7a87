package forecast

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// job is a batch Job manifest on small's team-a; edit replaces its lines' text.
func job(edit ...string) string {
	y := `apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: team-a
  labels:
    kueue.x-k8s.io/queue-name: team-a-lq
    kueue.x-k8s.io/priority-class: standard
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations:
        kueuelab.io/duration-sec: "600"
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: trainer
        resources:
          requests: {cpu: "4", memory: 16Gi, nvidia.com/gpu: "8"}
`
	for i := 0; i+1 < len(edit); i += 2 {
		y = strings.Replace(y, edit[i], edit[i+1], 1)
	}
	return y
}

// emptyState writes a state of small with no live workload, at 100 s.
func emptyState(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		state.ClusterFile: small,
		state.TraceFile:   "",
		state.StateFile: "apiVersion: kueuelab.io/v1alpha1\nkind: ClusterState\nnowSec: 100\ntrace: " + state.TraceFile +
			"\ncluster: " + state.ClusterFile + "\narrivals: none\nworkloads: []\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestJobs: a -f manifest's jobs are forecast as if submitted now, named by file and name; a
// manifest Kueue would not queue, or the state cannot place, is refused naming file, line and
// object.
func TestJobs(t *testing.T) {
	dir := emptyState(t)
	for _, tc := range []struct {
		name, manifest string
		namespace      string
		want           string // the error; "" for a forecast naming job.yaml/train
	}{
		{name: "job with queue label", manifest: job()},
		{name: "default namespace", manifest: job("  namespace: team-a\n", ""), namespace: "team-a"},
		{name: "parallelism defaulted", manifest: job("  parallelism: 2\n  completions: 2\n", "")},
		{name: "two documents", manifest: "---\n" + job() + "---\n" + job("name: train", "name: eval")},
		{name: "missing queue label", manifest: job("    kueue.x-k8s.io/queue-name: team-a-lq\n", ""),
			want: "job.yaml:4: metadata.labels: Job train: no kueue.x-k8s.io/queue-name label"},
		{name: "unknown kind", manifest: job("apiVersion: batch/v1\nkind: Job", "apiVersion: apps/v1\nkind: Deployment"),
			want: "job.yaml:2: kind: Deployment (apps/v1): not a job kind Kueue's integrations in kueuelab build a Workload from; supported: Job (batch/v1), JobSet (jobset.x-k8s.io/v1alpha2)"},
		{name: "namespace without a queue", manifest: job("namespace: team-a", "namespace: team-z"),
			want: "job.yaml:7: metadata.labels: Job train: LocalQueue team-z/team-a-lq is not in the state's cluster spec cluster.yaml (its LocalQueues: team-a/team-a-lq, team-b/team-b-lq, team-c/team-c-lq)"},
		{name: "no namespace", manifest: job("  namespace: team-a\n", ""),
			want: "LocalQueue default/team-a-lq is not in the state's cluster spec"},
		{name: "malformed YAML", manifest: job() + "---\nkind: Job\n metadata: {}\n",
			want: "job.yaml:25: mapping values are not allowed in this context"},
		{name: "unknown field", manifest: job("  parallelism: 2", "  paralelism: 2"),
			want: `job.yaml:1: Job train: strict decoding error: unknown field "spec.paralelism"`},
		{name: "priority class the state has not", manifest: job("priority-class: standard", "priority-class: urgent"),
			want: `job.yaml:8: metadata.labels: Job train: WorkloadPriorityClass "urgent" is not in the state's cluster spec (its classes: performance (1000), standard (100), eco (10))`},
		{name: "no priority class", manifest: job("    kueue.x-k8s.io/priority-class: standard\n", ""),
			want: `job.yaml:1: Job train: priority 0 (class "") is none of the state's priority classes performance (1000), standard (100), eco (10)`},
		{name: "same job twice", manifest: job() + "---\n" + job(),
			want: "job.yaml:24: Job team-a/train is also in job.yaml:1"},
		{name: "no pods", manifest: job("parallelism: 2", "parallelism: 0"),
			want: "job.yaml:1: Job train: pod set main has no pods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			if err := os.WriteFile("job.yaml", []byte(tc.manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			ns := tc.namespace
			if ns == "" {
				ns = "default"
			}
			rep, err := func() (*Report, error) {
				jobs, err := ReadJobs([]string{"job.yaml"}, ns)
				if err != nil {
					return nil, err
				}
				return Run(context.Background(), Options{Dir: dir, Repeats: 2, Seed: 1, Jobs: jobs, HorizonSec: 3600})
			}()
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got *Workload
			for i := range rep.Workloads {
				if rep.Workloads[i].Manifest == "job.yaml/train" {
					got = &rep.Workloads[i]
				}
			}
			if got == nil {
				t.Fatalf("the forecast names no job.yaml/train: %+v", rep.Workloads)
			}
			// An idle cluster of 16 GPUs admits two 8-GPU pods at once.
			if got.WaitedSec != 0 || got.Namespace != "team-a" || got.Within["15m"] != 1 || len(got.ETAs) != 2 {
				t.Errorf("job.yaml/train: %+v: want no wait, team-a, admitted within 15m in both runs", got)
			}
			if rep.Known != len(rep.Workloads) {
				t.Errorf("%d known of %d: the job's kueuelab.io/duration-sec is its work", rep.Known, len(rep.Workloads))
			}
		})
	}
}

// TestJobQueuesBehindTheState: a job submitted into a replay's queue waits like the pending
// workloads do, and is reported beside them.
func TestJobQueuesBehindTheState(t *testing.T) {
	_, dir := replayed(t, 80, 3600)
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(job("parallelism: 2", "parallelism: 1")), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := ReadJobs([]string{path}, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 2, Seed: 1, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Workloads) < 2 {
		t.Fatalf("%d pending workloads: the test needs a queue", len(rep.Workloads))
	}
	last := rep.Workloads[len(rep.Workloads)-1]
	if last.Manifest != path+"/train" || last.WaitedSec != 0 || last.P50 == nil || *last.P50 <= 0 {
		t.Errorf("the job: %+v: want it named, created now, admitted after a wait", last)
	}
	for _, w := range rep.Workloads[:len(rep.Workloads)-1] {
		if w.Manifest != "" {
			t.Errorf("%s: manifest %q on a workload of the state", w.ID, w.Manifest)
		}
	}
}

// TestAltGPUs: with 8 of small's 16 GPUs held by a job for 10,000 s, a -f job of 2 pods × 8 GPUs
// waits for it; at 8 GPUs (1 pod, the pods' GPUs kept) or 4 (2 pods of 2, the pods kept) it
// starts now, each size in runs of its own. A size neither way reaches is refused.
func TestAltGPUs(t *testing.T) {
	dir := handState(t, 200, handWorkload("big", "distributed_training", 0, 10000, 1, 8))
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(job()), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := ReadJobs([]string{path}, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 2, Seed: 1, Jobs: jobs, AltGPUs: []int{8, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Workloads) != 3 {
		t.Fatalf("%d rows, want the job and its two sizes: %+v", len(rep.Workloads), rep.Workloads)
	}
	for i, want := range []struct {
		gpus    int
		resized string
		waits   bool
	}{{0, "", true}, {8, "pod set main: 2 → 1 pods of 8 GPUs", false}, {4, "pod set main: 2 pods of 8 → 2 GPUs", false}} {
		w := rep.Workloads[i]
		if w.Manifest != path+"/train" || w.AltGPUs != want.gpus || w.Resized != want.resized || w.P50 == nil {
			t.Errorf("row %d: %+v, want %d GPUs resized %q, admitted", i, w, want.gpus, want.resized)
			continue
		}
		// The 16-GPU job waits for the 8-GPU one to end at 10,000 s (from the state's 200 s).
		if got := *w.P50; want.waits && got < 9800 || !want.waits && got > 60 {
			t.Errorf("row %d (%d GPUs): p50 %.0f s", i, want.gpus, got)
		}
	}
	if _, err := Run(context.Background(), Options{Dir: dir, Repeats: 1, Seed: 1, Jobs: jobs, AltGPUs: []int{5}}); err == nil ||
		!strings.Contains(err.Error(), "--alt-gpus 5: 5 GPUs is a multiple of neither a pod's 8 GPUs nor the 2 pods of pod set main") {
		t.Errorf("5 GPUs: error %v", err)
	}
	if _, err := Run(context.Background(), Options{Dir: dir, Repeats: 1, Seed: 1, AltGPUs: []int{8}}); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("--alt-gpus without -f: error %v", err)
	}
	// The same work: a job of 600 s on 16 GPUs takes 1,200 s on 8.
	s := kueuewl.Summary{PodSets: []kueuewl.PodSet{{Name: "main", Count: 2, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.DurationSec: "600"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}}}}
	if _, err := resize(&s, 8); err != nil || s.PodSets[0].Template.Annotations[contract.DurationSec] != "1200" || s.PodSets[0].Count != 1 {
		t.Errorf("resize to 8: %v, %+v", err, s.PodSets[0])
	}
}
