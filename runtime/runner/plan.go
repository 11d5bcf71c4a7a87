package runner

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta1"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// item is one trace workload ready to submit.
type item struct {
	id      string
	ns      string
	queue   string
	offset  float64
	objects []client.Object
	// exp is set for an HPO workload: the runner creates its trials instead of the Experiment.
	exp *katibv1beta1.Experiment
}

// plan is everything decided before the run starts.
type plan struct {
	items       []*item // submit order
	records     []*results.Record
	clusterObjs []client.Object
	// owners maps "Kind/namespace/name" of every object the runner creates to its workload id.
	owners map[string]string
	// byLabel maps "namespace/<kueuelab.io/workload-id label value>" to the workload id.
	byLabel map[string]string
	// lqToCQ maps "namespace/localqueue" to its ClusterQueue.
	lqToCQ      map[string]string
	queues      []string
	flavors     []string
	gpuCapacity int64
	namespaces  []string
	// unrunnable lists why workloads could not be placed or rendered (they stay unfinished).
	unrunnable []string
}

func ownerKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

func newPlan(cfg *Config) (*plan, error) {
	spec := cfg.Spec
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		return nil, err
	}
	p := &plan{clusterObjs: objs, owners: map[string]string{}, byLabel: map[string]string{}, lqToCQ: map[string]string{}}
	for _, o := range objs {
		if f, ok := o.(*kueue.ResourceFlavor); ok {
			p.flavors = append(p.flavors, f.Name)
		}
	}
	for _, q := range spec.ClusterQueues {
		p.queues = append(p.queues, q.Name)
	}
	for _, t := range spec.Teams {
		p.lqToCQ[t.Name+"/"+t.LocalQueue] = t.ClusterQueue
	}
	for _, np := range spec.NodePools {
		if np.GPUFamily != rcluster.CPUFamily {
			p.gpuCapacity += int64(np.Count * np.GPUsPerNode)
		}
	}
	mapping := cfg.Mapping
	if mapping == nil {
		mapping = render.DefaultMapping()
	}
	warn := func(msg string) {
		if cfg.Out != nil {
			fmt.Fprintln(cfg.Out, "warning:", msg)
		}
	}
	reg := render.DefaultRegistry()
	r, err := render.NewRenderer(reg, mapping, render.Options{Target: render.TargetKWOK, Warn: warn})
	if err != nil {
		return nil, err
	}
	// What the mapped kinds' objects refer to (a TrainJob's ClusterTrainingRuntime) goes in with
	// the cluster side, before any workload.
	p.clusterObjs = append(p.clusterObjs, reg.ClusterObjects(mapping, r.Options())...)
	placer := spec.Placer(cfg.Seed, false)
	nss := map[string]bool{}
	for _, w := range cfg.Trace.Workloads {
		rec := results.NewRecord(w, "", "")
		p.records = append(p.records, rec)
		it, err := p.add(w, cfg.Trace.Jobs[w.WorkloadID], r, placer)
		if err != nil {
			// A workload the cluster cannot run stays in the results, unfinished, with the reason.
			rec.Error = err.Error()
			p.unrunnable = append(p.unrunnable, rec.Error)
			continue
		}
		rec.LocalQueue, rec.Queue = it.queue, p.lqToCQ[it.ns+"/"+it.queue]
		nss[it.ns] = true
		p.items = append(p.items, it)
	}
	if len(p.items) == 0 {
		return nil, fmt.Errorf("no workload of the trace can run on cluster %s: %s", specName(spec), p.unrunnable[0])
	}
	sort.SliceStable(p.items, func(i, j int) bool { return p.items[i].offset < p.items[j].offset })
	for ns := range nss {
		p.namespaces = append(p.namespaces, ns)
	}
	sort.Strings(p.namespaces)
	return p, nil
}

// add places and renders one workload.
func (p *plan) add(w *trace.Workload, jobs []*trace.Job, r *render.Renderer, placer render.Placer) (*item, error) {
	pl, err := placer.Place(w)
	if err != nil {
		return nil, fmt.Errorf("place workload %s: %w", w.WorkloadID, err)
	}
	objs, err := r.Render(w, jobs, pl)
	if err != nil {
		return nil, err
	}
	it := &item{id: w.WorkloadID, ns: pl.Namespace, queue: pl.Queue, offset: w.SubmitTimeOffsetSec}
	for _, o := range objs {
		if e, ok := o.(*katibv1beta1.Experiment); ok {
			it.exp = e
			continue
		}
		it.objects = append(it.objects, o)
	}
	if it.exp == nil && len(it.objects) == 0 {
		return nil, fmt.Errorf("workload %s: rendered no objects", w.WorkloadID)
	}
	for _, o := range it.objects {
		p.owners[ownerKey(kindOf(o), o.GetNamespace(), o.GetName())] = w.WorkloadID
	}
	p.byLabel[pl.Namespace+"/"+render.Name(w.WorkloadID)] = w.WorkloadID
	return it, nil
}

// waitClusterQueuesActive polls until every named ClusterQueue reports Active=True.
func waitClusterQueuesActive(ctx context.Context, c client.Client, names []string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			var cq kueue.ClusterQueue
			if err := c.Get(ctx, client.ObjectKey{Name: n}, &cq); err != nil {
				last = fmt.Sprintf("ClusterQueue %s: %v", n, err)
				return false, nil
			}
			if !meta.IsStatusConditionTrue(cq.Status.Conditions, kueue.ClusterQueueActive) {
				last = fmt.Sprintf("ClusterQueue %s not Active: %s", n, condMessage(cq.Status.Conditions, kueue.ClusterQueueActive))
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("cluster queues not active (%s): %w", last, err)
	}
	return nil
}

func condMessage(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason + ": " + c.Message
	}
	return "no " + typ + " condition"
}

func labelSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", s, err)
	}
	return sel, nil
}

// gpusOf sums the GPU resources (nvidia.com/gpu, amd.com/gpu) of a resource list.
func gpusOf(rl corev1.ResourceList) int64 {
	var n int64
	for name, q := range rl {
		if kueuewl.IsGPU(string(name)) {
			n += q.Value()
		}
	}
	return n
}

// podGPUs is the GPUs a pod's containers request.
func podGPUs(spec *corev1.PodSpec) int64 {
	var n int64
	for i := range spec.Containers {
		n += gpusOf(spec.Containers[i].Resources.Requests)
	}
	return n
}
