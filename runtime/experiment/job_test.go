package experiment

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/render/validate"
	"github.com/kueuelab/kueuelab/runtime/replay"
)

func TestRenderJob(t *testing.T) {
	e, err := Load("../../examples/experiments/quota-sweep.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderJob(e, JobOptions{Image: "ghcr.io/kueuelab/kueuelab-runner:1.0", Results: "pvc:shared/sweeps", Repeats: 2, Parallelism: 4})
	if err != nil {
		t.Fatal(err)
	}
	j := b.Job
	// The Job as the API server would decode it: strict, every field known to batch/v1.
	y, err := yaml.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	var back batchv1.Job
	if err := yaml.UnmarshalStrict(y, &back); err != nil {
		t.Fatalf("rendered Job does not decode strictly as batch/v1: %v", err)
	}
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(j); err != nil {
		t.Errorf("rendered Job: %v", err)
	}
	s := j.Spec
	if *s.CompletionMode != batchv1.IndexedCompletion || *s.Completions != 6 || *s.Parallelism != 4 || *s.BackoffLimitPerIndex != 1 {
		t.Errorf("spec: mode %s completions %d parallelism %d backoff per index %d", *s.CompletionMode, *s.Completions, *s.Parallelism, *s.BackoffLimitPerIndex)
	}
	c := s.Template.Spec.Containers[0]
	want := []string{"experiment", "run", "inputs/experiment.yaml", "--out", "results/quota-sweep", "--index-from-env", "JOB_COMPLETION_INDEX", "--repeats", "2"}
	if !slices.Equal(c.Args, want) || c.WorkingDir != JobWorkDir || c.Image != "ghcr.io/kueuelab/kueuelab-runner:1.0" {
		t.Errorf("container: args %q workdir %q image %q", c.Args, c.WorkingDir, c.Image)
	}
	if c.Resources.Requests.Cpu().String() != "2" || c.Resources.Requests.Memory().String() != "3Gi" || c.Resources.Limits.Memory().String() != "6Gi" {
		t.Errorf("resources %v", c.Resources)
	}
	vols := map[string]bool{}
	for _, vol := range s.Template.Spec.Volumes {
		vols[vol.Name] = true
		if vol.Name == "results" && (vol.PersistentVolumeClaim == nil || vol.PersistentVolumeClaim.ClaimName != "shared") {
			t.Errorf("results volume %+v", vol)
		}
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "results" && (m.MountPath != "/work/results" || m.SubPath != "sweeps") {
			t.Errorf("results mount %+v", m)
		}
	}
	if !vols["inputs"] || !vols["scratch"] || !vols["results"] {
		t.Errorf("volumes %v", vols)
	}
	if !strings.Contains(b.Collect, "kueuelab experiment merge DIR/quota-sweep --out results/quota-sweep && kueuelab report results/quota-sweep") {
		t.Errorf("collect:\n%s", b.Collect)
	}

	// The file kubectl applies: the comment, then the two objects, strict, without empty status.
	doc, err := b.YAML()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(doc), "\n---\n")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "# kueuelab experiment quota-sweep as an Indexed Job: 6 pods") ||
		strings.Contains(string(doc), "status:") || strings.Contains(string(doc), "creationTimestamp") {
		t.Errorf("YAML:\n%s", doc)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(parts[1]), &cm); err != nil || cm.Name != "quota-sweep-inputs" {
		t.Errorf("ConfigMap document: %v", err)
	}
	if err := yaml.UnmarshalStrict([]byte(parts[2]), &back); err != nil || back.Name != "quota-sweep" {
		t.Errorf("Job document: %v", err)
	}

	// The inputs, written out as the pod sees them, load as the same experiment.
	dir := t.TempDir()
	for name, data := range b.ConfigMap.Data {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pe, err := Load(filepath.Join(dir, "experiment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if pe.Cluster != "cluster.yaml" || len(pe.Variants) != 3 || pe.Generator.Jobs != 150 {
		t.Errorf("pod's experiment: cluster %q, %d variants", pe.Cluster, len(pe.Variants))
	}
	for i := range pe.Variants {
		ps, _, err := pe.Spec(&pe.Variants[i])
		if err != nil {
			t.Fatal(err)
		}
		hs, _, err := e.Spec(&e.Variants[i])
		if err != nil {
			t.Fatal(err)
		}
		py, _ := yaml.Marshal(ps)
		hy, _ := yaml.Marshal(hs)
		if string(py) != string(hy) {
			t.Errorf("variant %s: the pod's cluster spec differs from the workstation's", pe.Variants[i].Name)
		}
	}
}

func TestRenderJobResults(t *testing.T) {
	e, err := Load("../../examples/experiments/quota-sweep.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := RenderJob(e, JobOptions{Image: "x:1", Results: "gs://my-bucket/kueuelab/runs/", ServiceAccount: "sweeper"})
	if err != nil {
		t.Fatal(err)
	}
	spec := b.Job.Spec.Template
	var csi map[string]string
	for _, v := range spec.Spec.Volumes {
		if v.Name == "results" && v.CSI != nil && v.CSI.Driver == "gcsfuse.csi.storage.gke.io" {
			csi = v.CSI.VolumeAttributes
		}
	}
	if csi["bucketName"] != "my-bucket" || !strings.Contains(csi["mountOptions"], "only-dir=kueuelab/runs") ||
		spec.Annotations["gke-gcsfuse/volumes"] != "true" || spec.Spec.ServiceAccountName != "sweeper" {
		t.Errorf("gs:// results: volume %v, annotations %v, service account %q", csi, spec.Annotations, spec.Spec.ServiceAccountName)
	}
	b, err = RenderJob(e, JobOptions{Image: "x:1", Results: "hostpath:/srv/kueuelab/", NodeSelector: map[string]string{"pool": "cpu"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}})
	if err != nil {
		t.Fatal(err)
	}
	spec = b.Job.Spec.Template
	var hp *corev1.HostPathVolumeSource
	for _, v := range spec.Spec.Volumes {
		if v.Name == "results" {
			hp = v.HostPath
		}
	}
	if hp == nil || hp.Path != "/srv/kueuelab" || hp.Type == nil || *hp.Type != corev1.HostPathDirectory ||
		spec.Spec.NodeSelector["pool"] != "cpu" || len(spec.Spec.Tolerations) != 1 || !strings.Contains(b.Collect, "merge /srv/kueuelab/quota-sweep") {
		t.Errorf("hostpath: results: volume %+v, node selector %v, tolerations %v, collect:\n%s", hp, spec.Spec.NodeSelector, spec.Spec.Tolerations, b.Collect)
	}
	for _, bad := range []string{"", "s3://b/p", "pvc:Bad_Claim", "gs://", "hostpath:relative", "hostpath:/"} {
		if _, err := RenderJob(e, JobOptions{Image: "x:1", Results: bad}); err == nil {
			t.Errorf("--results %q: no error", bad)
		}
	}
}

func TestMerge(t *testing.T) {
	e, out := twoByTwo(t)
	fake := func(_ context.Context, j *job) (*replay.Result, error) { return &replay.Result{}, nil }
	// Two shards, as two pods wrote them to different places: indexes 0 and 3.
	shardA, shardB := filepath.Join(out, "a"), filepath.Join(out, "b")
	for dir, idx := range map[string]int{shardA: 0, shardB: 3} {
		if _, err := Run(t.Context(), e, Options{OutDir: dir, Index: &idx, exec: fake}); err != nil {
			t.Fatal(err)
		}
	}
	dst := filepath.Join(out, "merged")
	missing, err := Merge(dst, []string{shardA, shardB}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(missing, "; ") != "index 1 (variant a repeat 1); index 2 (variant b repeat 0)" {
		t.Errorf("missing %q", missing)
	}
	for _, rel := range []string{"a/r0", "b/r1"} {
		if _, ok := ReadDone(filepath.Join(dst, rel)); !ok {
			t.Errorf("%s not merged", rel)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, ManifestFile)); err != nil {
		t.Error(err)
	}
	// The missing ones run later into a third place; merging again completes the tree.
	shardC := filepath.Join(out, "c")
	for _, idx := range []int{1, 2} {
		if _, err := Run(t.Context(), e, Options{OutDir: shardC, Index: &idx, exec: fake}); err != nil {
			t.Fatal(err)
		}
	}
	if missing, err = Merge(dst, []string{shardC}, nil); err != nil || len(missing) != 0 {
		t.Errorf("second merge: missing %v, %v", missing, err)
	}
	other, _ := twoByTwo(t)
	other.Metadata.Name = "other"
	if _, err := Run(t.Context(), other, Options{OutDir: filepath.Join(out, "o"), exec: fake}); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(dst, []string{shardA, filepath.Join(out, "o")}, nil); err == nil || !strings.Contains(err.Error(), "not the same experiment") {
		t.Errorf("merging two experiments: %v", err)
	}
}
