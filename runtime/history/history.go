// Package history reads what a cluster ran, from its Kueue Workloads and the jobs that own them,
// into a kueuelab trace that replays it: one logical workload per Kueue Workload (or per kueuelab
// workload id, which groups an HPO experiment's trial Jobs), its pod sets as pod groups with
// their requests, its queue's namespace, its priority as intent, its creation as the submit time
// and its run (admission to Finished) as the duration.
//
// Pods rendered by kueuelab carry the render contract (package render/contract): their family,
// role and profile are taken from it. Other workloads get their family by model/importer's rules
// (GPU pods, duration, a "ps" pod set) and their roles from the pod set names.
package history

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/importer"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// Options tune an import.
type Options struct {
	// Since keeps the Workloads created within Since before Now (0: all).
	Since time.Duration
	// TimeScale is trace seconds per cluster second (0: 1). A kueuelab replay at speedup S is read
	// back with S, so that the trace has the replayed trace's times.
	TimeScale float64
	// Now is the clock Since counts back from (nil: time.Now).
	Now func() time.Time
	// Namespaces limits the import to these namespaces (empty: all).
	Namespaces []string
}

// Read lists the Workloads of the cluster (through the Kueue adapter, in whichever API version the
// cluster serves) with the creation time of their owners as Created. c's scheme needs
// kueuewl.AddToScheme (runtime/cluster.Scheme has it).
func Read(ctx context.Context, c client.Reader, opts Options) ([]kueuewl.Summary, error) {
	var items []kueuewl.Summary
	for _, ns := range namespacesOf(opts) {
		wls, err := kueuewl.ListWorkloads(ctx, c, ns)
		if err != nil {
			return nil, err
		}
		items = append(items, wls...)
	}
	// The owning job's creation is the submission; a Workload is created a moment later.
	for i := range items {
		it := &items[i]
		if it.OwnerKind == "" {
			continue
		}
		if owner, ok := ownerOf(ctx, c, it); ok {
			it.Created = owner
		}
	}
	return items, nil
}

func namespacesOf(opts Options) []string {
	if len(opts.Namespaces) == 0 {
		return []string{""}
	}
	return opts.Namespaces
}

// ownerAPIs are the API versions of the job kinds Kueue integrates, for the owner lookup.
var ownerAPIs = map[string]string{
	"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2", "MPIJob": "kubeflow.org/v2beta1",
	"PyTorchJob": "kubeflow.org/v1", "TFJob": "kubeflow.org/v1", "TrainJob": "trainer.kubeflow.org/v1alpha1",
	"RayJob": "ray.io/v1", "RayCluster": "ray.io/v1", "Pod": "v1",
}

func ownerOf(ctx context.Context, c client.Reader, it *kueuewl.Summary) (time.Time, bool) {
	api, ok := ownerAPIs[it.OwnerKind]
	if !ok {
		return time.Time{}, false
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(api, it.OwnerKind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: it.Namespace, Name: it.OwnerName}, u); err != nil {
		return time.Time{}, false // deleted since, or a kind this cluster does not serve: keep the Workload's time
	}
	return u.GetCreationTimestamp().Time, true
}

// Build turns the Workloads into a trace. Workloads that did not finish (still queued or
// running, or created before Since) are left out and counted in the result's NotRun.
func Build(items []kueuewl.Summary, opts Options) (*importer.Result, error) {
	scale := opts.TimeScale
	if scale == 0 {
		scale = 1
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("time scale %g: must be a positive number", scale)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	notRun := map[string]int{}
	groups := map[string]*group{}
	var order []string
	for i := range items {
		it := &items[i]
		if opts.Since > 0 && it.Created.Before(now().Add(-opts.Since)) {
			notRun["created before --since"]++
			continue
		}
		switch {
		case it.Admitted == nil && it.Finished == nil:
			notRun["never admitted"]++
			continue
		case it.Finished == nil:
			notRun["not finished"]++
			continue
		}
		key, id := identity(it)
		g := groups[key]
		if g == nil {
			g = &group{id: id}
			groups[key] = g
			order = append(order, key)
		}
		g.items = append(g.items, it)
	}
	var jobs []*importer.Job
	for _, key := range order {
		g := groups[key]
		var dur float64
		for _, it := range g.items {
			run := it.Finished.Sub(*cmp.Or(it.Admitted, &it.Created)).Seconds()
			dur = math.Max(dur, run*scale)
		}
		// Kueue's timestamps have one-second resolution: a run shorter than that still ran.
		jobs = append(jobs, g.job(seconds(g.first().Created)*scale, math.Max(dur, scale)))
	}
	return importer.Build(jobs, notRun, importer.Options{})
}

// identity is the key that groups a Workload into its logical workload and that workload's trace
// id: its owner (a Job, an MPIJob, ...), else the Workload; for kueuelab's objects the workload id
// they carry, which groups an HPO experiment's trial Jobs into one.
func identity(it *kueuewl.Summary) (key, id string) {
	key, id = it.Namespace+"/"+it.OwnerKind+"/"+it.OwnerName, it.Namespace+"-"+strings.ToLower(it.OwnerKind)+"-"+it.OwnerName
	if it.OwnerKind == "" {
		key, id = it.Namespace+"/Workload/"+it.Name, it.Namespace+"-"+it.Name
	}
	if c := contractOf(it); c != nil {
		key, id = it.Namespace+"/"+c.WorkloadID, c.WorkloadID
	}
	return key, id
}

// WorkloadID is the trace workload id Build gives the logical workload a Workload belongs to.
func WorkloadID(it *kueuewl.Summary) string {
	_, id := identity(it)
	return id
}

// LiveOptions say how Live places a live Workload in time and class.
type LiveOptions struct {
	// Submit is the Workload's creation in trace seconds; Duration its duration (the caller's
	// placeholder when unknown); Intent its intent class ("" standard).
	Submit, Duration func(*kueuewl.Summary) float64
	Intent           func(*kueuewl.Summary) string
}

// Live builds the trace of live Workloads, one trace workload per Workload (its shape, family and
// id as Build gives a finished one), in the order of items, submitted at opts.Submit on the
// caller's clock; ids[i] is items[i]'s workload id. An
// HPO experiment's live trials, which share a workload id, are one workload each,
// "<id>-<Workload name>": each is pending or admitted on its own.
func Live(items []kueuewl.Summary, opts LiveOptions) (res *importer.Result, ids []string, err error) {
	count := map[string]int{}
	for i := range items {
		_, id := identity(&items[i])
		count[id]++
	}
	jobs := make([]*importer.Job, 0, len(items))
	for i := range items {
		it := &items[i]
		_, id := identity(it)
		if count[id] > 1 {
			id += "-" + it.Name
		}
		g := &group{id: id, items: []*kueuewl.Summary{it}}
		j := g.job(opts.Submit(it), opts.Duration(it))
		j.Intent = opts.Intent(it)
		jobs = append(jobs, j)
		ids = append(ids, id)
	}
	if res, err = importer.Build(jobs, nil, importer.Options{}); err != nil {
		return nil, nil, err
	}
	// The importer counts submit offsets from the earliest; a live workload's is on the caller's
	// clock, which is not 0 at the first on a replay's clock or at a forecast's "now".
	submit := map[string]float64{}
	for i, id := range ids {
		submit[id] = jobs[i].Submit
	}
	for _, w := range res.Workloads {
		w.SubmitTimeOffsetSec = submit[w.WorkloadID]
		for _, j := range res.Jobs[w.WorkloadID] {
			j.SubmitTimeOffsetSec = w.SubmitTimeOffsetSec
		}
	}
	return res, ids, nil
}

// DurationOf is the duration a Workload's pods carry (kueuelab.io/duration-sec, the longest of
// its pod sets), if any: what a live workload is known to run.
func DurationOf(it *kueuewl.Summary) (float64, bool) {
	best, ok := 0.0, false
	for _, ps := range it.PodSets {
		v, has := ps.Template.Annotations[contract.DurationSec]
		if !has {
			continue
		}
		d, err := strconv.ParseFloat(v, 64)
		if err != nil || !(d > 0) || math.IsInf(d, 0) {
			continue
		}
		best, ok = math.Max(best, d), true
	}
	return best, ok
}

// group is the Workloads of one logical workload.
type group struct {
	id    string
	items []*kueuewl.Summary
}

// contractOf reads the render contract of a Workload's first pod set, nil when it has none.
func contractOf(it *kueuewl.Summary) *contract.Pod {
	for _, ps := range it.PodSets {
		if c, err := contract.Parse(ps.Template.Annotations); err == nil {
			return c
		}
	}
	return nil
}

func (g *group) first() *kueuewl.Summary {
	return slices.MinFunc(g.items, func(a, b *kueuewl.Summary) int { return a.Created.Compare(b.Created) })
}

// job is the group's logical workload, submitted at submit and running for dur (seconds).
func (g *group) job(submit, dur float64) *importer.Job {
	first := g.first()
	j := &importer.Job{ID: g.id, File: "cluster", Namespace: first.Namespace, Submit: submit, Duration: dur,
		CPUUtil: math.NaN(), GPUUtil: math.NaN(), Intent: intentOf(first.Priority)}
	for _, it := range g.items {
		for _, ps := range it.PodSets {
			t := taskOf(ps)
			if c, err := contract.Parse(ps.Template.Annotations); err == nil {
				j.Family, t.Role = c.Family, c.Role
				if c.IntentClass != "" {
					j.Intent = c.IntentClass
				}
				prof := c.Profile
				j.Profile = &prof
			}
			j.Tasks = mergeTask(j.Tasks, t)
		}
	}
	if j.Family == "" {
		j.Family = ownerFamily(first, j.Tasks)
	}
	if j.Intent == trace.IntentStandard {
		j.Intent = ""
	}
	return j
}

// ownerFamily is the family the owner's kind says where model/importer's rules, which go by pods
// and duration, would not see it: MPIJob, PyTorchJob and TrainJob with GPUs are distributed
// training even with one GPU pod. "" leaves it to the rules.
func ownerFamily(it *kueuewl.Summary, tasks []importer.Task) trace.Family {
	switch it.OwnerKind {
	case "MPIJob", "PyTorchJob", "TrainJob":
		for _, t := range tasks {
			if t.GPUs > 0 {
				return trace.DistributedTraining
			}
		}
	}
	return ""
}

// mergeTask adds t to tasks, into an equal task when there is one (an experiment's trials).
func mergeTask(tasks []importer.Task, t importer.Task) []importer.Task {
	for i := range tasks {
		x := &tasks[i]
		if x.Name == t.Name && x.Role == t.Role && x.CPU == t.CPU && x.MemGi == t.MemGi && x.GPUs == t.GPUs && x.GPUResource == t.GPUResource {
			x.Pods += t.Pods
			return tasks
		}
	}
	return append(tasks, t)
}

// taskOf reads a pod set's shape: its count and its containers' requests summed.
func taskOf(ps kueuewl.PodSet) importer.Task {
	t := importer.Task{Name: strings.ToLower(ps.Name), Pods: max(1, ps.Count), CPU: math.NaN(), MemGi: math.NaN()}
	var cpu, mem resource.Quantity
	hasCPU, hasMem := false, false
	for _, c := range ps.Template.Spec.Containers {
		for name, q := range c.Resources.Requests {
			switch {
			case name == corev1.ResourceCPU:
				cpu.Add(q)
				hasCPU = true
			case name == corev1.ResourceMemory:
				mem.Add(q)
				hasMem = true
			case trace.IsGPUResource(string(name)):
				t.GPUs += int(q.Value())
				if name != trace.ResourceGPU {
					t.GPUResource = string(name)
				}
			}
		}
	}
	if hasCPU {
		t.CPU = cpu.AsApproximateFloat64()
	}
	if hasMem {
		t.MemGi = mem.AsApproximateFloat64() / (1 << 30)
	}
	switch t.Name {
	case "launcher", "master":
		t.Name = trace.RoleLauncher
	case "ps":
	default:
		if t.Name != "" {
			t.Name = "worker"
		}
	}
	return t
}

// intentOf maps a priority class name to an intent: the intents by name (kueuelab's default
// classes), else a class whose name says high or performance is performance, low, spot or eco is
// eco, and any other standard.
func intentOf(class string) string {
	c := strings.ToLower(class)
	switch {
	case c == "":
		return ""
	case strings.Contains(c, "perf") || strings.Contains(c, "high") || strings.Contains(c, "critical"):
		return trace.IntentPerformance
	case strings.Contains(c, "eco") || strings.Contains(c, "low") || strings.Contains(c, "spot") || strings.Contains(c, "preemptible"):
		return trace.IntentEco
	}
	return trace.IntentStandard
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
