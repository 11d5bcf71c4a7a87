package snapshot

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// builder turns what Read listed into the snapshot.
type builder struct {
	snap       *Snapshot
	q          *kueuewl.Queues
	nodes      []corev1.Node
	namespaces []corev1.Namespace
	items      []kueuewl.Summary
	clock      *kueueclock.Published
	now        time.Time
	opts       Options
	// origin is the wall-clock instant at 0 on the state's clock (RFC 3339; "" for a replay's
	// trace clock).
	origin string

	spec     rcluster.Spec
	problems []string
	// flavorOf maps a cluster ResourceFlavor to the spec's flavor ("" left out).
	flavorOf map[string]string
	// teamOf maps a LocalQueue (namespace/name) to its team.
	teamOf map[string]string
	// intentOf maps a priority value to its intent class.
	intentOf map[int32]string
}

func (b *builder) build() error {
	for _, p := range b.q.Problems {
		if p.Fatal {
			b.problems = append(b.problems, p.String())
		} else {
			b.snap.warn("%s", p)
		}
	}
	b.spec = rcluster.Spec{APIVersion: rcluster.APIVersion, Kind: rcluster.Kind, Metadata: rcluster.Metadata{Name: b.opts.Name}}
	b.pools()
	b.queues()
	b.teams()
	b.selectors()
	b.topology()
	live := b.liveItems()
	b.priorities(live)
	if err := fatal(b.problems); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&b.spec); err != nil {
		return fmt.Errorf("snapshot: cluster spec: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("snapshot: cluster spec: %w", err)
	}
	data := buf.Bytes()
	spec, err := rcluster.Parse("cluster.yaml (snapshot)", data)
	if err != nil {
		return fmt.Errorf("snapshot: the cluster spec read from the cluster does not load (a kueuelab bug, or a cluster the spec cannot express):\n%w\n---\n%s", err, data)
	}
	b.snap.Spec, b.snap.SpecYAML = spec, data
	return b.workloads(live)
}

// familyFallback is the family of a node with a vendor's GPUs that no catalog label names: the
// physics of a forecast's pods (speed, power) is then that family's, which Kueue's decisions do
// not depend on.
var familyFallback = map[corev1.ResourceName]string{"nvidia.com/gpu": "H100-SXM", "amd.com/gpu": "MI300X"}

// nodeFamily is a node's catalog family and whether the catalog's labels said it.
func nodeFamily(n *corev1.Node) (string, bool) {
	if f, ok := rcluster.FamilyOfNode(n.Labels); ok {
		return f, true
	}
	for _, r := range slices.Sorted(maps.Keys(familyFallback)) {
		if q, ok := n.Status.Allocatable[r]; ok && !q.IsZero() {
			return familyFallback[r], false
		}
	}
	return rcluster.CPUFamily, true
}

// usable reports whether pods admitted to flavor f can run on node n: it is schedulable and f's
// tolerations (which Kueue adds to admitted pods) tolerate its NoSchedule and NoExecute taints.
func usable(n *corev1.Node, f *kueuewl.Flavor) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule || t.Key == kwokTaint {
			continue
		}
		ok := false
		for _, tol := range f.Tolerations {
			if tolerates(tol, t) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// tolerates is Kubernetes' toleration match (operators Exists and Equal).
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Key != "" && tol.Value == t.Value
	}
	return false
}

// kwokTaint is KWOK's own taint, which kueuelab's pods tolerate and the spec adds to every node.
const kwokTaint = "kwok.x-k8s.io/node"

// nodeKind is what makes nodes one spec flavor's: their GPU family, and the replicas per GPU of
// time-sliced GPUs (1: whole devices).
type nodeKind struct {
	family   string
	replicas int
}

// flavor is the spec's flavor of such nodes.
func (k nodeKind) flavor() string {
	if k.replicas > 1 {
		return rcluster.TimeSlicedFlavorOf(k.family)
	}
	return rcluster.FlavorOf(k.family)
}

func (k nodeKind) String() string {
	if k.replicas > 1 {
		return fmt.Sprintf("%s (time-sliced, %d replicas)", k.family, k.replicas)
	}
	return k.family
}

// pools maps each ResourceFlavor to the spec's flavor of its nodes' family and groups its nodes
// into pools of identical nodes. A spec flavor is one family's, named after it, selecting that
// family's product label: a cluster flavor of another name is renamed (and so are admissions'
// flavors), one over nodes of several families or two over one family cannot be expressed.
func (b *builder) pools() {
	b.flavorOf = map[string]string{}
	byFamily := map[nodeKind]string{} // family -> cluster flavor
	nodeSets := map[string][]string{}
	type poolKey struct {
		nodeKind
		cpu, mem, taints, model string
		pods, gpus              int64
	}
	pools := map[poolKey][]string{}
	var keys []poolKey
	claimed := map[string]string{} // node -> cluster flavor
	flavors := slices.Clone(b.q.Flavors)
	slices.SortFunc(flavors, func(a, c kueuewl.Flavor) int { return cmp.Compare(a.Name, c.Name) })
	for i := range flavors {
		f := &flavors[i]
		what := "ResourceFlavor/" + f.Name
		if len(f.NodeTaints) > 0 {
			b.snap.warn("%s: spec.nodeTaints: left out: the spec's flavors have no taints of their own (a workload without the toleration would be admitted in the forecast)", what)
		}
		sel := labels.SelectorFromSet(f.NodeLabels)
		families := map[nodeKind][]*corev1.Node{}
		for j := range b.nodes {
			n := &b.nodes[j]
			if !sel.Matches(labels.Set(n.Labels)) || !usable(n, f) {
				continue
			}
			fam, known := nodeFamily(n)
			if !known {
				b.snap.warn("Node/%s: labels: no GPU product label of the catalog; taken as %s (the physics of its pods in a forecast; Kueue's decisions do not depend on it)", n.Name, fam)
			}
			r, err := contract.GPUReplicas(n.Labels)
			if err != nil {
				b.snap.warn("Node/%s: %v; left out", n.Name, err)
				continue
			}
			families[nodeKind{fam, r}] = append(families[nodeKind{fam, r}], n)
		}
		switch len(families) {
		case 0:
			b.snap.warn("%s: spec.nodeLabels: selects no schedulable node; left out with its quotas (Kueue would admit workloads there whose pods could not run)", what)
			continue
		case 1:
		default:
			var kinds []string
			for k := range families {
				kinds = append(kinds, k.String())
			}
			slices.Sort(kinds)
			b.problems = append(b.problems, fmt.Sprintf("%s: spec.nodeLabels %v select nodes of the families %s: a spec flavor is one family's nodes (give each family its own ResourceFlavor)",
				what, f.NodeLabels, strings.Join(kinds, ", ")))
			continue
		}
		fam := slices.Collect(maps.Keys(families))[0]
		var set []string
		for _, n := range families[fam] {
			set = append(set, n.Name)
		}
		slices.Sort(set)
		if other, dup := byFamily[fam]; dup {
			// Flavors over the same nodes (per-team names for one pool) are one spec flavor, which
			// keeps Kueue's decisions where no queue and no cohort tree holds quota of two of them
			// (checkAliases): there they would pool quota Kueue keeps apart.
			if !slices.Equal(set, nodeSets[other]) {
				b.problems = append(b.problems, fmt.Sprintf("%s: spec.nodeLabels: selects %s nodes other than ResourceFlavor/%s's: the spec has one flavor per GPU family (and one per family's time-sliced nodes)", what, fam, other))
				continue
			}
			b.flavorOf[f.Name] = fam.flavor()
			b.snap.warn("%s: metadata.name: selects the nodes of ResourceFlavor/%s; both are the spec's flavor %s", what, other, fam.flavor())
			continue
		}
		byFamily[fam] = f.Name
		nodeSets[f.Name] = set
		name := fam.flavor()
		b.flavorOf[f.Name] = name
		if name != f.Name {
			b.snap.warn("%s: metadata.name: the spec's flavor of %s nodes is %s; quotas and admissions name it so", what, fam, name)
		}
		for _, n := range families[fam] {
			if other, ok := claimed[n.Name]; ok {
				b.problems = append(b.problems, fmt.Sprintf("%s: spec.nodeLabels: node %s is also ResourceFlavor/%s's: a spec's node belongs to one flavor", what, n.Name, other))
				continue
			}
			claimed[n.Name] = f.Name
			k := poolKey{nodeKind: fam, model: n.Annotations[contract.CPUModel]}
			a := n.Status.Allocatable
			k.cpu, k.mem, k.pods = a.Cpu().String(), a.Memory().String(), a.Pods().Value()
			if r := rcluster.FamilyResource(fam.family); r != "" {
				q := a[corev1.ResourceName(r)]
				k.gpus = q.Value()
				if k.gpus == 0 {
					b.snap.warn("Node/%s: status.allocatable: no %s allocatable; left out", n.Name, r)
					continue
				}
				// A time-sliced node advertises its replicas: the pool has the physical GPUs.
				if k.gpus%int64(fam.replicas) != 0 {
					b.snap.warn("Node/%s: status.allocatable: %d %s, not a multiple of its %d replicas per GPU (label %s); left out", n.Name, k.gpus, r, fam.replicas, contract.GFDReplicas)
					continue
				}
				k.gpus /= int64(fam.replicas)
			}
			if a.Cpu().IsZero() || a.Memory().IsZero() {
				b.snap.warn("Node/%s: status.allocatable: no cpu or memory allocatable; left out", n.Name)
				continue
			}
			var ts []string
			for _, t := range n.Spec.Taints {
				if t.Key != kwokTaint && !strings.HasPrefix(t.Key, "node.kubernetes.io/") {
					ts = append(ts, t.Key+"="+t.Value+":"+string(t.Effect))
				}
			}
			slices.Sort(ts)
			k.taints = strings.Join(ts, ",")
			if _, ok := pools[k]; !ok {
				keys = append(keys, k)
			}
			pools[k] = append(pools[k], n.Name)
		}
	}
	for j := range b.nodes {
		if _, ok := claimed[b.nodes[j].Name]; !ok {
			b.snap.warn("Node/%s: no ResourceFlavor's nodeLabels select it (or it is unschedulable, or tainted against every flavor); left out", b.nodes[j].Name)
		}
	}
	seen := map[string]int{}
	for _, k := range keys {
		name := poolName(k.nodeKind, pools[k], seen)
		np := rcluster.NodePool{Name: name, GPUFamily: k.family, Count: len(pools[k]), GPUsPerNode: int(k.gpus),
			CPU: k.cpu, Memory: k.mem, Pods: int(k.pods), CPUModel: k.model}
		if k.replicas > 1 {
			np.TimeSlicing = &rcluster.PoolTimeSlicing{Replicas: k.replicas}
		}
		if k.taints != "" {
			for _, t := range strings.Split(k.taints, ",") {
				kv, eff, _ := strings.Cut(t, ":")
				key, val, _ := strings.Cut(kv, "=")
				np.Taints = append(np.Taints, rcluster.Taint{Key: key, Value: val, Effect: eff})
			}
		}
		b.spec.NodePools = append(b.spec.NodePools, np)
	}
}

// poolName names a pool after the kueuelab pool its nodes carry when they agree on one, else
// after its family, numbered when the name is taken.
func poolName(kind nodeKind, nodes []string, seen map[string]int) string {
	base := kind.flavor()
	// The spec names nodes <pool>-<NNN>: keep the pool name short enough for a node name.
	if len(base) > 40 {
		base = base[:40]
	}
	seen[base]++
	if seen[base] == 1 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, seen[base])
}

// queues writes the ClusterQueues and Cohorts with the spec's flavor names.
func (b *builder) queues() {
	b.spec.Cohorts = nil
	for _, c := range b.q.Cohorts {
		c.Quotas = b.renameQuotas("Cohort/"+c.Name, c.Quotas)
		b.spec.Cohorts = append(b.spec.Cohorts, c)
	}
	slices.SortFunc(b.spec.Cohorts, func(a, c rcluster.Cohort) int { return cmp.Compare(a.Name, c.Name) })
	for _, cq := range b.q.ClusterQueues {
		s := cq.ClusterQueue
		what := "ClusterQueue/" + s.Name
		s.Quotas = b.renameQuotas(what, s.Quotas)
		if len(s.Quotas) == 0 {
			b.problems = append(b.problems, fmt.Sprintf("%s: spec.resourceGroups: no quota on a flavor with nodes: the spec needs one", what))
		}
		b.spec.ClusterQueues = append(b.spec.ClusterQueues, s)
	}
	slices.SortFunc(b.spec.ClusterQueues, func(a, c rcluster.ClusterQueue) int { return cmp.Compare(a.Name, c.Name) })
	b.checkAliases()
}

// checkAliases refuses cluster flavors that became one spec flavor where Kueue keeps their quotas
// apart: in one queue, or in queues and cohorts of one cohort tree (which borrow from each other
// per flavor).
func (b *builder) checkAliases() {
	parent := map[string]string{}
	for _, c := range b.q.Cohorts {
		parent[c.Name] = c.Parent
	}
	root := func(c string) string {
		for seen := 0; parent[c] != "" && seen < len(parent); seen++ {
			c = parent[c]
		}
		return c
	}
	// scope -> spec flavor -> cluster flavors with quota there
	uses := map[string]map[string]map[string]bool{}
	use := func(scope string, quotas []rcluster.FlavorQuota) {
		for _, fq := range quotas {
			name, ok := b.flavorOf[fq.Flavor]
			if !ok {
				continue
			}
			if uses[scope] == nil {
				uses[scope] = map[string]map[string]bool{}
			}
			if uses[scope][name] == nil {
				uses[scope][name] = map[string]bool{}
			}
			uses[scope][name][fq.Flavor] = true
		}
	}
	for _, cq := range b.q.ClusterQueues {
		use("ClusterQueue/"+cq.Name, cq.Quotas)
		if cq.Cohort != "" {
			use("cohort tree of Cohort/"+root(cq.Cohort), cq.Quotas)
		}
	}
	for _, c := range b.q.Cohorts {
		use("cohort tree of Cohort/"+root(c.Name), c.Quotas)
	}
	for _, scope := range sortedKeys(uses) {
		for _, name := range sortedKeys(uses[scope]) {
			if fl := uses[scope][name]; len(fl) > 1 {
				b.problems = append(b.problems, fmt.Sprintf("%s: quotas on ResourceFlavors %s, which select the same nodes: the spec's one flavor %s would pool what Kueue keeps apart",
					scope, strings.Join(sortedKeys(fl), ", "), name))
			}
		}
	}
}

// renameQuotas names each flavor quota by the spec's flavor and leaves out what the spec's
// flavor cannot hold: the quotas of flavors left out, and zero quotas of a GPU resource the
// flavor's nodes do not have (Kueue requires every flavor of a group to list every resource).
func (b *builder) renameQuotas(what string, in []rcluster.FlavorQuota) []rcluster.FlavorQuota {
	var out []rcluster.FlavorQuota
	for _, fq := range in {
		name, ok := b.flavorOf[fq.Flavor]
		if !ok {
			for r, q := range fq.Resources {
				if v := resource.MustParse(q.NominalQuota); !v.IsZero() {
					b.snap.warn("%s: quota of flavor %s: %s %s left out with the flavor", what, fq.Flavor, r, q.NominalQuota)
				}
			}
			continue
		}
		res := map[string]rcluster.Quota{}
		fam := familyOfFlavor(name)
		for r, q := range fq.Resources {
			if gpu := r == "nvidia.com/gpu" || r == "amd.com/gpu"; gpu && r != rcluster.FamilyResource(fam) {
				if v := resource.MustParse(q.NominalQuota); !v.IsZero() {
					b.problems = append(b.problems, fmt.Sprintf("%s: quota of flavor %s: %s %s on %s nodes, which have no %s", what, fq.Flavor, r, q.NominalQuota, fam, r))
				}
				continue
			}
			res[r] = q
		}
		if len(res) == 0 {
			continue
		}
		out = append(out, rcluster.FlavorQuota{Flavor: name, Resources: res})
	}
	return out
}

// familyOfFlavor is the catalog family a spec flavor name stands for (its whole or its
// time-sliced GPUs).
func familyOfFlavor(flavor string) string {
	for _, f := range []string{"H100-SXM", "H100-NVL", "H200-SXM", "A100-SXM", "A100-PCIE", "L40S", "L4", "MI300X", rcluster.CPUFamily} {
		if rcluster.FlavorOf(f) == flavor || rcluster.TimeSlicedFlavorOf(f) == flavor {
			return f
		}
	}
	return ""
}

// selector turns a ClusterQueue's namespaceSelector into the spec's. The spec's teams are
// namespaces labelled only with their name, so a selector on other labels cannot be kept as is:
// when every namespace of the queue's LocalQueues matches it, it is dropped (it selects them
// all, which is all the forecast submits); when one does not, Kueue admits nothing from that
// LocalQueue, which the spec cannot say.
func (b *builder) selector(what string, sel *metav1.LabelSelector) *rcluster.Selector {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		b.problems = append(b.problems, fmt.Sprintf("%s: spec.namespaceSelector: %v", what, err))
		return nil
	}
	nsLabels := map[string]map[string]string{}
	for _, ns := range b.namespaces {
		nsLabels[ns.Name] = ns.Labels
	}
	name := strings.TrimPrefix(what, "ClusterQueue/")
	for _, lq := range b.q.LocalQueues {
		if lq.ClusterQueue == name && !s.Matches(labels.Set(nsLabels[lq.Namespace])) {
			b.problems = append(b.problems, fmt.Sprintf("%s: spec.namespaceSelector %s does not select namespace %s of LocalQueue %s/%s: Kueue admits none of its workloads, which the spec cannot say",
				what, s, lq.Namespace, lq.Namespace, lq.Name))
		}
	}
	// Kept when it selects every team of the queue as the spec labels a team's namespace.
	keep := len(sel.MatchExpressions) == 0
	for _, t := range b.spec.Teams {
		if t.ClusterQueue == name && !s.Matches(labels.Set{corev1.LabelMetadataName: t.Name, contract.Team: t.Name}) {
			keep = false
		}
	}
	if keep {
		return &rcluster.Selector{MatchLabels: maps.Clone(sel.MatchLabels)}
	}
	b.snap.warn("%s: spec.namespaceSelector %s: dropped (it selects every namespace of its LocalQueues, the only ones a forecast submits to)", what, s)
	return nil
}

// selectors sets the queues' namespace selectors, once the teams are known.
func (b *builder) selectors() {
	sels := map[string]*metav1.LabelSelector{}
	for _, cq := range b.q.ClusterQueues {
		sels[cq.Name] = cq.Selector
	}
	for i := range b.spec.ClusterQueues {
		q := &b.spec.ClusterQueues[i]
		q.NamespaceSelector = b.selector("ClusterQueue/"+q.Name, sels[q.Name])
	}
}

// teams makes a team of every LocalQueue: its namespace's name for the first (by name) of the
// namespace, "<namespace>-<queue>" for the others, since a spec's team is one namespace with one
// LocalQueue; the live workloads of such a queue get the team's name as their namespace.
func (b *builder) teams() {
	b.teamOf = map[string]string{}
	lqs := slices.Clone(b.q.LocalQueues)
	slices.SortFunc(lqs, func(a, c kueuewl.LocalQueue) int {
		return cmp.Or(cmp.Compare(a.Namespace, c.Namespace), cmp.Compare(a.Name, c.Name))
	})
	cqs := map[string]bool{}
	for _, cq := range b.spec.ClusterQueues {
		cqs[cq.Name] = true
	}
	used := map[string]bool{}
	for _, lq := range lqs {
		what := "LocalQueue/" + lq.Namespace + "/" + lq.Name
		if !cqs[lq.ClusterQueue] {
			b.snap.warn("%s: spec.clusterQueue: %q does not exist; left out with its workloads (Kueue admits none of them)", what, lq.ClusterQueue)
			continue
		}
		team := lq.Namespace
		if used[team] {
			team = queueTeam(lq.Namespace, lq.Name)
			b.snap.warn("%s: metadata.namespace: a spec's team is a namespace with one LocalQueue: this one's is team %s, which its workloads' namespace names", what, team)
		}
		if used[team] {
			b.problems = append(b.problems, fmt.Sprintf("%s: metadata.name: team %s is taken", what, team))
			continue
		}
		used[team] = true
		b.teamOf[lq.Namespace+"/"+lq.Name] = team
		b.spec.Teams = append(b.spec.Teams, rcluster.Team{Name: team, ClusterQueue: lq.ClusterQueue, LocalQueue: lq.Name})
	}
}

// queueTeam is the team of a namespace's LocalQueue other than its first.
func queueTeam(namespace, queue string) string {
	team := namespace + "-" + queue
	if len(team) > validation.DNS1123LabelMaxLength {
		team = strings.TrimRight(team[:validation.DNS1123LabelMaxLength], "-")
	}
	return team
}

// TeamOf is the team of spec that a cluster's LocalQueue namespace/queue is, as a snapshot names
// teams: the namespace's own, or "<namespace>-<queue>" for a namespace's other LocalQueues. A
// replay's spec names its teams after their namespaces. ok is false when none is.
func TeamOf(spec *rcluster.Spec, namespace, queue string) (team string, ok bool) {
	for _, t := range spec.Teams {
		if t.LocalQueue == queue && (t.Name == namespace || t.Name == queueTeam(namespace, queue)) {
			return t.Name, true
		}
	}
	return "", false
}

// topology keeps a Topology of the spec's shape (two levels above the hostname), its rack and
// block sizes read from the nodes; the spec then labels its nodes itself, rack by rack.
func (b *builder) topology() {
	tops := slices.Clone(b.q.Topologies)
	slices.SortFunc(tops, func(a, c kueuewl.Topology) int { return cmp.Compare(a.Name, c.Name) })
	for i, t := range tops {
		what := "Topology/" + t.Name
		if i > 0 {
			b.snap.warn("%s: left out: the spec has one Topology (%s)", what, tops[0].Name)
			continue
		}
		if len(t.Levels) != 3 || t.Levels[2] != corev1.LabelHostname {
			b.snap.warn("%s: spec.levels %v: left out: the spec's topology is block, rack and %s (topology-aware placement is not forecast)", what, t.Levels, corev1.LabelHostname)
			continue
		}
		perRack, racksPerBlock := map[string]int{}, map[string]map[string]bool{}
		for _, n := range b.nodes {
			blk, rack := n.Labels[t.Levels[0]], n.Labels[t.Levels[1]]
			if rack == "" {
				continue
			}
			perRack[rack]++
			if racksPerBlock[blk] == nil {
				racksPerBlock[blk] = map[string]bool{}
			}
			racksPerBlock[blk][rack] = true
		}
		st := &rcluster.Topology{Name: t.Name, BlockLabel: t.Levels[0], RackLabel: t.Levels[1]}
		var sizes, blocks []int
		for _, v := range perRack {
			sizes = append(sizes, v)
		}
		for _, v := range racksPerBlock {
			blocks = append(blocks, len(v))
		}
		if len(sizes) > 0 {
			st.NodesPerRack, st.RacksPerBlock = slices.Max(sizes), slices.Max(blocks)
			if slices.Min(sizes) != st.NodesPerRack || slices.Min(blocks) != st.RacksPerBlock {
				b.snap.warn("%s: nodes' %s and %s labels: racks of %d to %d nodes and blocks of %d to %d racks; the spec lays every pool out in racks of %d nodes, %d racks a block",
					what, t.Levels[0], t.Levels[1], slices.Min(sizes), st.NodesPerRack, slices.Min(blocks), st.RacksPerBlock, st.NodesPerRack, st.RacksPerBlock)
			}
		}
		for _, f := range b.q.Flavors {
			if _, kept := b.flavorOf[f.Name]; kept && f.Topology != t.Name {
				b.snap.warn("ResourceFlavor/%s: spec.topologyName: %q; the spec's flavors all name Topology %s", f.Name, f.Topology, t.Name)
			}
		}
		b.spec.Topology = st
	}
}

// priorities maps the live workloads' priorities to the spec's three intent classes, keeping each
// priority's value (Kueue orders and preempts by the value) and its class's name. The spec has
// three classes, so more than three distinct priorities among the live workloads cannot be kept.
// The finished workloads' priorities join them where all fit in three, so that the history (its
// arrivals, a backtest's past) keeps its priorities too.
func (b *builder) priorities(live []*kueuewl.Summary) {
	names := map[int32]string{}
	add := func(it *kueuewl.Summary) {
		v := priority(it)
		if names[v] == "" {
			names[v] = it.Priority
		}
	}
	for _, it := range live {
		add(it)
	}
	withHistory := maps.Clone(names)
	for i := range b.items {
		it := &b.items[i]
		if it.Finished == nil {
			continue
		}
		if _, kept := b.historyTeam(it); !kept {
			continue
		}
		if _, ok := withHistory[priority(it)]; !ok {
			withHistory[priority(it)] = it.Priority
		}
	}
	if len(withHistory) <= 3 {
		names = withHistory
	} else if len(names) <= 3 {
		b.snap.warn("Workload priorities: the finished workloads have more than the spec's three classes beside the live ones': the history's other priorities map to the nearest class")
	}
	values := slices.Sorted(maps.Keys(names))
	slices.Reverse(values)
	var intents []string
	switch len(values) {
	case 0, 1:
		intents = []string{trace.IntentStandard}
	case 2:
		intents = []string{trace.IntentPerformance, trace.IntentStandard}
	case 3:
		intents = []string{trace.IntentPerformance, trace.IntentStandard, trace.IntentEco}
	default:
		var parts []string
		for _, v := range values {
			parts = append(parts, fmt.Sprintf("%d (%s)", v, cmp.Or(names[v], "no class")))
		}
		b.problems = append(b.problems, fmt.Sprintf("Workload priorities: the live workloads have %d priorities, %s: the spec has three classes (performance, standard, eco)",
			len(values), strings.Join(parts, ", ")))
		return
	}
	b.intentOf = map[int32]string{}
	taken := map[string]bool{}
	set := map[string]*rcluster.PriorityClass{}
	for i, v := range values {
		intent := intents[i]
		b.intentOf[v] = intent
		name := cmp.Or(names[v], intent)
		if taken[name] {
			name = fmt.Sprintf("%s-%d", name, v)
		}
		val := v
		set[intent] = &rcluster.PriorityClass{Name: name, Value: &val, Description: "read from the cluster"}
		taken[name] = true
	}
	used := map[string]bool{}
	for _, n := range names {
		used[n] = true
	}
	for _, w := range b.q.PriorityClasses {
		if !used[w.Name] {
			b.snap.warn("WorkloadPriorityClass/%s: left out (value %d): no workload, live or finished, has it, and the spec has three classes", w.Name, w.Value)
		}
	}
	for _, intent := range []string{trace.IntentPerformance, trace.IntentStandard, trace.IntentEco} {
		if set[intent] == nil {
			name := intent
			if taken[name] {
				name = "unused-" + intent
			}
			set[intent] = &rcluster.PriorityClass{Name: name, Description: "no live workload has this class"}
		}
	}
	// Unused classes keep the spec's default values, which need not fit among the cluster's:
	// no workload has them.
	b.spec.PriorityClasses = rcluster.PriorityClasses{Performance: set[trace.IntentPerformance], Standard: set[trace.IntentStandard], Eco: set[trace.IntentEco]}
}

// priority is a Workload's priority as Kueue orders it (none is 0).
func priority(it *kueuewl.Summary) int32 {
	if it.PriorityValue == nil {
		return 0
	}
	return *it.PriorityValue
}

// sortedKeys lists a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return keys
}
