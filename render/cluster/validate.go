package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kueuelab/kueuelab/render/contract"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kueuelab/kueuelab/model/trace"
)

// Defaults filled in by Validate.
const (
	defaultPods          = 110
	defaultTopologyName  = "default"
	defaultBlockLabel    = "cloud.provider.com/topology-block"
	defaultRackLabel     = "cloud.provider.com/topology-rack"
	defaultNodesPerRack  = 4
	defaultRacksPerBlock = 4
	localQueueSuffix     = "-lq"
	hostnameLabel        = corev1.LabelHostname
)

// Gang levels a Topology may pack gangs in.
const (
	LevelBlock    = "block"
	LevelRack     = "rack"
	LevelHostname = "hostname"
)

// defaultPriorities are the WorkloadPriorityClass values per intent class.
var defaultPriorities = map[string]int32{trace.IntentPerformance: 1000, trace.IntentStandard: 100, trace.IntentEco: 10}

// flavor is a ResourceFlavor derived from the pools of one family.
type flavor struct {
	Name   string
	Family family
	Pools  []*NodePool
	// MIG: the flavor's pools are MIG-partitioned; its GPUs are quota'd as MIGQuotaResource.
	MIG bool
	// Replicas > 1: the flavor's pools time-slice their GPUs, each advertised (and quota'd) as
	// Replicas devices of the family's resource.
	Replicas int
}

// wholeGPUs reports whether the flavor's nodes advertise whole GPUs (its family's resource).
func (f *flavor) wholeGPUs() bool { return f.Family.GPU() && !f.MIG }

// nodeLabels select the flavor's nodes: a MIG flavor's also by contract.GPUSharing.
func (f *flavor) nodeLabels() map[string]string {
	l := f.Family.NodeLabels()
	if f.MIG {
		l[contract.GPUSharing] = gpuSharingMIG
	}
	if f.Replicas > 1 {
		l[f.Family.ProductLabel] += contract.SharedProductSuffix
		l[contract.GPUSharing] = contract.SharingTimeSlicing
	}
	return l
}

// Validate fills the defaults of a spec built in code and checks it as Load does (Load has
// already called it). Objects and Placer need a validated spec.
func (s *Spec) Validate() error {
	name := s.file
	if name == "" {
		name = "cluster spec"
	}
	l := &errList{file: name}
	s.validate(l)
	return l.err()
}

func (s *Spec) validate(l *errList) {
	s.setDefaults()
	if s.APIVersion != APIVersion {
		l.add(fieldPath{"apiVersion"}, "must be %q, got %q", APIVersion, s.APIVersion)
	}
	if s.Kind != Kind {
		l.add(fieldPath{"kind"}, "must be %q, got %q", Kind, s.Kind)
	}
	s.validateTopology(l)
	s.validatePools(l)
	s.validateCohorts(l)
	s.validateQueues(l)
	s.validateTeams(l)
	s.validatePriorities(l)
	s.validateScheduler(l, s.dir)
	s.validateMIGFor(l)
	s.valid = len(l.errs) == 0
}

func (s *Spec) setDefaults() {
	for i := range s.NodePools {
		if s.NodePools[i].Pods == 0 {
			s.NodePools[i].Pods = defaultPods
		}
	}
	if t := s.Topology; t != nil {
		t.Name = or(t.Name, defaultTopologyName)
		t.BlockLabel = or(t.BlockLabel, defaultBlockLabel)
		t.RackLabel = or(t.RackLabel, defaultRackLabel)
		t.GangLevel = or(t.GangLevel, LevelRack)
		if t.NodesPerRack == 0 {
			t.NodesPerRack = defaultNodesPerRack
		}
		if t.RacksPerBlock == 0 {
			t.RacksPerBlock = defaultRacksPerBlock
		}
	}
	for i := range s.ClusterQueues {
		s.ClusterQueues[i].QueueingStrategy = or(s.ClusterQueues[i].QueueingStrategy, "BestEffortFIFO")
	}
	for i := range s.Teams {
		s.Teams[i].LocalQueue = or(s.Teams[i].LocalQueue, s.Teams[i].Name+localQueueSuffix)
	}
	for _, intent := range []string{trace.IntentPerformance, trace.IntentStandard, trace.IntentEco} {
		pc := s.PriorityClasses.get(intent)
		if *pc == nil {
			*pc = &PriorityClass{}
		}
		(*pc).Name = or((*pc).Name, intent)
		if (*pc).Value == nil {
			v := defaultPriorities[intent]
			(*pc).Value = &v
		}
	}
}

func (p *PriorityClasses) get(intent string) **PriorityClass {
	switch intent {
	case trace.IntentPerformance:
		return &p.Performance
	case trace.IntentEco:
		return &p.Eco
	default:
		return &p.Standard
	}
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (s *Spec) validateTopology(l *errList) {
	t := s.Topology
	if t == nil {
		return
	}
	p := fieldPath{"topology"}
	dns(l, p.key("name"), t.Name)
	for _, k := range []struct{ f, v string }{{"blockLabel", t.BlockLabel}, {"rackLabel", t.RackLabel}} {
		if errs := validation.IsQualifiedName(k.v); len(errs) > 0 {
			l.add(p.key(k.f), "invalid label key %q: %s", k.v, strings.Join(errs, "; "))
		} else if k.v == hostnameLabel {
			l.add(p.key(k.f), "%s is the implicit lowest level; choose another key", hostnameLabel)
		}
	}
	if t.BlockLabel == t.RackLabel {
		l.add(p.key("rackLabel"), "must differ from blockLabel %q", t.BlockLabel)
	}
	if t.NodesPerRack < 0 {
		l.add(p.key("nodesPerRack"), "must be > 0, got %d", t.NodesPerRack)
	}
	if t.RacksPerBlock < 0 {
		l.add(p.key("racksPerBlock"), "must be > 0, got %d", t.RacksPerBlock)
	}
	switch t.GangLevel {
	case LevelBlock, LevelRack, LevelHostname:
	default:
		l.add(p.key("gangLevel"), "must be block, rack or hostname, got %q", t.GangLevel)
	}
}

func (s *Spec) validatePools(l *errList) {
	s.flavors = nil
	if len(s.NodePools) == 0 {
		l.add(fieldPath{"nodePools"}, "at least one node pool is required")
	}
	seen := map[string]int{}
	byFlavor := map[string]*flavor{}
	for i := range s.NodePools {
		np := &s.NodePools[i]
		p := fieldPath{"nodePools"}.idx(i)
		if np.Name == "" {
			l.add(p.key("name"), "required")
		} else if errs := validation.IsDNS1123Label(np.Name); len(errs) > 0 {
			l.add(p.key("name"), "invalid pool name %q: %s", np.Name, strings.Join(errs, "; "))
		} else if j, dup := seen[np.Name]; dup {
			l.add(p.key("name"), "duplicate pool name %q (also nodePools[%d])", np.Name, j)
		} else if n := len(np.Name) + 1 + nodeIndexWidth(np.Count); n > validation.LabelValueMaxLength {
			l.add(p.key("name"), "pool name %q is too long: its node names have %d characters, the limit is %d", np.Name, n, validation.LabelValueMaxLength)
		}
		seen[np.Name] = i
		fam, ok := catalog[np.GPUFamily]
		if !ok {
			l.add(p.key("gpuFamily"), "unknown GPU family %q (one of %s)", np.GPUFamily, strings.Join(familyNames(), ", "))
		}
		if np.Count <= 0 {
			l.add(p.key("count"), "must be > 0, got %d", np.Count)
		}
		switch {
		case ok && fam.GPU() && np.GPUsPerNode <= 0:
			l.add(p.key("gpusPerNode"), "must be > 0 for GPU family %s, got %d", fam.Name, np.GPUsPerNode)
		case ok && !fam.GPU() && np.GPUsPerNode != 0:
			l.add(p.key("gpusPerNode"), "must be 0 or omitted for a CPU pool, got %d", np.GPUsPerNode)
		}
		positiveQuantity(l, p.key("cpu"), np.CPU)
		positiveQuantity(l, p.key("memory"), np.Memory)
		if np.Pods < 0 {
			l.add(p.key("pods"), "must be > 0, got %d", np.Pods)
		}
		reserved := s.reservedLabels(fam)
		for _, k := range sortedKeys(np.Labels) {
			v := np.Labels[k]
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				l.add(p.key("labels").key(k), "invalid label key: %s", strings.Join(errs, "; "))
			} else if reserved[k] {
				l.add(p.key("labels").key(k), "label is set by kueuelab from the pool's family and topology")
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				l.add(p.key("labels").key(k), "invalid label value %q: %s", v, strings.Join(errs, "; "))
			}
		}
		for j, t := range np.Taints {
			tp := p.key("taints").idx(j)
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				l.add(tp.key("key"), "invalid taint key %q: %s", t.Key, strings.Join(errs, "; "))
			} else if t.Key == kwokTaintKey {
				l.add(tp.key("key"), "%s is KWOK's own taint, added to every node", kwokTaintKey)
			}
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				l.add(tp.key("value"), "invalid taint value %q: %s", t.Value, strings.Join(errs, "; "))
			}
			switch corev1.TaintEffect(t.Effect) {
			case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			default:
				l.add(tp.key("effect"), "must be NoSchedule, PreferNoSchedule or NoExecute, got %q", t.Effect)
			}
		}
		if np.Topology != nil {
			if s.Topology == nil {
				l.add(p.key("topology"), "needs a spec-level topology (block and rack label keys)")
			}
			if np.Topology.NodesPerRack < 0 {
				l.add(p.key("topology").key("nodesPerRack"), "must be > 0, got %d", np.Topology.NodesPerRack)
			}
			if np.Topology.RacksPerBlock < 0 {
				l.add(p.key("topology").key("racksPerBlock"), "must be > 0, got %d", np.Topology.RacksPerBlock)
			}
		}
		if ok {
			s.validateMIG(l, p, np, fam)
			s.validateTimeSlicing(l, p, np, fam)
		}
		if !ok {
			continue
		}
		name := flavorFor(fam.Name, np.sharing())
		f := byFlavor[name]
		if f == nil {
			f = &flavor{Name: name, Family: fam, MIG: np.MIG != nil, Replicas: np.replicas()}
			byFlavor[f.Name] = f
			s.flavors = append(s.flavors, f)
		} else if f.Replicas != np.replicas() {
			l.add(p.key("timeSlicing").key("replicas"), "pools of flavor %s time-slice their GPUs alike: %s has %d replicas, this pool %d", f.Name, f.Pools[0].Name, f.Replicas, np.replicas())
		}
		f.Pools = append(f.Pools, np)
	}
}

// reservedLabels are the node label keys kueuelab sets itself.
func (s *Spec) reservedLabels(f family) map[string]bool {
	r := map[string]bool{hostnameLabel: true, "type": true, contract.GPUFamily: true, contract.Pool: true, contract.GPUSharing: true,
		contract.GFDReplicas: true, contract.GFDSharingStrategy: true, contract.GFDCount: true}
	if f.ProductLabel != "" {
		r[f.ProductLabel] = true
	}
	if s.Topology != nil {
		r[s.Topology.BlockLabel] = true
		r[s.Topology.RackLabel] = true
	}
	return r
}

func (s *Spec) flavor(name string) *flavor {
	for _, f := range s.flavors {
		if f.Name == name {
			return f
		}
	}
	return nil
}

func (s *Spec) flavorNames() string { return strings.Join(s.FlavorNames(), ", ") }

// FlavorNames are the ResourceFlavors the spec derives from its node pools, in the order
// Objects writes them.
func (s *Spec) FlavorNames() []string {
	names := make([]string, len(s.flavors))
	for i, f := range s.flavors {
		names[i] = f.Name
	}
	return names
}

func (s *Spec) cohort(name string) *Cohort {
	for i := range s.Cohorts {
		if s.Cohorts[i].Name == name {
			return &s.Cohorts[i]
		}
	}
	return nil
}

func (s *Spec) clusterQueue(name string) *ClusterQueue {
	for i := range s.ClusterQueues {
		if s.ClusterQueues[i].Name == name {
			return &s.ClusterQueues[i]
		}
	}
	return nil
}

func (s *Spec) team(name string) *Team {
	for i := range s.Teams {
		if s.Teams[i].Name == name {
			return &s.Teams[i]
		}
	}
	return nil
}

func (s *Spec) validateCohorts(l *errList) {
	seen := map[string]int{}
	for i, c := range s.Cohorts {
		p := fieldPath{"cohorts"}.idx(i)
		if dns(l, p.key("name"), c.Name) {
			if j, dup := seen[c.Name]; dup {
				l.add(p.key("name"), "duplicate cohort %q (also cohorts[%d])", c.Name, j)
			}
			seen[c.Name] = i
		}
		if c.Parent != "" {
			if c.Parent == c.Name {
				l.add(p.key("parent"), "a cohort cannot be its own parent")
			} else if s.cohort(c.Parent) == nil {
				l.add(p.key("parent"), "unknown cohort %q", c.Parent)
			}
		}
		weight(l, p.key("fairSharing"), c.FairSharing)
		s.validateQuotas(l, p.key("quotas"), c.Quotas, c.Parent != "", "a parent")
	}
	// A cycle disables every queue in it, so refuse it here.
	for i, c := range s.Cohorts {
		visited := map[string]bool{c.Name: true}
		for cur := s.cohort(c.Parent); cur != nil; cur = s.cohort(cur.Parent) {
			if visited[cur.Name] {
				l.add(fieldPath{"cohorts"}.idx(i).key("parent"), "cohort %q is part of a parent cycle", c.Name)
				break
			}
			visited[cur.Name] = true
		}
	}
}

func (s *Spec) validateQueues(l *errList) {
	if len(s.ClusterQueues) == 0 {
		l.add(fieldPath{"clusterQueues"}, "at least one ClusterQueue is required")
	}
	seen := map[string]int{}
	for i := range s.ClusterQueues {
		q := &s.ClusterQueues[i]
		p := fieldPath{"clusterQueues"}.idx(i)
		if dns(l, p.key("name"), q.Name) {
			if j, dup := seen[q.Name]; dup {
				l.add(p.key("name"), "duplicate ClusterQueue %q (also clusterQueues[%d])", q.Name, j)
			}
			seen[q.Name] = i
		}
		if q.Cohort != "" && s.cohort(q.Cohort) == nil {
			l.add(p.key("cohort"), "unknown cohort %q (declare it under cohorts)", q.Cohort)
		}
		oneOf(l, p.key("queueingStrategy"), q.QueueingStrategy, "BestEffortFIFO", "StrictFIFO")
		if pr := q.Preemption; pr != nil {
			pp := p.key("preemption")
			oneOf(l, pp.key("reclaimWithinCohort"), or(pr.ReclaimWithinCohort, "Never"), "Never", "LowerPriority", "Any")
			oneOf(l, pp.key("withinClusterQueue"), or(pr.WithinClusterQueue, "Never"), "Never", "LowerPriority", "LowerOrNewerEqualPriority")
			if b := pr.BorrowWithinCohort; b != nil {
				oneOf(l, pp.key("borrowWithinCohort").key("policy"), b.Policy, "Never", "LowerPriority")
				if or(pr.ReclaimWithinCohort, "Never") == "Never" && b.Policy != "Never" {
					l.add(pp.key("borrowWithinCohort").key("policy"), "needs reclaimWithinCohort other than Never (Kueue rejects the combination)")
				}
			}
		}
		weight(l, p.key("fairSharing"), q.FairSharing)
		if ff := q.FlavorFungibility; ff != nil {
			oneOf(l, p.key("flavorFungibility").key("whenCanBorrow"), or(ff.WhenCanBorrow, "MayStopSearch"), "MayStopSearch", "TryNextFlavor")
			oneOf(l, p.key("flavorFungibility").key("whenCanPreempt"), or(ff.WhenCanPreempt, "TryNextFlavor"), "MayStopSearch", "TryNextFlavor")
			if ff.Preference != "" {
				oneOf(l, p.key("flavorFungibility").key("preference"), ff.Preference, "BorrowingOverPreemption", "PreemptionOverBorrowing")
				// Kueue's CEL rule on the ClusterQueue: the preference chooses among flavors only
				// when the search goes on past borrowing and past preemption.
				if or(ff.WhenCanBorrow, "MayStopSearch") != "TryNextFlavor" || or(ff.WhenCanPreempt, "TryNextFlavor") != "TryNextFlavor" {
					l.add(p.key("flavorFungibility").key("preference"), "can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor")
				}
			}
		}
		if as := q.AdmissionScope; as != nil {
			oneOf(l, p.key("admissionScope").key("admissionMode"), as.AdmissionMode, "UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing")
		}
		if len(q.Quotas) == 0 {
			l.add(p.key("quotas"), "at least one flavor quota is required")
		}
		s.validateQuotas(l, p.key("quotas"), q.Quotas, q.Cohort != "", "a cohort")
	}
}

func (s *Spec) validateQuotas(l *errList, p fieldPath, quotas []FlavorQuota, canShare bool, shareNeeds string) {
	seen := map[string]int{}
	for i, fq := range quotas {
		fp := p.idx(i)
		f := s.flavor(fq.Flavor)
		switch {
		case fq.Flavor == "":
			l.add(fp.key("flavor"), "required")
		case f == nil:
			l.add(fp.key("flavor"), "unknown flavor %q (flavors derived from nodePools: %s)", fq.Flavor, s.flavorNames())
		}
		if j, dup := seen[fq.Flavor]; dup {
			l.add(fp.key("flavor"), "flavor %q listed twice (also index %d)", fq.Flavor, j)
		}
		seen[fq.Flavor] = i
		if len(fq.Resources) == 0 {
			l.add(fp.key("resources"), "at least one resource is required")
		}
		for _, name := range sortedKeys(fq.Resources) {
			q := fq.Resources[name]
			rp := fp.key("resources").key(name)
			rn := corev1.ResourceName(name)
			switch {
			case rn == corev1.ResourceCPU || rn == corev1.ResourceMemory || rn == corev1.ResourcePods:
			case gpuResource(rn):
				if f != nil && !f.Family.GPU() {
					l.add(rp, "flavor %s has no GPUs; leave %s out (it is rendered as 0)", f.Name, name)
				} else if f != nil && f.MIG {
					l.add(rp, "flavor %s is MIG-partitioned: its GPUs are quota'd as %s (GPU memory of the slices), not %s", f.Name, MIGQuotaResource, name)
				} else if f != nil && f.Family.Resource != rn {
					l.add(rp, "flavor %s provides %s, not %s", f.Name, f.Family.Resource, name)
				}
			case rn == MIGQuotaResource:
				if f != nil && !f.MIG {
					l.add(rp, "flavor %s is not MIG-partitioned; %s is the quota of MIG flavors", f.Name, name)
				}
			default:
				l.add(rp, "unsupported resource %q (cpu, memory, pods, nvidia.com/gpu, amd.com/gpu or, on a MIG flavor, %s)", name, MIGQuotaResource)
			}
			nominal, ok := quantity(l, rp.key("nominalQuota"), q.NominalQuota, true)
			for _, lim := range []struct {
				f string
				v *string
			}{{"borrowingLimit", q.BorrowingLimit}, {"lendingLimit", q.LendingLimit}} {
				if lim.v == nil {
					continue
				}
				v, limOK := quantity(l, rp.key(lim.f), *lim.v, true)
				if !canShare {
					l.add(rp.key(lim.f), "needs %s to borrow from or lend to", shareNeeds)
				} else if lim.f == "lendingLimit" && ok && limOK && v.Cmp(nominal) > 0 {
					l.add(rp.key(lim.f), "%s exceeds nominalQuota %s", v.String(), nominal.String())
				}
			}
		}
	}
}

func (s *Spec) validateTeams(l *errList) {
	if len(s.Teams) == 0 {
		l.add(fieldPath{"teams"}, "at least one team is required")
	}
	seen := map[string]int{}
	for i, t := range s.Teams {
		p := fieldPath{"teams"}.idx(i)
		if t.Name == "" {
			l.add(p.key("name"), "required")
		} else if errs := validation.IsDNS1123Label(t.Name); len(errs) > 0 {
			l.add(p.key("name"), "team name %q is not a valid namespace name: %s", t.Name, strings.Join(errs, "; "))
		} else if j, dup := seen[t.Name]; dup {
			l.add(p.key("name"), "duplicate team %q (also teams[%d])", t.Name, j)
		}
		seen[t.Name] = i
		dns(l, p.key("localQueue"), t.LocalQueue)
		q := s.clusterQueue(t.ClusterQueue)
		switch {
		case t.ClusterQueue == "":
			l.add(p.key("clusterQueue"), "required")
		case q == nil:
			l.add(p.key("clusterQueue"), "unknown ClusterQueue %q", t.ClusterQueue)
		case q.NamespaceSelector != nil:
			ns := namespaceLabels(t.Name)
			for k, v := range q.NamespaceSelector.MatchLabels {
				if ns[k] != v {
					l.add(p.key("clusterQueue"), "ClusterQueue %s's namespaceSelector (%s=%s) does not select namespace %s", q.Name, k, v, t.Name)
					break
				}
			}
		}
	}
	for _, ns := range sortedKeys(s.NamespaceMapping) {
		if team := s.NamespaceMapping[ns]; s.team(team) == nil {
			l.add(fieldPath{"namespaceMapping", ns}, "unknown team %q", team)
		}
	}
	if s.DefaultTeam != "" && s.team(s.DefaultTeam) == nil {
		l.add(fieldPath{"defaultTeam"}, "unknown team %q", s.DefaultTeam)
	}
}

func (s *Spec) validatePriorities(l *errList) {
	seen := map[string]string{}
	for _, intent := range []string{trace.IntentPerformance, trace.IntentStandard, trace.IntentEco} {
		pc := *s.PriorityClasses.get(intent)
		p := fieldPath{"priorityClasses", intent, "name"}
		if dns(l, p, pc.Name) {
			if other, dup := seen[pc.Name]; dup {
				l.add(p, "class %q is also used by %s; each intent needs its own class", pc.Name, other)
			}
			seen[pc.Name] = intent
		}
	}
}

// namespaceLabels are the labels of a team's rendered Namespace.
func namespaceLabels(team string) map[string]string {
	return map[string]string{corev1.LabelMetadataName: team, contract.Team: team}
}

func dns(l *errList, p fieldPath, v string) bool {
	if v == "" {
		l.add(p, "required")
		return false
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		l.add(p, "invalid name %q: %s", v, strings.Join(errs, "; "))
		return false
	}
	return true
}

func oneOf(l *errList, p fieldPath, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	l.add(p, "must be one of %s, got %q", strings.Join(allowed, ", "), v)
}

func quantity(l *errList, p fieldPath, v string, zeroOK bool) (resource.Quantity, bool) {
	if v == "" {
		l.add(p, "required")
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		l.add(p, "invalid quantity %q: %v", v, err)
		return q, false
	}
	if q.Sign() < 0 || (!zeroOK && q.Sign() == 0) {
		bound := ">= 0"
		if !zeroOK {
			bound = "> 0"
		}
		l.add(p, "must be %s, got %s", bound, v)
		return q, false
	}
	return q, true
}

func positiveQuantity(l *errList, p fieldPath, v string) { quantity(l, p, v, false) }

func weight(l *errList, p fieldPath, fs *FairSharing) {
	if fs != nil {
		quantity(l, p.key("weight"), fs.Weight, true)
	}
}

func nodeIndexWidth(count int) int {
	w := len(fmt.Sprint(count - 1))
	if w < 3 {
		return 3
	}
	return w
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
