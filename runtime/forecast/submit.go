package forecast

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/history"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

// Job is a job object of a -f manifest, to forecast as if submitted at the state's instant.
type Job struct {
	// File and Line say where it was read (Line: its document's first line).
	File string
	Line int
	// Kind, Namespace and Name name it; Queue is its kueue.x-k8s.io/queue-name label.
	Kind, Namespace, Name, Queue string
	obj                          client.Object
	root                         *yaml.Node
}

// Label is how the report and errors name the job: its file and name.
func (j *Job) Label() string { return j.File + "/" + j.Name }

// ReadJobs reads the job objects of manifest files, as kubectl apply -f would: one or more YAML
// documents a file, each a kind a Kueue job integration kueuelab runs covers, carrying Kueue's
// queue label. An object without a namespace gets namespace. Errors name the file, the line and
// the object.
func ReadJobs(files []string, namespace string) ([]*Job, error) {
	scheme, err := kueuelib.NewScheme()
	if err != nil {
		return nil, err
	}
	kinds, err := kueuelib.JobKinds()
	if err != nil {
		return nil, err
	}
	var jobs []*Job
	seen := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		js, err := parseJobs(f, data, namespace, scheme, kinds)
		if err != nil {
			return nil, err
		}
		for _, j := range js {
			key := j.Kind + " " + j.Namespace + "/" + j.Name
			if at, dup := seen[key]; dup {
				return nil, fielderr.New(j.File, j.Line, "", "%s is also in %s", key, at)
			}
			seen[key] = fmt.Sprintf("%s:%d", j.File, j.Line)
		}
		jobs = append(jobs, js...)
	}
	return jobs, nil
}

// parseJobs reads the job objects of one file's data; name is the file in errors.
func parseJobs(name string, data []byte, namespace string, scheme *runtime.Scheme, kinds []schema.GroupVersionKind) ([]*Job, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var jobs []*Job
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, yamldoc.Errors(name, err)
		}
		root := &doc
		if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
			root = root.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			continue // an empty document, as between two "---"
		}
		j, err := parseJob(name, root, namespace, scheme, kinds)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return nil, fielderr.New(name, 0, "", "no job object")
	}
	return jobs, nil
}

func parseJob(name string, root *yaml.Node, namespace string, scheme *runtime.Scheme, kinds []schema.GroupVersionKind) (*Job, error) {
	at := func(p ...any) int { return yamldoc.Line(root, p) }
	if root.Kind != yaml.MappingNode {
		return nil, fielderr.New(name, root.Line, "", "a manifest document is a Kubernetes object (apiVersion, kind, metadata, spec)")
	}
	var raw any
	if err := root.Decode(&raw); err != nil {
		return nil, yamldoc.Errors(name, err)
	}
	js, err := json.Marshal(raw)
	if err != nil {
		return nil, fielderr.New(name, root.Line, "", "not a Kubernetes object: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, fielderr.New(name, root.Line, "", "not a Kubernetes object: %v", err)
	}
	gvk := u.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, u.GetName())
	if !slices.Contains(kinds, gvk) {
		var names []string
		for _, k := range kinds {
			names = append(names, fmt.Sprintf("%s (%s)", k.Kind, k.GroupVersion()))
		}
		return nil, fielderr.New(name, at("kind"), "kind", "%s (%s): not a job kind Kueue's integrations in kueuelab build a Workload from; supported: %s",
			gvk.Kind, gvk.GroupVersion(), strings.Join(names, ", "))
	}
	if u.GetName() == "" {
		return nil, fielderr.New(name, at("metadata"), "metadata.name", "%s: missing (a forecast names the job by it)", gvk.Kind)
	}
	queue := u.GetLabels()[contract.KueueQueueLabel]
	if queue == "" {
		return nil, fielderr.New(name, at("metadata"), "metadata.labels", "%s: no %s label: Kueue queues only a job that names its LocalQueue", what, contract.KueueQueueLabel)
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(namespace)
	}
	typed, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, what, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, typed, true); err != nil {
		return nil, fielderr.New(name, root.Line, "", "%s: %v", what, err)
	}
	scheme.Default(typed) // the defaults a job kind registers (MPIJob's)
	jobDefaults(typed)
	obj, ok := typed.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s: %s: %T is not an object", name, what, typed)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return &Job{File: name, Line: root.Line, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName(), Queue: queue, obj: obj, root: root}, nil
}

// submit adds jobs to the input as pending workloads created at the state's instant: each job's
// Workload built by Kueue's own job integration (its pod sets and its priority, from the spec's
// WorkloadPriorityClasses), then a trace workload as a snapshot makes one of a live Workload
// (history.Live), its work left known when the pod template carries kueuelab.io/duration-sec. It
// returns each one's Job.Label by workload id. With gpus > 0 each job is resized to that many GPUs
// first (resize), and resized says how, by workload id.
func (in *input) submit(jobs []*Job, gpus int) (out, resized map[string]string, err error) {
	out, resized = map[string]string{}, map[string]string{}
	if len(jobs) == 0 {
		return out, resized, nil
	}
	scheme, err := kueuelib.NewScheme()
	if err != nil {
		return nil, nil, err
	}
	objs, err := in.spec.Objects(rcluster.Options{OmitNodes: true})
	if err != nil {
		return nil, nil, err
	}
	st := kueuelib.NewStore(scheme)
	for _, o := range objs {
		if err := st.AddObject(o); err != nil {
			return nil, nil, fmt.Errorf("forecast: the state's cluster objects: %w", err)
		}
	}
	intents := map[int32]string{}
	var classes []string
	names := map[string]bool{}
	for _, c := range []struct {
		intent string
		pc     *rcluster.PriorityClass
	}{{trace.IntentPerformance, in.spec.PriorityClasses.Performance}, {trace.IntentStandard, in.spec.PriorityClasses.Standard}, {trace.IntentEco, in.spec.PriorityClasses.Eco}} {
		if c.pc != nil && c.pc.Value != nil {
			intents[*c.pc.Value] = c.intent
			classes = append(classes, fmt.Sprintf("%s (%d)", c.pc.Name, *c.pc.Value))
			names[c.pc.Name] = true
		}
	}
	now := in.st.NowSec
	items := make([]kueuewl.Summary, len(jobs))
	hows := make([]string, len(jobs))
	for i, j := range jobs {
		team, ok := snapshot.TeamOf(in.spec, j.Namespace, j.Queue)
		if !ok {
			var qs []string
			for _, t := range in.spec.Teams {
				qs = append(qs, t.Name+"/"+t.LocalQueue)
			}
			return nil, nil, fielderr.New(j.File, yamldoc.Line(j.root, yamldoc.Path{"metadata", "labels", contract.KueueQueueLabel}), "metadata.labels",
				"%s %s: LocalQueue %s/%s is not in the state's cluster spec %s (its LocalQueues: %s)", j.Kind, j.Name, j.Namespace, j.Queue, in.st.Cluster, strings.Join(qs, ", "))
		}
		if c := j.obj.GetLabels()[contract.KueuePriorityClassLabel]; c != "" && !names[c] {
			return nil, nil, fielderr.New(j.File, yamldoc.Line(j.root, yamldoc.Path{"metadata", "labels", contract.KueuePriorityClassLabel}), "metadata.labels",
				"%s %s: WorkloadPriorityClass %q is not in the state's cluster spec (its classes: %s)", j.Kind, j.Name, c, strings.Join(classes, ", "))
		}
		wl, err := kueuelib.WorkloadForJob(st, j.obj, metav1.Time{})
		if err != nil {
			return nil, nil, fielderr.New(j.File, j.Line, "", "%v", err)
		}
		s := kueuewl.Summarize(wl)
		for _, ps := range s.PodSets {
			if ps.Count < 1 {
				return nil, nil, fielderr.New(j.File, j.Line, "", "%s %s: pod set %s has no pods: give its replicas or parallelism (the API server's defaults are not applied here)", j.Kind, j.Name, ps.Name)
			}
		}
		prio := priorityOf(&s)
		if _, ok := intents[prio]; !ok {
			return nil, nil, fielderr.New(j.File, j.Line, "", "%s %s: priority %d (class %q) is none of the state's priority classes %s, which the sim runs every workload at: label it %s with one of them",
				j.Kind, j.Name, prio, s.Priority, strings.Join(classes, ", "), contract.KueuePriorityClassLabel)
		}
		s.Namespace = team
		if gpus > 0 {
			if hows[i], err = resize(&s, gpus); err != nil {
				return nil, nil, fielderr.New(j.File, j.Line, "", "%s %s: --alt-gpus %d: %v", j.Kind, j.Name, gpus, err)
			}
		}
		items[i] = s
	}
	// The same path as a snapshot's live Workloads: Live's shapes, families and ids.
	res, ids, err := history.Live(items, history.LiveOptions{
		Submit: func(*kueuewl.Summary) float64 { return now },
		Duration: func(s *kueuewl.Summary) float64 {
			if d, ok := history.DurationOf(s); ok {
				return d
			}
			return snapshot.PlaceholderDurationSec
		},
		Intent: func(s *kueuewl.Summary) string { return intents[priorityOf(s)] },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("forecast: -f jobs: %w", err)
	}
	for i, id := range ids {
		j := jobs[i]
		if in.byID[id] != nil || in.st.Find(id) != nil {
			return nil, nil, fielderr.New(j.File, j.Line, "", "%s %s: its workload %s is already in the state (submitted already?)", j.Kind, j.Name, id)
		}
		w := state.Workload{ID: id, Phase: state.Pending, CreatedSec: now}
		if d, ok := history.DurationOf(&items[i]); ok {
			w.RemainingSec = &d
		}
		in.st.Workloads = append(in.st.Workloads, w)
		out[id] = j.Label()
		if gpus > 0 {
			resized[id] = hows[i]
		}
	}
	if in.tr.Jobs == nil {
		in.tr.Jobs = map[string][]*trace.Job{}
	}
	for _, w := range res.Workloads {
		in.tr.Workloads = append(in.tr.Workloads, w)
		in.tr.Jobs[w.WorkloadID] = res.Jobs[w.WorkloadID]
		in.byID[w.WorkloadID] = w
	}
	slices.SortStableFunc(in.tr.Workloads, func(a, b *trace.Workload) int {
		return cmp.Or(cmp.Compare(a.SubmitTimeOffsetSec, b.SubmitTimeOffsetSec), cmp.Compare(a.WorkloadID, b.WorkloadID))
	})
	return out, resized, nil
}

// resize makes job s ask for gpus GPUs in all: its GPU pod set's pods where gpus is a multiple of
// a pod's GPUs, else each pod's GPUs where it is a multiple of the pods. Its work stays the same:
// the duration its template gives is scaled by the GPUs it had over gpus (a job on half the GPUs
// takes twice as long: linear scaling, the optimistic case). It returns what changed.
func resize(s *kueuewl.Summary, gpus int) (string, error) {
	var set *kueuewl.PodSet
	var ctr *corev1.Container
	var res corev1.ResourceName
	for i := range s.PodSets {
		ps := &s.PodSets[i]
		for j := range ps.Template.Spec.Containers {
			c := &ps.Template.Spec.Containers[j]
			for _, r := range []corev1.ResourceName{trace.ResourceGPU, "amd.com/gpu"} {
				if q, ok := c.Resources.Requests[r]; ok && q.Value() > 0 {
					if set != nil {
						return "", fmt.Errorf("GPUs in more than one pod set or container (%s, %s): say which to resize by submitting the sizes as manifests", set.Name, ps.Name)
					}
					set, ctr, res = ps, c, r
				}
			}
		}
	}
	if set == nil {
		return "", errors.New("the job asks for no GPUs")
	}
	q := ctr.Resources.Requests[res]
	per, pods := int(q.Value()), set.Count
	had := per * pods
	var how string
	switch {
	case gpus%per == 0:
		set.Count = gpus / per
		how = fmt.Sprintf("pod set %s: %d → %d pods of %d GPUs", set.Name, pods, set.Count, per)
	case gpus%pods == 0:
		v := resource.MustParse(strconv.Itoa(gpus / pods))
		ctr.Resources.Requests[res] = v
		if _, ok := ctr.Resources.Limits[res]; ok {
			ctr.Resources.Limits[res] = v
		}
		how = fmt.Sprintf("pod set %s: %d pods of %d → %d GPUs", set.Name, pods, per, gpus/pods)
	default:
		return "", fmt.Errorf("%d GPUs is a multiple of neither a pod's %d GPUs nor the %d pods of pod set %s", gpus, per, pods, set.Name)
	}
	for i := range s.PodSets {
		a := s.PodSets[i].Template.Annotations
		if v, ok := a[contract.DurationSec]; ok {
			if d, err := strconv.ParseFloat(v, 64); err == nil {
				a[contract.DurationSec] = strconv.FormatFloat(d*float64(had)/float64(gpus), 'f', -1, 64)
			}
		}
	}
	return how, nil
}

// jobDefaults sets what the API server defaults in a batch Job and Kueue's Job integration reads
// as set (Kubernetes' SetDefaults_Job: parallelism, and completions with it).
func jobDefaults(obj runtime.Object) {
	j, ok := obj.(*batchv1.Job)
	if !ok {
		return
	}
	if j.Spec.Completions == nil && j.Spec.Parallelism == nil {
		j.Spec.Completions = new(int32(1))
	}
	if j.Spec.Parallelism == nil {
		j.Spec.Parallelism = new(int32(1))
	}
}

// priorityOf is a Workload's priority as Kueue orders it (none is 0).
func priorityOf(s *kueuewl.Summary) int32 {
	if s.PriorityValue == nil {
		return 0
	}
	return *s.PriorityValue
}
