package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// jobSweep is a 2-variant experiment on a small generated trace: the GPU quota at 4 and 8. The
// trace is small because the run starts a local cluster of its own, as the pod would.
const jobSweep = `apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: e2e-job-sweep}
generator: {jobs: 8, seed: 3}
cluster: spec.yaml
speedup: max
timeout: 8m
variants:
- name: quota-4
  patch:
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 4}
- name: quota-8
`

// TestRenderJobIndexRunsLikeThePod renders an experiment as an Indexed Job, has the API server
// validate the Job and its inputs ConfigMap (a server-side dry run: batch/v1's own validation,
// Indexed-Job rules included), applies them, takes the pod the cluster's Job controller made for
// completion index 1, and runs that pod's container on this machine: its arguments in its working
// directory, the ConfigMap's files in inputs/, its environment (JOB_COMPLETION_INDEX resolved from
// the pod's completion-index annotation, as the kubelet would) and the runner image's (tools,
// state dir). That produces variant quota-8's results, and only those.
func TestRenderJobIndexRunsLikeThePod(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster for one replay")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "spec.yaml"), []byte(runSpec("job", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	expFile := filepath.Join(src, "sweep.yaml")
	if err := os.WriteFile(expFile, []byte(jobSweep), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 12*time.Minute)
	defer cancel()
	rendered := filepath.Join(src, "job.yaml")
	out, err := cli(t, ctx, "", nil, "experiment", "render-job", expFile, "--results", "pvc:kueuelab-results", "--namespace", "e2e-render-job",
		"--image", "ghcr.io/kueuelab/kueuelab-runner:0.0.0-e2e", "--out", rendered)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kueuelab experiment merge DIR/e2e-job-sweep --out results/e2e-job-sweep") {
		t.Errorf("render-job does not say how to merge:\n%s", out)
	}
	b, err := os.ReadFile(rendered)
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	var job batchv1.Job
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("%d documents, want the comment, the ConfigMap and the Job", len(docs))
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &cm); err != nil {
		t.Fatalf("ConfigMap: %v", err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &job); err != nil {
		t.Fatalf("Job: %v", err)
	}
	setup(t, "e2e-render-job")
	for _, o := range []client.Object{cm.DeepCopy(), job.DeepCopy()} {
		if err := shared.client.Create(ctx, o, client.DryRunAll); err != nil {
			t.Errorf("the API server refuses the rendered %s: %v", o.GetObjectKind().GroupVersionKind().Kind, err)
		}
	}
	if *job.Spec.Completions != 2 || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("job: %d completions, mode %s", *job.Spec.Completions, *job.Spec.CompletionMode)
	}
	// Applied for real, the cluster's Job controller makes one pod per completion index. They
	// stay Pending (no kubelet, no PVC here); index 1's pod is what runs below.
	for _, o := range []client.Object{&cm, &job} {
		create(t, o)
	}
	pod := indexPod(t, ctx, &job, 1)
	var c corev1.Container
	for _, pc := range pod.Spec.Containers {
		if pc.Name == job.Spec.Template.Spec.Containers[0].Name {
			c = pc
		}
	}
	if c.Name == "" {
		t.Fatalf("pod %s has no container %s", pod.Name, job.Spec.Template.Spec.Containers[0].Name)
	}

	// The pod's file system: the working directory with inputs/ (the ConfigMap) and results/.
	work := t.TempDir()
	for _, m := range c.VolumeMounts {
		if m.Name == "inputs" {
			rel, err := filepath.Rel(c.WorkingDir, m.MountPath)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Fatalf("inputs at %s, outside the working directory %s", m.MountPath, c.WorkingDir)
			}
			if err := os.MkdirAll(filepath.Join(work, rel), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range cm.Data {
				if err := os.WriteFile(filepath.Join(work, rel, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(work, experiment.JobResultsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	// The pod's environment (the Job controller's JOB_COMPLETION_INDEX, from the pod's
	// annotation), then the runner image's: its tools and a state dir of its own.
	env := []string{tools.BinDirEnv + "=" + shared.state.BinDir, "XDG_STATE_HOME=" + filepath.Join(t.TempDir(), "state")}
	sawIndex := false
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var f string
			if e.ValueFrom.FieldRef != nil {
				f = e.ValueFrom.FieldRef.FieldPath
			}
			switch f {
			case "metadata.annotations['" + batchv1.JobCompletionIndexAnnotation + "']":
				v = pod.Annotations[batchv1.JobCompletionIndexAnnotation]
			case "metadata.labels['" + batchv1.JobCompletionIndexAnnotation + "']":
				v = pod.Labels[batchv1.JobCompletionIndexAnnotation]
			default:
				t.Fatalf("pod env %s from %+v: not resolvable here", e.Name, e.ValueFrom)
			}
		}
		sawIndex = sawIndex || e.Name == experiment.JobIndexEnv && v == "1"
		env = append(env, e.Name+"="+v)
	}
	if !sawIndex {
		t.Fatalf("pod %s: env %v lacks %s=1", pod.Name, c.Env, experiment.JobIndexEnv)
	}
	if _, err := cli(t, ctx, work, env, c.Args...); err != nil {
		t.Fatalf("index 1 as the pod runs it: %v", err)
	}
	outDir := filepath.Join(work, experiment.JobResultsDir, "e2e-job-sweep")
	m, ok := experiment.ReadDone(filepath.Join(outDir, "quota-8", "r0"))
	if !ok || m.Variant != "quota-8" {
		t.Fatalf("index 1: done marker %+v, want variant quota-8's", m)
	}
	if _, ok := experiment.ReadDone(filepath.Join(outDir, "quota-4", "r0")); ok {
		t.Errorf("index 1 also ran variant quota-4")
	}
	d, err := results.Load(filepath.Join(outDir, "quota-8", "r0"))
	if err != nil {
		t.Fatal(err)
	}
	all := d.Summary.Groups[0]
	if all.Workloads != 8 || all.Succeeded+all.Failed != 8 {
		t.Errorf("index 1: %d workloads, %d finished", all.Workloads, all.Succeeded+all.Failed)
	}
	spec, err := os.ReadFile(filepath.Join(outDir, "quota-8", experiment.SpecFile))
	if err != nil || !bytes.Contains(spec, []byte("nvidia.com/gpu: 8")) {
		t.Errorf("variant quota-8's cluster spec: %v\n%s", err, spec)
	}
}

// indexPod waits for the pod the Job controller creates for completion index i of job.
func indexPod(t *testing.T, ctx context.Context, job *batchv1.Job, i int) *corev1.Pod {
	t.Helper()
	var found *corev1.Pod
	indexes := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := shared.client.List(ctx, &pods, client.InNamespace(job.Namespace),
			client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
			return false, err
		}
		clear(indexes)
		for j := range pods.Items {
			idx := pods.Items[j].Annotations[batchv1.JobCompletionIndexAnnotation]
			indexes[idx] = true
			if idx == strconv.Itoa(i) {
				found = &pods.Items[j]
			}
		}
		return len(indexes) == int(*job.Spec.Completions), nil
	})
	if err != nil {
		t.Fatalf("Job %s: pods for indexes %v, want one for each of %d: %v", job.Name, indexes, *job.Spec.Completions, err)
	}
	return found
}
