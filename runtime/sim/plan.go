package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// item is one trace workload.
type item struct {
	id     string
	offset float64
	pl     *render.Placement
	rec    *results.Record
	// njobs is the number of its job records (a streamed trace reads them at submission).
	njobs int
	// trials is set for an HPO experiment: the sim creates its trials as the runner does.
	trials *replay.Experiment
	// open counts its Kueue Workloads created and not finished.
	open int
	// resume is its state when the run resumes from one (resume.go).
	resume *state.Workload
	// claimTemplates are its ResourceClaimTemplates in Kueue's Store (MIG pods).
	claimTemplates []client.Object
}

// plan is everything decided before the run starts: the cluster's objects and, per trace
// workload, its record and placement (namespace, queue, priority, GPU family), as the runner
// decides them. The workloads themselves are rendered at their submission, from a source that
// holds the trace in memory or reads it again from its file as the run goes, so that memory holds
// only the workloads alive at a time.
type plan struct {
	records   []*results.Record
	items     []*item
	kueueObjs []client.Object
	nodes     []*corev1.Node
	// The DRA objects, which the kube-scheduler role allocates claims from (Kueue's Store holds
	// them too, for its DRA quota).
	deviceClasses  []*resourceapi.DeviceClass
	resourceSlices []*resourceapi.ResourceSlice
	cluster        *replay.Cluster
	renderer       *render.Renderer
	registry       *render.Registry
	src            source
}

func newPlan(ctx context.Context, cfg *Config) (*plan, error) {
	spec := cfg.Spec
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		return nil, err
	}
	p := &plan{cluster: replay.NewCluster(spec)}
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Node:
			p.nodes = append(p.nodes, x)
			if spec.Topology != nil {
				// Kueue's topology-aware scheduling reads the nodes.
				p.kueueObjs = append(p.kueueObjs, o)
			}
		case *resourceapi.DeviceClass:
			p.deviceClasses = append(p.deviceClasses, x)
			p.kueueObjs = append(p.kueueObjs, o)
		case *resourceapi.ResourceSlice:
			p.resourceSlices = append(p.resourceSlices, x)
			p.kueueObjs = append(p.kueueObjs, o)
		default:
			p.kueueObjs = append(p.kueueObjs, o)
		}
	}
	p.registry = render.DefaultRegistry()
	if p.renderer, err = render.NewRenderer(p.registry, cfg.Mapping, render.Options{Target: render.TargetKWOK}); err != nil {
		return nil, err
	}
	ix := newIndexer(cfg, p.cluster)
	if cfg.Trace != nil {
		for _, w := range cfg.Trace.Workloads {
			ix.add(w).njobs = len(cfg.Trace.Jobs[w.WorkloadID])
		}
		p.src = newMemSource(cfg.Trace)
	} else {
		streamed, err := ix.scan(ctx, cfg.TracePath)
		if err != nil {
			return nil, err
		}
		if !streamed {
			// Job records only: rebuilding workloads needs the whole trace.
			tr, err := trace.LoadWorkloads(ctx, cfg.TracePath, trace.Options{})
			if err != nil {
				return nil, err
			}
			ix = newIndexer(cfg, p.cluster)
			for _, w := range tr.Workloads {
				ix.add(w).njobs = len(tr.Jobs[w.WorkloadID])
			}
			p.src = newMemSource(tr)
		} else {
			p.src = &fileSource{path: cfg.TracePath, buf: map[string]*fetched{}}
		}
	}
	if st := cfg.Resume; st != nil {
		idx := st.Index()
		for _, it := range ix.all {
			if it.resume = idx[it.id]; it.resume != nil {
				it.offset = st.NowSec
			}
		}
	}
	slices.SortStableFunc(ix.all, func(a, b *item) int {
		return cmp.Or(cmp.Compare(a.offset, b.offset), resumeOrder(a, b), replay.Compare(a.offset, a.id, b.offset, b.id))
	})
	for _, it := range ix.all {
		p.records = append(p.records, it.rec)
		if it.rec.Error == "" {
			p.items = append(p.items, it)
		}
	}
	if len(p.items) == 0 {
		if len(p.records) == 0 {
			return nil, errors.New("trace: no workloads")
		}
		return nil, fmt.Errorf("no workload of the trace can run on cluster %s: %s", p.cluster.Name, p.records[0].Error)
	}
	return p, nil
}

// indexer builds each workload's record and placement (replay.Placer).
type indexer struct {
	placer *replay.Placer
	all    []*item
	// early lists the workload ids of job records read before their workload's record.
	early []string
}

func newIndexer(cfg *Config, c *replay.Cluster) *indexer {
	return &indexer{placer: replay.NewPlacer(cfg.Spec, c, cfg.Seed)}
}

func (ix *indexer) add(w *trace.Workload) *item {
	rec, pl := ix.placer.Place(w)
	it := &item{id: rec.ID, offset: w.SubmitTimeOffsetSec, rec: rec, pl: pl}
	ix.all = append(ix.all, it)
	return it
}

// scan reads a trace file once, checking it as the trace reader does, and indexes its workloads.
// It reports false for a trace of job records only, whose workloads must be rebuilt in memory.
func (ix *indexer) scan(ctx context.Context, path string) (bool, error) {
	r, err := trace.Open(path, trace.Options{})
	if err != nil {
		return false, err
	}
	defer r.Close()
	var last *item
	var byID map[string]*item // built only if a job record does not follow its workload's
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return false, fmt.Errorf("read trace %s: %w", path, ctx.Err())
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return false, err
		}
		if rec.Workload != nil {
			last = ix.add(rec.Workload)
			if byID != nil {
				byID[last.id] = last
			}
			continue
		}
		id := rec.Job.WorkloadID
		if last != nil && last.id == id {
			last.njobs++
			continue
		}
		if byID == nil {
			byID = make(map[string]*item, len(ix.all))
			for _, it := range ix.all {
				byID[it.id] = it
			}
		}
		if it := byID[id]; it != nil {
			it.njobs++
			continue
		}
		// A job read before its workload's record is counted once every record is read (the
		// trace reader's end-of-input checks fail when its workload never comes).
		ix.early = append(ix.early, id)
	}
	nw, _ := r.Counts()
	if nw == 0 {
		return false, nil
	}
	ix.settleEarly()
	return true, nil
}

// settleEarly counts the job records that came before their workload's record.
func (ix *indexer) settleEarly() {
	if len(ix.early) == 0 {
		return
	}
	byID := make(map[string]*item, len(ix.all))
	for _, it := range ix.all {
		byID[it.id] = it
	}
	for _, id := range ix.early {
		if it := byID[id]; it != nil {
			it.njobs++
		}
	}
	ix.early = nil
}

// source gives a workload and its job records at its submission.
type source interface {
	fetch(it *item) (*trace.Workload, []*trace.Job, error)
	close() error
}

// memSource serves a trace held in memory.
type memSource struct {
	tr   *trace.Trace
	byID map[string]*trace.Workload
}

func newMemSource(tr *trace.Trace) memSource {
	return memSource{tr: tr, byID: tr.ByID()}
}

func (m memSource) fetch(it *item) (*trace.Workload, []*trace.Job, error) {
	w := m.byID[it.id]
	if w == nil {
		return nil, nil, fmt.Errorf("trace: workload %s not found", it.id)
	}
	return w, m.tr.Jobs[it.id], nil
}

func (memSource) close() error { return nil }

// fileSource reads the trace file forward as submissions come due, keeping the records read
// ahead of their workload's submission (none when the file is in submission order, as generated
// traces are).
type fileSource struct {
	path string
	r    *trace.Reader
	buf  map[string]*fetched
}

type fetched struct {
	w    *trace.Workload
	jobs []*trace.Job
}

func (f *fileSource) fetch(it *item) (*trace.Workload, []*trace.Job, error) {
	if f.r == nil {
		// The indexer read the file whole with every check: the second pass skips those across
		// records, whose bookkeeping would grow with the trace for nothing.
		r, err := trace.Open(f.path, trace.Options{Reread: true})
		if err != nil {
			return nil, nil, err
		}
		f.r = r
	}
	for {
		if x := f.buf[it.id]; x != nil && x.w != nil && len(x.jobs) >= it.njobs {
			delete(f.buf, it.id)
			return x.w, x.jobs, nil
		}
		rec, err := f.r.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("trace %s: workload %s ends before its records (did the file change during the run?)", f.path, it.id)
		}
		if err != nil {
			return nil, nil, err
		}
		id := ""
		if rec.Workload != nil {
			id = rec.Workload.WorkloadID
		} else {
			id = rec.Job.WorkloadID
		}
		x := f.buf[id]
		if x == nil {
			x = &fetched{}
			f.buf[id] = x
		}
		if rec.Workload != nil {
			x.w = rec.Workload
		} else {
			x.jobs = append(x.jobs, rec.Job)
		}
	}
}

func (f *fileSource) close() error {
	if f.r == nil {
		return nil
	}
	return f.r.Close()
}
