package kueuewl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// Queues are a cluster's Kueue queue objects in a kueuelab cluster spec's terms, the reverse of
// render/cluster's Objects: flavors are named as in the cluster (the caller maps them to the
// spec's flavors, which it derives from the nodes), and what the spec cannot say is a Problem.
type Queues struct {
	Flavors         []Flavor
	ClusterQueues   []ClusterQueue
	Cohorts         []rcluster.Cohort
	LocalQueues     []LocalQueue
	PriorityClasses []PriorityClass
	Topologies      []Topology
	Problems        []Problem
}

// Flavor is a ResourceFlavor.
type Flavor struct {
	Name        string
	NodeLabels  map[string]string
	NodeTaints  []corev1.Taint
	Tolerations []corev1.Toleration
	Topology    string
}

// ClusterQueue is a ClusterQueue as a spec's queue, with its namespace selector as Kueue has it
// (the spec's matchLabels cannot hold every selector; the caller decides).
type ClusterQueue struct {
	rcluster.ClusterQueue
	Selector *metav1.LabelSelector
}

// LocalQueue is a LocalQueue.
type LocalQueue struct {
	Namespace, Name, ClusterQueue string
}

// PriorityClass is a WorkloadPriorityClass.
type PriorityClass struct {
	Name  string
	Value int32
}

// Topology is a Topology: its levels' node labels, top first.
type Topology struct {
	Name   string
	Levels []string
}

// Problem is something of a Kueue object that the spec cannot express. Fatal ones would change
// Kueue's decisions with no honest approximation; the others are approximated as Message says.
type Problem struct {
	Kind, Name, Field, Message string
	Fatal                      bool
}

func (p Problem) String() string {
	return fmt.Sprintf("%s/%s: %s: %s", p.Kind, p.Name, p.Field, p.Message)
}

// SpecResources are the resources a cluster spec's quotas may name.
var SpecResources = []string{"cpu", "memory", "pods", "nvidia.com/gpu", "amd.com/gpu"}

// ListFailed wraps a failed list of resource (plural) in API group ("" for core) cluster-wide:
// a 403 becomes the permission the caller lacks.
func ListFailed(err error, resource, group string) error {
	if apierrors.IsForbidden(err) {
		g := group
		if g == "" {
			g = `"" (core)`
		}
		return fmt.Errorf("list %s: forbidden: a snapshot needs RBAC verb list on resource %s in API group %s, cluster-wide (a ClusterRole bound with a ClusterRoleBinding): %w", resource, resource, g, err)
	}
	return fmt.Errorf("list %s: %w", resource, err)
}

// ReadQueues lists the cluster's ResourceFlavors, ClusterQueues, Cohorts, LocalQueues,
// WorkloadPriorityClasses and Topologies (v1beta2) and turns them into a spec's terms.
func ReadQueues(ctx context.Context, c client.Reader) (*Queues, error) {
	q := &Queues{}
	var rfs kueue.ResourceFlavorList
	var cqs kueue.ClusterQueueList
	var cohorts kueue.CohortList
	var lqs kueue.LocalQueueList
	var wpcs kueue.WorkloadPriorityClassList
	var tops kueue.TopologyList
	for _, l := range []struct {
		list     client.ObjectList
		resource string
	}{
		{&rfs, "resourceflavors"}, {&cqs, "clusterqueues"}, {&cohorts, "cohorts"}, {&lqs, "localqueues"},
		{&wpcs, "workloadpriorityclasses"}, {&tops, "topologies"},
	} {
		if err := c.List(ctx, l.list); err != nil {
			return nil, ListFailed(err, l.resource, Group)
		}
	}
	for _, rf := range rfs.Items {
		f := Flavor{Name: rf.Name, NodeLabels: rf.Spec.NodeLabels, NodeTaints: rf.Spec.NodeTaints, Tolerations: rf.Spec.Tolerations}
		if rf.Spec.TopologyName != nil {
			f.Topology = string(*rf.Spec.TopologyName)
		}
		q.Flavors = append(q.Flavors, f)
	}
	for i := range cqs.Items {
		q.ClusterQueues = append(q.ClusterQueues, q.clusterQueue(&cqs.Items[i]))
	}
	named := map[string]bool{}
	for _, co := range cohorts.Items {
		named[co.Name] = true
		sc := rcluster.Cohort{Name: co.Name, Parent: string(co.Spec.ParentName), FairSharing: fairSharing(co.Spec.FairSharing)}
		sc.Quotas = q.quotas("Cohort", co.Name, co.Spec.ResourceGroups)
		q.Cohorts = append(q.Cohorts, sc)
	}
	// A cohort a queue names without a Cohort object is an empty one to Kueue: the spec declares
	// every cohort, so it gets an empty entry, which renders as an empty Cohort.
	for _, cq := range q.ClusterQueues {
		if cq.Cohort != "" && !named[cq.Cohort] {
			named[cq.Cohort] = true
			q.Cohorts = append(q.Cohorts, rcluster.Cohort{Name: cq.Cohort})
		}
	}
	for _, co := range cohorts.Items {
		if p := string(co.Spec.ParentName); p != "" && !named[p] {
			named[p] = true
			q.Cohorts = append(q.Cohorts, rcluster.Cohort{Name: p})
		}
	}
	for _, lq := range lqs.Items {
		q.LocalQueues = append(q.LocalQueues, LocalQueue{Namespace: lq.Namespace, Name: lq.Name, ClusterQueue: string(lq.Spec.ClusterQueue)})
		if sp := lq.Spec.StopPolicy; sp != nil && *sp != kueue.None {
			q.add(true, "LocalQueue", lq.Namespace+"/"+lq.Name, "spec.stopPolicy", "%s: the spec has no stopped queue (set it to None, or snapshot without this queue)", *sp)
		}
		if lq.Spec.FairSharing != nil {
			q.add(false, "LocalQueue", lq.Namespace+"/"+lq.Name, "spec.fairSharing", "left out: the spec has no LocalQueue weight for admission fair sharing (weight 1)")
		}
	}
	for _, w := range wpcs.Items {
		q.PriorityClasses = append(q.PriorityClasses, PriorityClass{Name: w.Name, Value: w.Value})
	}
	for _, t := range tops.Items {
		top := Topology{Name: t.Name}
		for _, l := range t.Spec.Levels {
			top.Levels = append(top.Levels, l.NodeLabel)
		}
		q.Topologies = append(q.Topologies, top)
	}
	return q, nil
}

func (q *Queues) add(fatal bool, kind, name, field, format string, args ...any) {
	q.Problems = append(q.Problems, Problem{Kind: kind, Name: name, Field: field, Message: fmt.Sprintf(format, args...), Fatal: fatal})
}

func (q *Queues) clusterQueue(cq *kueue.ClusterQueue) ClusterQueue {
	const kind = "ClusterQueue"
	out := ClusterQueue{Selector: cq.Spec.NamespaceSelector}
	s := &out.ClusterQueue
	s.Name, s.Cohort, s.QueueingStrategy = cq.Name, string(cq.Spec.CohortName), string(cq.Spec.QueueingStrategy)
	s.FairSharing = fairSharing(cq.Spec.FairSharing)
	if p := cq.Spec.Preemption; p != nil {
		s.Preemption = &rcluster.Preemption{ReclaimWithinCohort: string(p.ReclaimWithinCohort), WithinClusterQueue: string(p.WithinClusterQueue)}
		if b := p.BorrowWithinCohort; b != nil {
			s.Preemption.BorrowWithinCohort = &rcluster.BorrowWithinCohort{Policy: string(b.Policy), MaxPriorityThreshold: b.MaxPriorityThreshold}
		}
	}
	if f := cq.Spec.FlavorFungibility; f != nil {
		s.FlavorFungibility = &rcluster.FlavorFungibility{WhenCanBorrow: string(f.WhenCanBorrow), WhenCanPreempt: string(f.WhenCanPreempt)}
	}
	if a := cq.Spec.AdmissionScope; a != nil {
		s.AdmissionScope = &rcluster.AdmissionScope{AdmissionMode: string(a.AdmissionMode)}
	}
	s.Quotas = q.quotas(kind, cq.Name, cq.Spec.ResourceGroups)
	if len(cq.Spec.ResourceGroups) == 0 {
		q.add(true, kind, cq.Name, "spec.resourceGroups", "none: the spec needs at least one flavor quota per ClusterQueue")
	}
	if cq.Spec.AdmissionChecksStrategy != nil && len(cq.Spec.AdmissionChecksStrategy.AdmissionChecks) > 0 {
		q.add(false, kind, cq.Name, "spec.admissionChecksStrategy", "left out: the sim admits on quota alone, so a workload's admission checks take no time there")
	}
	if sp := cq.Spec.StopPolicy; sp != nil && *sp != kueue.None {
		q.add(true, kind, cq.Name, "spec.stopPolicy", "%s: the spec has no stopped queue (set it to None, or snapshot without this queue)", *sp)
	}
	if hasConcurrentAdmission(cq) {
		q.add(false, kind, cq.Name, "spec.concurrentAdmissionPolicy", "left out: the spec has no concurrent admission")
	}
	return out
}

// quotas turns resource groups into a spec's flavor quotas. The spec has one resource group per
// queue; two groups (cpu from one flavor, GPUs from others) let a pod take each resource from a
// different flavor, which one group cannot, so more than one is fatal.
func (q *Queues) quotas(kind, name string, groups []kueue.ResourceGroup) []rcluster.FlavorQuota {
	if len(groups) > 1 {
		var parts []string
		for _, g := range groups {
			parts = append(parts, fmt.Sprint(g.CoveredResources))
		}
		q.add(true, kind, name, "spec.resourceGroups", "%d resource groups (%s): the spec has one per queue, where every flavor covers every resource, and merging them would let no pod take cpu from one flavor and GPUs from another", len(groups), strings.Join(parts, ", "))
	}
	var out []rcluster.FlavorQuota
	for gi, g := range groups {
		for fi, f := range g.Flavors {
			fq := rcluster.FlavorQuota{Flavor: string(f.Name), Resources: map[string]rcluster.Quota{}}
			for ri, r := range f.Resources {
				if !slices.Contains(SpecResources, string(r.Name)) {
					q.add(false, kind, name, fmt.Sprintf("spec.resourceGroups[%d].flavors[%d].resources[%d]", gi, fi, ri),
						"%s quota %s of flavor %s left out: the spec's quotas are %s (a forecast does not limit %s)", r.Name, r.NominalQuota.String(), f.Name, strings.Join(SpecResources, ", "), r.Name)
					continue
				}
				sq := rcluster.Quota{NominalQuota: r.NominalQuota.String()}
				if r.BorrowingLimit != nil {
					v := r.BorrowingLimit.String()
					sq.BorrowingLimit = &v
				}
				if r.LendingLimit != nil {
					v := r.LendingLimit.String()
					sq.LendingLimit = &v
				}
				fq.Resources[string(r.Name)] = sq
			}
			out = append(out, fq)
		}
	}
	return out
}

func fairSharing(fs *kueue.FairSharing) *rcluster.FairSharing {
	if fs == nil || fs.Weight == nil {
		return nil
	}
	return &rcluster.FairSharing{Weight: fs.Weight.String()}
}
