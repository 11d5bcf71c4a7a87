package experiment

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	sigsyaml "sigs.k8s.io/yaml"
)

// The layout of a runner pod of `experiment render-job`: the experiment's inputs (a ConfigMap) and
// the results volume under one working directory, so the pod's command names relative paths and
// the same command runs a completion index on a workstation.
const (
	JobWorkDir    = "/work"
	JobInputsDir  = "inputs"
	JobResultsDir = "results"
	// JobIndexEnv is the variable the Job controller sets to the pod's completion index.
	JobIndexEnv = "JOB_COMPLETION_INDEX"
	// Input file names in the ConfigMap.
	jobExperimentFile = "experiment.yaml"
	// configMapLimit is what a ConfigMap may hold (the API server refuses more than 1 MiB).
	configMapLimit = 1 << 20
)

// JobOptions configure RenderJob.
type JobOptions struct {
	// Name names the Job and its inputs ConfigMap (default: the experiment's name).
	Name      string
	Namespace string
	// Image is the runner image (runtime/image.RunnerRepository:<version>).
	Image string
	// Results is where the pods write: "pvc:CLAIM" or "pvc:CLAIM/SUBDIR" (a ReadWriteMany claim:
	// the pods run at once), or "gs://BUCKET" / "gs://BUCKET/PREFIX" (Cloud Storage through GKE's
	// Cloud Storage FUSE CSI driver; the pod's service account needs write access to the bucket),
	// or "hostpath:/DIR" (a directory on the node, writable by the runner's user 65532: a
	// one-node cluster, or kind with the directory mounted into its node).
	Results string
	// NodeSelector and Tolerations place the pods (e.g. on nodes with room for a control plane).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Repeats overrides the experiment's repeats when > 0.
	Repeats int
	// Parallelism is how many pods run at once (0: all).
	Parallelism int
	// CPU and Memory are each pod's requests (default 2 and 3Gi: one replay's control plane and
	// runner); MemoryLimit its limit (default 6Gi).
	CPU, Memory, MemoryLimit string
	// ServiceAccount runs the pods (gs:// needs one with access to the bucket).
	ServiceAccount string
	// Retries is each index's backoff limit (default 1).
	Retries int32
}

// JobBundle is what RenderJob makes: the inputs ConfigMap, the Indexed Job, and how to collect
// the results.
type JobBundle struct {
	ConfigMap *corev1.ConfigMap
	Job       *batchv1.Job
	// Command is the container's command line (without the image's entrypoint); Env the
	// variables the pod sets besides JOB_COMPLETION_INDEX.
	Command []string
	// OutDir is the experiment's output directory relative to the working directory.
	OutDir string
	// Inputs are the ConfigMap's files (name → content), as the pod sees them in inputs/.
	Inputs map[string][]byte
	// Collect says how to fetch the results and merge them into one report.
	Collect string
}

// RenderJob renders the experiment as a Kubernetes Indexed Job: completion index i runs run i of
// the experiment (variant i ÷ repeats, repeat i mod repeats) on its own local cluster inside the
// pod, and writes <results>/<name>/<variant>/r<k>/, the layout `experiment run` writes.
func RenderJob(e *Experiment, o JobOptions) (*JobBundle, error) {
	if o.Name == "" {
		o.Name = e.Metadata.Name
	}
	for _, msg := range validation.IsDNS1123Label(o.Name) {
		return nil, fmt.Errorf("job name %q: %s (set metadata.name or --name)", o.Name, msg)
	}
	if o.Image == "" {
		return nil, fmt.Errorf("no runner image")
	}
	if o.CPU == "" {
		o.CPU = "2"
	}
	if o.Memory == "" {
		o.Memory = "3Gi"
	}
	if o.MemoryLimit == "" {
		o.MemoryLimit = "6Gi"
	}
	if o.Retries == 0 {
		o.Retries = 1
	}
	res := corev1.ResourceList{}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceCPU: o.CPU, corev1.ResourceMemory: o.Memory} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, fmt.Errorf("%s request %q: %w", name, v, err)
		}
		res[name] = q
	}
	limit, err := resource.ParseQuantity(o.MemoryLimit)
	if err != nil {
		return nil, fmt.Errorf("memory limit %q: %w", o.MemoryLimit, err)
	}
	repeats := e.Repeats
	if o.Repeats > 0 {
		repeats = o.Repeats
	}
	completions := int32(len(e.Variants) * repeats)
	parallelism := completions
	if o.Parallelism > 0 && int32(o.Parallelism) < completions {
		parallelism = int32(o.Parallelism)
	}
	inputs, err := jobInputs(e)
	if err != nil {
		return nil, err
	}
	size := 0
	for _, b := range inputs {
		size += len(b)
	}
	if size > configMapLimit-4096 {
		return nil, fmt.Errorf("the experiment's inputs are %.1f MiB, more than a ConfigMap holds (1 MiB): compress the trace (trace.jsonl.gz), or use a generator", float64(size)/(1<<20))
	}
	resultsVol, mount, collect, annotations, err := resultsVolume(o.Results, o.Name)
	if err != nil {
		return nil, err
	}
	outDir := path.Join(JobResultsDir, o.Name)
	cmd := []string{"experiment", "run", path.Join(JobInputsDir, jobExperimentFile), "--out", outDir, "--index-from-env", JobIndexEnv}
	if o.Repeats > 0 {
		cmd = append(cmd, "--repeats", strconv.Itoa(o.Repeats))
	}
	labels := map[string]string{"app.kubernetes.io/name": "kueuelab-runner", "app.kubernetes.io/instance": o.Name}
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name + "-inputs", Namespace: o.Namespace, Labels: labels},
		Data:       map[string]string{}, BinaryData: map[string][]byte{}}
	for name, b := range inputs {
		if strings.HasSuffix(name, ".gz") {
			cm.BinaryData[name] = b
		} else {
			cm.Data[name] = string(b)
		}
	}
	if len(cm.BinaryData) == 0 {
		cm.BinaryData = nil
	}
	uid := int64(65532) // the runner image's non-root user
	job := &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			CompletionMode:       ptr.To(batchv1.IndexedCompletion),
			Completions:          ptr.To(completions),
			Parallelism:          ptr.To(parallelism),
			BackoffLimitPerIndex: ptr.To(o.Retries),
			// Every index runs even when another failed: a failed variant is rerun on its own.
			MaxFailedIndexes: ptr.To(completions),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: o.ServiceAccount,
					NodeSelector:       o.NodeSelector,
					Tolerations:        o.Tolerations,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "runner", Image: o.Image, Args: cmd, WorkingDir: JobWorkDir,
						Resources: corev1.ResourceRequirements{Requests: res, Limits: corev1.ResourceList{corev1.ResourceMemory: limit}},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "inputs", MountPath: path.Join(JobWorkDir, JobInputsDir), ReadOnly: true},
							mount,
							// The local cluster's state (etcd data, logs) and caches: the image's
							// XDG_STATE_HOME and XDG_CACHE_HOME are under /tmp.
							{Name: "scratch", MountPath: "/tmp"},
						},
					}},
					Volumes: []corev1.Volume{
						{Name: "inputs", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}},
						resultsVol,
						{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("8Gi"))}}},
					},
				},
			},
		},
	}
	return &JobBundle{ConfigMap: cm, Job: job, Command: cmd, OutDir: outDir, Inputs: inputs,
		Collect: fmt.Sprintf(collect, outDir, o.Name)}, nil
}

// resultsVolume is the volume the results go to, its mount (JobWorkDir/results), the pod
// annotations it needs, and how to collect the results afterwards (a format with the output
// directory and the name).
func resultsVolume(spec, name string) (corev1.Volume, corev1.VolumeMount, string, map[string]string, error) {
	mount := corev1.VolumeMount{Name: "results", MountPath: path.Join(JobWorkDir, JobResultsDir)}
	merge := "  kueuelab experiment merge DIR/%[2]s --out results/%[2]s && kueuelab report results/%[2]s --out %[2]s.html\n"
	switch {
	case strings.HasPrefix(spec, "pvc:"):
		claim, sub, _ := strings.Cut(strings.TrimPrefix(spec, "pvc:"), "/")
		if msgs := validation.IsDNS1123Subdomain(claim); len(msgs) > 0 {
			return corev1.Volume{}, mount, "", nil, fmt.Errorf("--results %q: claim name: %s", spec, strings.Join(msgs, "; "))
		}
		mount.SubPath = sub
		where := "the claim " + claim
		if sub != "" {
			where += ", directory " + sub
		}
		return corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}},
			mount, "# results: %[1]s in " + where + " (a ReadWriteMany claim: the pods run at once).\n" +
				"# when the Job has completed (kubectl wait --for=condition=Complete job/%[2]s), copy %[2]s from the claim to DIR\n" +
				"# (e.g. kubectl cp from a pod mounting it), then merge and report:\n#" + merge, nil, nil
	case strings.HasPrefix(spec, "gs://"):
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(spec, "gs://"), "/")
		if bucket == "" {
			return corev1.Volume{}, mount, "", nil, fmt.Errorf("--results %q: no bucket", spec)
		}
		opts := "implicit-dirs,uid=65532,gid=65532,file-mode=664,dir-mode=775"
		if prefix = strings.Trim(prefix, "/"); prefix != "" {
			opts += ",only-dir=" + prefix
		}
		return corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "gcsfuse.csi.storage.gke.io", VolumeAttributes: map[string]string{"bucketName": bucket, "mountOptions": opts}}}},
			mount, "# results: " + strings.TrimSuffix(spec, "/") + "/%[2]s (GKE Cloud Storage FUSE CSI driver).\n" +
				"# when the Job has completed: gcloud storage cp -r " + strings.TrimSuffix(spec, "/") + "/%[2]s DIR/, then merge and report:\n#" + merge,
			map[string]string{"gke-gcsfuse/volumes": "true"}, nil
	case strings.HasPrefix(spec, "hostpath:"):
		dir := path.Clean(strings.TrimPrefix(spec, "hostpath:"))
		if !path.IsAbs(dir) || dir == "/" {
			return corev1.Volume{}, mount, "", nil, fmt.Errorf("--results %q: want an absolute directory other than /", spec)
		}
		return corev1.Volume{Name: "results", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}},
			mount, "# results: " + dir + "/%[2]s on the node that ran each pod (the directory must exist there, writable by uid 65532).\n" +
				"# when the Job has completed, merge and report:\n#" + strings.ReplaceAll(merge, "DIR/", dir+"/"), nil, nil
	}
	return corev1.Volume{}, mount, "", nil, fmt.Errorf("--results %q: want pvc:CLAIM[/DIR], gs://BUCKET[/PREFIX] or hostpath:/DIR", spec)
}

// jobInputs are the files the pod needs: the experiment file with its paths rewritten to the
// ConfigMap's file names, the base cluster spec, and the trace or the generator's profile.
func jobInputs(e *Experiment) (map[string][]byte, error) {
	raw, err := os.ReadFile(e.file)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", e.file, err)
	}
	files := map[string][]byte{}
	add := func(keyPath []string, src, name string) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", e.file, strings.Join(keyPath, "."), err)
		}
		files[name] = b
		n := mappingValue(doc.Content[0], keyPath...)
		if n == nil {
			return fmt.Errorf("%s: %s not found", e.file, strings.Join(keyPath, "."))
		}
		n.Value, n.Style = name, 0
		return nil
	}
	if err := add([]string{"cluster"}, e.ClusterPath(), "cluster.yaml"); err != nil {
		return nil, err
	}
	if e.Trace != "" {
		name := "trace.jsonl"
		if strings.HasSuffix(e.Trace, ".gz") {
			name += ".gz"
		}
		if err := add([]string{"trace"}, e.path(e.Trace), name); err != nil {
			return nil, err
		}
	}
	if g := e.Generator; g != nil && g.Profile != "" {
		if err := add([]string{"generator", "profile"}, e.path(g.Profile), "profile"+filepath.Ext(g.Profile)); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	files[jobExperimentFile] = buf.Bytes()
	return files, nil
}

// mappingValue returns the value node at the key path of a mapping node, nil when absent.
func mappingValue(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

// YAML is the bundle as one file for kubectl apply: a comment saying what it is and how to collect
// the results, then the ConfigMap and the Job (without the empty status and creation timestamps the
// typed objects marshal).
func (b *JobBundle) YAML() ([]byte, error) {
	var doc bytes.Buffer
	c := b.Job.Spec.Template.Spec.Containers[0]
	fmt.Fprintf(&doc, "# kueuelab experiment %s as an Indexed Job: %d pods (one per variant × repeat), %d at once, image %s.\n%s",
		b.Job.Name, *b.Job.Spec.Completions, *b.Job.Spec.Parallelism, c.Image, b.Collect)
	for _, obj := range []any{b.ConfigMap, b.Job} {
		y, err := sigsyaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := sigsyaml.Unmarshal(y, &m); err != nil {
			return nil, err
		}
		delete(m, "status")
		for _, md := range []any{m["metadata"], nested(m, "spec", "template", "metadata")} {
			if md, ok := md.(map[string]any); ok {
				delete(md, "creationTimestamp")
			}
		}
		if y, err = sigsyaml.Marshal(m); err != nil {
			return nil, err
		}
		doc.WriteString("---\n")
		doc.Write(y)
	}
	return doc.Bytes(), nil
}

// nested returns m[k0][k1]... (nil when a level is missing).
func nested(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
