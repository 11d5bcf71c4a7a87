package replay

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// Cluster is what a replay knows of a cluster spec besides its objects: its ClusterQueues and
// ResourceFlavors (the time series' columns), its GPUs (utilisation's denominator) and which
// ClusterQueue each team's LocalQueue feeds.
type Cluster struct {
	Name        string
	Queues      []string
	Flavors     []string
	GPUCapacity int64
	// PartitionedGPUs are the GPUs of the MIG-partitioned node pools, TimeSlicedGPUs those of the
	// time-sliced ones, part of GPUCapacity.
	PartitionedGPUs int64
	TimeSlicedGPUs  int64
	lqToCQ          map[string]string
}

// NewCluster reads a validated spec.
func NewCluster(spec *rcluster.Spec) *Cluster {
	c := &Cluster{Name: SpecName(spec), Flavors: spec.FlavorNames(), lqToCQ: map[string]string{}}
	for _, q := range spec.ClusterQueues {
		c.Queues = append(c.Queues, q.Name)
	}
	for _, t := range spec.Teams {
		c.lqToCQ[t.Name+"/"+t.LocalQueue] = t.ClusterQueue
	}
	for _, np := range spec.NodePools {
		if np.GPUFamily != rcluster.CPUFamily {
			c.GPUCapacity += int64(np.Count * np.GPUsPerNode)
		}
		if np.MIG != nil {
			c.PartitionedGPUs += int64(np.Count * np.GPUsPerNode)
		}
		if np.TimeSlicing != nil {
			c.TimeSlicedGPUs += int64(np.Count * np.GPUsPerNode)
		}
	}
	return c
}

// ClusterQueue is the ClusterQueue that LocalQueue ns/lq feeds ("" when the spec has none).
func (c *Cluster) ClusterQueue(ns, lq string) string { return c.lqToCQ[ns+"/"+lq] }

// SpecName names a spec in results: its file, or its metadata name for one built in code.
func SpecName(spec *rcluster.Spec) string { return cmp.Or(spec.File(), spec.Metadata.Name) }

// Placer places trace workloads on a cluster and makes their records, alike on every engine.
// Workloads with the same placement share one (a million-workload sim keeps a handful).
type Placer struct {
	placer     render.Placer
	cluster    *Cluster
	shared     map[string]*render.Placement
	sliceShare func(profile string) float64
}

// NewPlacer places on spec's cluster; seed decides the GPU-family choices (rcluster.Spec.Placer).
func NewPlacer(spec *rcluster.Spec, c *Cluster, seed uint64) *Placer {
	return &Placer{placer: spec.Placer(seed, false), cluster: c, shared: map[string]*render.Placement{}, sliceShare: spec.SliceShare}
}

// Place returns w's record and placement. A workload the cluster cannot run has no placement: it
// stays in the results with the reason in its record's Error, and is never submitted.
func (p *Placer) Place(w *trace.Workload) (*results.Record, *render.Placement) {
	rec := results.NewRecord(w, "", "")
	pl, err := p.placer.Place(w)
	if err != nil {
		rec.Error = fmt.Sprintf("place workload %s: %v", w.WorkloadID, err)
		return rec, nil
	}
	key := placementKey(&pl)
	shared, ok := p.shared[key]
	if !ok {
		shared = &pl
		p.shared[key] = shared
	}
	rec.LocalQueue, rec.Queue = pl.Queue, p.cluster.ClusterQueue(pl.Namespace, pl.Queue)
	placed, _ := render.OnDevices(w, nil, pl)
	rec.OnDevices(placed, p.sliceShare)
	return rec, shared
}

// placementKey is what makes two placements the same: every field but NodeLabelKeys, which the
// placer shares among all its placements.
func placementKey(pl *render.Placement) string {
	return fmt.Sprintf("%s|%s|%s|%v|%s|%s|%v|%s", pl.Namespace, pl.Queue, pl.PriorityClass, pl.GPUNodeSelector, pl.GPUResource, pl.MIGProfile, pl.Tolerations, pl.TopologyLevel)
}

// Compare is the one submission order of both engines: by submit time, ties by workload id (as
// trace.SortWorkloads orders a trace).
func Compare(aSec float64, aID string, bSec float64, bID string) int {
	return cmp.Or(cmp.Compare(aSec, bSec), strings.Compare(aID, bID))
}
