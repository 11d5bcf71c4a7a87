package cluster

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/kueuelab/kueuelab/render/contract"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// KWOK's conventions for fake nodes: the annotation that makes the KWOK controller manage a
// node, and the taint that keeps real pods (DaemonSets etc.) off it.
const (
	kwokAnnotation = "kwok.x-k8s.io/node"
	kwokTaintKey   = "kwok.x-k8s.io/node"
	kwokValue      = "fake"
)

// Options tune Objects.
type Options struct {
	// OmitNodes leaves out the KWOK Nodes (for a real cluster that has its own), and with them
	// the DeviceClasses and ResourceSlices of MIG pools, which a real cluster's DRA driver makes.
	OmitNodes bool
}

// Objects renders the spec in apply order: Namespaces, WorkloadPriorityClasses,
// ResourceFlavors, Topology, Cohorts, ClusterQueues, LocalQueues, Nodes. The Kueue objects are
// kueue.x-k8s.io/v1beta2, which every supported Kueue serves (v0.15 serves it beside v1beta1, its
// storage version; from v0.16 it is the storage version and v1beta1 is deprecated). Nodes carry
// status.capacity and status.allocatable: that is how a KWOK node gets its capacity (KWOK's
// node-initialize stage keeps them), so callers stripping status blocks must keep the Nodes'.
func (s *Spec) Objects(opts Options) ([]client.Object, error) {
	if !s.valid {
		return nil, fmt.Errorf("cluster spec %s: not validated (use Load or Validate)", s.file)
	}
	var objs []client.Object
	for _, t := range s.Teams {
		objs = append(objs, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: t.Name, Labels: map[string]string{contract.Team: t.Name}},
		})
	}
	for _, intent := range intents {
		pc := *s.PriorityClasses.get(intent)
		objs = append(objs, &kueue.WorkloadPriorityClass{
			TypeMeta:    typeMeta("WorkloadPriorityClass"),
			ObjectMeta:  metav1.ObjectMeta{Name: pc.Name},
			Value:       *pc.Value,
			Description: cmp.Or(pc.Description, fmt.Sprintf("kueuelab intent class %s", intent)),
		})
	}
	for _, f := range s.flavors {
		objs = append(objs, s.resourceFlavor(f))
	}
	if t := s.Topology; t != nil {
		objs = append(objs, &kueue.Topology{
			TypeMeta:   typeMeta("Topology"),
			ObjectMeta: metav1.ObjectMeta{Name: t.Name},
			Spec: kueue.TopologySpec{Levels: []kueue.TopologyLevel{
				{NodeLabel: t.BlockLabel}, {NodeLabel: t.RackLabel}, {NodeLabel: hostnameLabel},
			}},
		})
	}
	for _, c := range s.Cohorts {
		objs = append(objs, &kueue.Cohort{
			TypeMeta:   typeMeta("Cohort"),
			ObjectMeta: metav1.ObjectMeta{Name: c.Name},
			Spec: kueue.CohortSpec{
				ParentName:     kueue.CohortReference(c.Parent),
				ResourceGroups: s.resourceGroups(c.Quotas),
				FairSharing:    fairSharing(c.FairSharing),
			},
		})
	}
	for i := range s.ClusterQueues {
		objs = append(objs, s.clusterQueueObject(&s.ClusterQueues[i]))
	}
	for _, t := range s.Teams {
		objs = append(objs, &kueue.LocalQueue{
			TypeMeta:   typeMeta("LocalQueue"),
			ObjectMeta: metav1.ObjectMeta{Name: t.LocalQueue, Namespace: t.Name},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(t.ClusterQueue)},
		})
	}
	if !opts.OmitNodes {
		// What NVIDIA's DRA driver installs and publishes goes with the KWOK nodes: a real
		// cluster has its own.
		if s.HasMIG() {
			objs = append(objs, migDeviceClasses()...)
		}
		for i := range s.NodePools {
			np := &s.NodePools[i]
			nodes := s.nodes(np)
			objs = append(objs, nodes...)
			if np.MIG != nil {
				for _, n := range nodes {
					objs = append(objs, migSlices(n.(*corev1.Node), np)...)
				}
			}
		}
	}
	return objs, nil
}

var intents = []string{"performance", "standard", "eco"}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: kind}
}

func (s *Spec) resourceFlavor(f *flavor) *kueue.ResourceFlavor {
	rf := &kueue.ResourceFlavor{
		TypeMeta:   typeMeta("ResourceFlavor"),
		ObjectMeta: metav1.ObjectMeta{Name: f.Name},
		Spec:       kueue.ResourceFlavorSpec{NodeLabels: f.nodeLabels()},
	}
	// Tolerations (not nodeTaints): Kueue injects them into admitted pods, so workloads need
	// not know which pools are tainted.
	rf.Spec.Tolerations = f.tolerations()
	if s.Topology != nil {
		name := kueue.TopologyReference(s.Topology.Name)
		rf.Spec.TopologyName = &name
	}
	return rf
}

// tolerations tolerate every taint of the flavor's pools.
func (f *flavor) tolerations() []corev1.Toleration {
	var out []corev1.Toleration
	seen := map[corev1.Toleration]bool{}
	for _, np := range f.Pools {
		for _, t := range np.Taints {
			tol := corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpEqual, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)}
			if t.Value == "" {
				tol.Operator = corev1.TolerationOpExists
			}
			if !seen[tol] {
				seen[tol] = true
				out = append(out, tol)
			}
		}
	}
	return out
}

func (s *Spec) clusterQueueObject(q *ClusterQueue) *kueue.ClusterQueue {
	sel := &metav1.LabelSelector{}
	if q.NamespaceSelector != nil && len(q.NamespaceSelector.MatchLabels) > 0 {
		sel.MatchLabels = maps.Clone(q.NamespaceSelector.MatchLabels)
	}
	cq := &kueue.ClusterQueue{
		TypeMeta:   typeMeta("ClusterQueue"),
		ObjectMeta: metav1.ObjectMeta{Name: q.Name},
		Spec: kueue.ClusterQueueSpec{
			ResourceGroups:    s.resourceGroups(q.Quotas),
			CohortName:        kueue.CohortReference(q.Cohort),
			QueueingStrategy:  kueue.QueueingStrategy(q.QueueingStrategy),
			NamespaceSelector: sel,
			FairSharing:       fairSharing(q.FairSharing),
		},
	}
	if pr := q.Preemption; pr != nil {
		cq.Spec.Preemption = &kueue.ClusterQueuePreemption{
			ReclaimWithinCohort: kueue.PreemptionPolicy(cmp.Or(pr.ReclaimWithinCohort, "Never")),
			WithinClusterQueue:  kueue.PreemptionPolicy(cmp.Or(pr.WithinClusterQueue, "Never")),
		}
		if b := pr.BorrowWithinCohort; b != nil {
			cq.Spec.Preemption.BorrowWithinCohort = &kueue.BorrowWithinCohort{
				Policy:               kueue.BorrowWithinCohortPolicy(b.Policy),
				MaxPriorityThreshold: b.MaxPriorityThreshold,
			}
		}
	}
	if ff := q.FlavorFungibility; ff != nil {
		cq.Spec.FlavorFungibility = &kueue.FlavorFungibility{
			WhenCanBorrow:  kueue.FlavorFungibilityPolicy(cmp.Or(ff.WhenCanBorrow, "MayStopSearch")),
			WhenCanPreempt: kueue.FlavorFungibilityPolicy(cmp.Or(ff.WhenCanPreempt, "TryNextFlavor")),
		}
		if ff.Preference != "" {
			pref := kueue.FlavorFungibilityPreference(ff.Preference)
			cq.Spec.FlavorFungibility.Preference = &pref
		}
	}
	if as := q.AdmissionScope; as != nil {
		cq.Spec.AdmissionScope = &kueue.AdmissionScope{AdmissionMode: kueue.AdmissionMode(as.AdmissionMode)}
	}
	return cq
}

// resourceOrder puts cpu, memory and pods first, then GPU resources by name.
func resourceOrder(a, b corev1.ResourceName) int {
	rank := func(r corev1.ResourceName) int {
		switch r {
		case corev1.ResourceCPU:
			return 0
		case corev1.ResourceMemory:
			return 1
		case corev1.ResourcePods:
			return 2
		}
		return 3
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(a, b))
}

// resourceGroups renders flavor quotas as one resource group: Kueue requires every flavor of a
// group to list every covered resource in the same order, so missing ones get a zero quota.
func (s *Spec) resourceGroups(quotas []FlavorQuota) []kueue.ResourceGroup {
	if len(quotas) == 0 {
		return nil
	}
	covered := map[corev1.ResourceName]bool{}
	for _, fq := range quotas {
		for name := range fq.Resources {
			covered[corev1.ResourceName(name)] = true
		}
	}
	names := slices.SortedFunc(maps.Keys(covered), resourceOrder)
	rg := kueue.ResourceGroup{CoveredResources: names}
	for _, fq := range quotas {
		fl := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(fq.Flavor)}
		for _, name := range names {
			rq := kueue.ResourceQuota{Name: name, NominalQuota: resource.MustParse("0")}
			if q, ok := fq.Resources[string(name)]; ok {
				rq.NominalQuota = resource.MustParse(q.NominalQuota)
				rq.BorrowingLimit = parsePtr(q.BorrowingLimit)
				rq.LendingLimit = parsePtr(q.LendingLimit)
			}
			fl.Resources = append(fl.Resources, rq)
		}
		rg.Flavors = append(rg.Flavors, fl)
	}
	return []kueue.ResourceGroup{rg}
}

func parsePtr(v *string) *resource.Quantity {
	if v == nil {
		return nil
	}
	q := resource.MustParse(*v)
	return &q
}

func fairSharing(fs *FairSharing) *kueue.FairSharing {
	if fs == nil {
		return nil
	}
	w := resource.MustParse(fs.Weight)
	return &kueue.FairSharing{Weight: &w}
}

// nodes renders a pool's KWOK Nodes, numbered from 000 so names sort in creation order.
func (s *Spec) nodes(np *NodePool) []client.Object {
	fam := catalog[np.GPUFamily]
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(np.CPU),
		corev1.ResourceMemory: resource.MustParse(np.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(np.Pods), resource.DecimalSI),
	}
	if fam.GPU() && np.MIG == nil {
		capacity[fam.Resource] = *resource.NewQuantity(int64(np.GPUsPerNode*np.replicas()), resource.DecimalSI)
	}
	taints := []corev1.Taint{{Key: kwokTaintKey, Value: kwokValue, Effect: corev1.TaintEffectNoSchedule}}
	for _, t := range np.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(t.Effect)})
	}
	annotations := map[string]string{kwokAnnotation: kwokValue}
	if np.MIG != nil {
		annotations[contract.PartitionedGPUs] = strconv.Itoa(np.GPUsPerNode)
	}
	if np.CPUModel != "" {
		annotations[contract.CPUModel] = np.CPUModel
	}
	width := nodeIndexWidth(np.Count)
	perRack, perBlock := s.rackSizes(np)
	out := make([]client.Object, 0, np.Count)
	for i := 0; i < np.Count; i++ {
		name := fmt.Sprintf("%s-%0*d", np.Name, width, i)
		labels := maps.Clone(np.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, map[string]string{
			"type":                 "kwok",
			hostnameLabel:          name,
			corev1.LabelOSStable:   "linux",
			corev1.LabelArchStable: "amd64",
			contract.Pool:          np.Name,
			contract.GPUFamily:     fam.Name,
		})
		if fam.GPU() {
			labels[fam.ProductLabel] = fam.ProductValue
		}
		if sh := np.sharing(); sh != "" && fam.GPU() {
			labels[contract.GPUSharing] = sh
		}
		if np.TimeSlicing != nil && fam.GPU() {
			timeSlicingLabels(np, fam, labels)
		}
		if s.Topology != nil {
			rack := i / perRack
			block := rack / perBlock
			labels[s.Topology.BlockLabel] = fmt.Sprintf("%s-b%02d", np.Name, block)
			labels[s.Topology.RackLabel] = fmt.Sprintf("%s-b%02d-r%02d", np.Name, block, rack%perBlock)
		}
		out = append(out, &corev1.Node{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: maps.Clone(annotations)},
			Spec:       corev1.NodeSpec{Taints: slices.Clone(taints)},
			Status:     corev1.NodeStatus{Capacity: capacity.DeepCopy(), Allocatable: capacity.DeepCopy()},
		})
	}
	return out
}

// rackSizes returns a pool's nodes per rack and racks per block.
func (s *Spec) rackSizes(np *NodePool) (int, int) {
	if s.Topology == nil {
		return 1, 1
	}
	perRack, perBlock := s.Topology.NodesPerRack, s.Topology.RacksPerBlock
	if np.Topology != nil {
		perRack = cmp.Or(np.Topology.NodesPerRack, perRack)
		perBlock = cmp.Or(np.Topology.RacksPerBlock, perBlock)
	}
	return perRack, perBlock
}
