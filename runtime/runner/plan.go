package runner

import (
	"context"
	"fmt"
	resourceapi "k8s.io/api/resource/v1"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/replay"
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
	byLabel    map[string]string
	cluster    *replay.Cluster
	namespaces []string
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
	p := &plan{clusterObjs: objs, owners: map[string]string{}, byLabel: map[string]string{}, cluster: replay.NewCluster(spec)}
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
	placer := replay.NewPlacer(spec, p.cluster, cfg.Seed)
	ws := slices.Clone(cfg.Trace.Workloads)
	slices.SortStableFunc(ws, func(a, b *trace.Workload) int {
		return replay.Compare(a.SubmitTimeOffsetSec, a.WorkloadID, b.SubmitTimeOffsetSec, b.WorkloadID)
	})
	nss := map[string]bool{}
	for _, w := range ws {
		rec, pl := placer.Place(w)
		p.records = append(p.records, rec)
		if pl == nil {
			p.unrunnable = append(p.unrunnable, rec.Error)
			continue
		}
		it, err := p.add(w, cfg.Trace.Jobs[w.WorkloadID], r, pl)
		if err != nil {
			// A workload the cluster cannot run stays in the results, unfinished, with the reason.
			rec.Error = err.Error()
			p.unrunnable = append(p.unrunnable, rec.Error)
			continue
		}
		nss[it.ns] = true
		p.items = append(p.items, it)
	}
	if len(p.items) == 0 {
		return nil, fmt.Errorf("no workload of the trace can run on cluster %s: %s", p.cluster.Name, p.unrunnable[0])
	}
	p.namespaces = slices.Sorted(maps.Keys(nss))
	return p, nil
}

// add renders one placed workload.
func (p *plan) add(w *trace.Workload, jobs []*trace.Job, r *render.Renderer, pl *render.Placement) (*item, error) {
	objs, err := r.Render(w, jobs, *pl)
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
		if _, ok := o.(*resourceapi.ResourceClaimTemplate); ok {
			// A claim template is read by Kueue and kube-scheduler; no Workload is made of it, so
			// its create is held for nothing beyond the create itself.
			continue
		}
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
			active, why, err := kueuewl.ClusterQueueActive(ctx, c, n)
			switch {
			case err != nil:
				last = err.Error()
				return false, nil
			case !active:
				last = fmt.Sprintf("ClusterQueue %s not Active: %s", n, why)
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

func labelSelector(s string) (labels.Selector, error) {
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", s, err)
	}
	return sel, nil
}
