// Package kubesched is the sim engine's kube-scheduler: it binds pods to the cluster spec's nodes
// one at a time with the plugins of kube-scheduler's default profile (v1.34) that decide where a
// batch pod lands on a kueuelab cluster, computed with the same integer arithmetic:
//
//   - filters: NodeResourcesFit (every requested resource, and the pod count, within the node's
//     allocatable minus what its pods request), NodeAffinity (the pod's nodeSelector; Kueue puts
//     the admitting flavor's node labels there), TaintToleration (NoSchedule and NoExecute taints
//     must be tolerated), for pods Kueue placed with Topology Aware Scheduling, the nodes of
//     their topology assignment, and, for pods with resource claims (MIG slices), DynamicResources:
//     the claims allocated from the node's ResourceSlices by upstream's allocator (dra.go);
//   - scores: NodeResourcesFit with a scoring strategy (LeastAllocated by default, MostAllocated,
//     or RequestedToCapacityRatio, each with per-resource weights, as NodeResourcesFitArgs) plus
//     NodeResourcesBalancedAllocation over cpu and memory, each with weight 1.
//
// Simplifications, each a choice for batch pods on spec-built nodes: every feasible node is
// scored (kube-scheduler scores a sample of large clusters, percentageOfNodesToScore); the other
// default plugins score every node of a kueuelab spec alike (no PreferNoSchedule taints,
// preferred affinities, images or services) and are left out; a tie between the best nodes goes
// to the node whose name sorts first, as in kueuelab's kube-scheduler (upstream's draws at random;
// runtime/tools/patches/kubernetes-v1.34.2-scheduler-tie-by-name.patch); a pod that fits
// nowhere waits and is retried whenever a pod leaves, without kube-scheduler's backoff.
package kubesched

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
)

// Scoring strategy types (NodeResourcesFitArgs.scoringStrategy.type).
const (
	LeastAllocated           = "LeastAllocated"
	MostAllocated            = "MostAllocated"
	RequestedToCapacityRatio = "RequestedToCapacityRatio"
)

// maxNodeScore is kube-scheduler's framework.MaxNodeScore; maxCustomScore is the top of a
// RequestedToCapacityRatio shape (config.MaxCustomPriorityScore).
const (
	maxNodeScore   = 100
	maxCustomScore = 10
	maxUtilization = 100
)

// kube-scheduler's non-zero defaults for a pod that requests no cpu or memory
// (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest), used by the fit score.
const (
	defaultMilliCPU = 100
	defaultMemory   = 200 * 1024 * 1024
)

// ResourceSpec is a resource and its weight in a score.
type ResourceSpec struct {
	Name   string
	Weight int64
}

// ShapePoint is a point of a RequestedToCapacityRatio shape: utilization 0–100, score 0–10.
type ShapePoint struct {
	Utilization int32
	Score       int32
}

// Strategy is NodeResourcesFit's scoring strategy.
type Strategy struct {
	// Type is LeastAllocated (when empty), MostAllocated or RequestedToCapacityRatio.
	Type string
	// Resources and their weights (default cpu and memory, weight 1).
	Resources []ResourceSpec
	// Shape is the RequestedToCapacityRatio function (required for that type only).
	Shape []ShapePoint
}

// withDefaults fills the defaults kube-scheduler's NodeResourcesFitArgs defaulting fills and
// checks the rest as its validation does.
func (s Strategy) withDefaults() (Strategy, error) {
	if s.Type == "" {
		s.Type = LeastAllocated
	}
	switch s.Type {
	case LeastAllocated, MostAllocated:
		if len(s.Shape) > 0 {
			return s, fmt.Errorf("scoring strategy %s: a shape belongs to %s only", s.Type, RequestedToCapacityRatio)
		}
	case RequestedToCapacityRatio:
		if len(s.Shape) == 0 {
			return s, fmt.Errorf("scoring strategy %s: needs a shape", s.Type)
		}
		for i, p := range s.Shape {
			if p.Utilization < 0 || p.Utilization > maxUtilization || p.Score < 0 || p.Score > maxCustomScore {
				return s, fmt.Errorf("scoring strategy shape[%d]: utilization %d must be in [0, 100] and score %d in [0, 10]", i, p.Utilization, p.Score)
			}
			if i > 0 && p.Utilization <= s.Shape[i-1].Utilization {
				return s, fmt.Errorf("scoring strategy shape[%d]: utilization %d must increase", i, p.Utilization)
			}
		}
	default:
		return s, fmt.Errorf("scoring strategy type %q: want %s, %s or %s", s.Type, LeastAllocated, MostAllocated, RequestedToCapacityRatio)
	}
	if len(s.Resources) == 0 {
		s.Resources = []ResourceSpec{{Name: string(corev1.ResourceCPU), Weight: 1}, {Name: string(corev1.ResourceMemory), Weight: 1}}
	}
	for i, r := range s.Resources {
		if r.Name == "" || r.Weight < 1 || r.Weight > 100 {
			return s, fmt.Errorf("scoring strategy resources[%d] %q: weight %d must be in [1, 100]", i, r.Name, r.Weight)
		}
	}
	return s, nil
}

// Request is a pod compiled against a Scheduler's nodes: its requests as a dense vector, the
// nodes its nodeSelector and tolerations allow, and (with TAS) the nodes it is assigned to.
type Request struct {
	req []int64 // per resource index, cpu in millicores
	// nonzero cpu (milli) and memory for the fit score.
	nzCPU, nzMem int64
	candidates   []int32 // nodes passing the nodeSelector, taint and TAS filters
	// set groups the candidates into classes of equal nodes (nil for a TAS pod's own nodes).
	set *candSet
	// What the filters saw, for Why.
	selector    map[string]string
	tolerations []corev1.Toleration
	only        []string
	// claims are a DRA pod's resource claims (dra.go), devices those allocated to them while the
	// pod is bound.
	claims  []*resourceapi.ResourceClaim
	devices []structured.DeviceID
	// unallocatable holds the nodes where its claims could not be allocated, with the node's
	// allocation generation then (dra.go).
	unallocatable map[int32]uint64
}

// Scheduler holds the nodes and what the pods bound to them request. It is not safe for
// concurrent use.
type Scheduler struct {
	nodes    []node
	res      []corev1.ResourceName
	idx      map[corev1.ResourceName]int
	cpu, mem int
	strategy Strategy
	fitIdx   []int // resource index of each strategy resource, -1 when no node has it
	balIdx   []int // cpu, memory
	shape    []ShapePoint
	// rank is each node's place in name order: a tie goes to the lowest rank.
	rank []int32
	cand map[string]*candSet
	// memberOf lists, per node, the candidate sets it is in and its index there.
	memberOf [][]membership
	// nodeObjs are the nodes as given (the DRA allocator reads them); dra is nil without
	// ResourceSlices.
	nodeObjs []*corev1.Node
	dra      *draState
}

// A candidate set is the nodes one (nodeSelector, tolerations) admits, grouped into classes of
// nodes with equal allocatable and equal requested resources: such nodes get equal filter
// results and equal scores, so Schedule evaluates a class once. Many nodes share a class on a
// cluster built from node pools (every empty node of a pool, every node running the same pods).
type candSet struct {
	nodes   []int32
	classes []*class
	byKey   map[uint64][]int // class indexes by the hash of their vectors
	free    []int            // indexes of empty classes, for reuse
	classOf []int            // per member (index in nodes): its class
}

type class struct {
	node0 int32 // a member, whose allocatable and requested vectors are the class's
	// members are indexes into candSet.nodes, in their nodes' name order: members[0] is the
	// node a tie picks.
	members []int32
}

type membership struct {
	set *candSet
	idx int
}

type node struct {
	name   string
	labels map[string]string
	taints []corev1.Taint
	alloc  []int64
	used   []int64
	// nzUsed is cpu (milli) and memory counted the way the fit score counts them (pods
	// without requests count kube-scheduler's defaults).
	nzCPU, nzMem int64
}

// podsIndex is the dense index of the pod count, always present.
const podsIndex = 0

// New returns a scheduler over nodes (their allocatable, labels and taints) with a scoring
// strategy.
func New(nodes []*corev1.Node, s Strategy) (*Scheduler, error) {
	st, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	sc := &Scheduler{strategy: st, idx: map[corev1.ResourceName]int{}, cand: map[string]*candSet{}, nodeObjs: nodes}
	sc.res = []corev1.ResourceName{corev1.ResourcePods, corev1.ResourceCPU, corev1.ResourceMemory}
	for _, n := range nodes {
		for r := range allocatable(n) {
			if !slices.Contains(sc.res, r) {
				sc.res = append(sc.res, r)
			}
		}
	}
	slices.Sort(sc.res[3:])
	for i, r := range sc.res {
		sc.idx[r] = i
	}
	sc.cpu, sc.mem = sc.idx[corev1.ResourceCPU], sc.idx[corev1.ResourceMemory]
	for _, n := range nodes {
		nd := node{name: n.Name, labels: n.Labels, taints: n.Spec.Taints, alloc: make([]int64, len(sc.res)), used: make([]int64, len(sc.res))}
		for r, q := range allocatable(n) {
			nd.alloc[sc.idx[r]] = value(r, q)
		}
		if _, ok := allocatable(n)[corev1.ResourcePods]; !ok {
			nd.alloc[podsIndex] = 110 // the kubelet's default max pods
		}
		sc.nodes = append(sc.nodes, nd)
	}
	sc.memberOf = make([][]membership, len(sc.nodes))
	byName := make([]int32, len(sc.nodes))
	for i := range byName {
		byName[i] = int32(i)
	}
	slices.SortFunc(byName, func(a, b int32) int { return strings.Compare(sc.nodes[a].name, sc.nodes[b].name) })
	sc.rank = make([]int32, len(sc.nodes))
	for r, i := range byName {
		sc.rank[i] = int32(r)
	}
	for _, r := range st.Resources {
		i, ok := sc.idx[corev1.ResourceName(r.Name)]
		if !ok {
			i = -1
		}
		sc.fitIdx = append(sc.fitIdx, i)
	}
	sc.balIdx = []int{sc.cpu, sc.mem}
	if st.Type == RequestedToCapacityRatio {
		for _, p := range st.Shape {
			sc.shape = append(sc.shape, ShapePoint{Utilization: p.Utilization, Score: p.Score * (maxNodeScore / maxCustomScore)})
		}
	}
	return sc, nil
}

func allocatable(n *corev1.Node) corev1.ResourceList {
	if len(n.Status.Allocatable) > 0 {
		return n.Status.Allocatable
	}
	return n.Status.Capacity
}

// value is a quantity in the scheduler's unit: millicores for cpu, the integer value (rounded
// up) otherwise.
func value(r corev1.ResourceName, q resource.Quantity) int64 {
	if r == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// Nodes is the number of nodes.
func (s *Scheduler) Nodes() int { return len(s.nodes) }

// NodeName returns node i's name.
func (s *Scheduler) NodeName(i int) string { return s.nodes[i].name }

// Compile prepares a pod's requests (the sum over its containers), nodeSelector and tolerations.
// onlyNodes, when not nil, restricts the pod to those node names (a TAS assignment). A pod
// requesting a resource no node has gets no candidate nodes and never binds.
func (s *Scheduler) Compile(requests corev1.ResourceList, selector map[string]string, tolerations []corev1.Toleration, onlyNodes []string) *Request {
	r, possible := s.compile(requests, selector, tolerations, onlyNodes)
	if possible {
		if onlyNodes != nil {
			r.candidates = s.filter(selector, tolerations, onlyNodes)
		} else {
			r.set = s.candidateSet(selector, tolerations)
			r.candidates = r.set.nodes
		}
	}
	return r
}

// compile is a Request with its requests and filters and no candidates; possible is false when
// it requests a resource no node has.
func (s *Scheduler) compile(requests corev1.ResourceList, selector map[string]string, tolerations []corev1.Toleration, onlyNodes []string) (*Request, bool) {
	r := &Request{req: make([]int64, len(s.res)), selector: selector, tolerations: tolerations, only: onlyNodes}
	r.req[podsIndex] = 1
	impossible := false
	for name, q := range requests {
		i, ok := s.idx[name]
		if !ok {
			if !q.IsZero() {
				impossible = true
			}
			continue
		}
		r.req[i] += value(name, q)
	}
	r.nzCPU, r.nzMem = r.req[s.cpu], r.req[s.mem]
	if r.nzCPU == 0 {
		r.nzCPU = defaultMilliCPU
	}
	if r.nzMem == 0 {
		r.nzMem = defaultMemory
	}
	return r, !impossible
}

// candidateSet returns the nodes whose labels match selector and whose taints tolerations
// tolerate, with their classes; memoised per distinct (selector, tolerations).
func (s *Scheduler) candidateSet(selector map[string]string, tolerations []corev1.Toleration) *candSet {
	key := cacheKey(selector, tolerations)
	if c, ok := s.cand[key]; ok {
		return c
	}
	cs := &candSet{nodes: s.filter(selector, tolerations, nil), byKey: map[uint64][]int{}}
	cs.classOf = make([]int, len(cs.nodes))
	for k, n := range cs.nodes {
		s.memberOf[n] = append(s.memberOf[n], membership{set: cs, idx: k})
		cs.join(s, k)
	}
	s.cand[key] = cs
	return cs
}

// filter lists the nodes whose labels match selector, whose taints tolerations tolerate and,
// when only is not nil, that it names.
func (s *Scheduler) filter(selector map[string]string, tolerations []corev1.Toleration, only []string) []int32 {
	allowed := nameSet(only)
	out := []int32{}
	for i := range s.nodes {
		n := &s.nodes[i]
		if allowed != nil && !allowed[n.name] {
			continue
		}
		if matches(n.labels, selector) && tolerates(n.taints, tolerations) {
			out = append(out, int32(i))
		}
	}
	return out
}

// nameSet is the set of names; nil for nil (no restriction).
func nameSet(names []string) map[string]bool {
	if names == nil {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
}

// vectorHash hashes a node's allocatable and requested vectors (FNV-1a over their words).
func vectorHash(n *node) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v int64) {
		for range 8 {
			h ^= uint64(v & 0xff)
			h *= 1099511628211
			v >>= 8
		}
	}
	for k := range n.alloc {
		mix(n.alloc[k])
		mix(n.used[k])
	}
	mix(n.nzCPU)
	mix(n.nzMem)
	return h
}

func sameVectors(a, b *node) bool {
	return a.nzCPU == b.nzCPU && a.nzMem == b.nzMem && slices.Equal(a.alloc, b.alloc) && slices.Equal(a.used, b.used)
}

// join puts member k (its node's current vectors) into its class, making one if needed.
func (cs *candSet) join(s *Scheduler, k int) {
	n := &s.nodes[cs.nodes[k]]
	h := vectorHash(n)
	for _, ci := range cs.byKey[h] {
		if c := cs.classes[ci]; sameVectors(&s.nodes[c.node0], n) {
			cs.add(s, ci, k)
			return
		}
	}
	ci := len(cs.classes)
	if len(cs.free) > 0 {
		ci = cs.free[len(cs.free)-1]
		cs.free = cs.free[:len(cs.free)-1]
		cs.classes[ci] = &class{}
	} else {
		cs.classes = append(cs.classes, &class{})
	}
	cs.classes[ci].node0 = cs.nodes[k]
	cs.byKey[h] = append(cs.byKey[h], ci)
	cs.add(s, ci, k)
}

// add inserts member k into class ci at its node's place in name order.
func (cs *candSet) add(s *Scheduler, ci, k int) {
	c := cs.classes[ci]
	cs.classOf[k] = ci
	i := cs.position(s, c, k)
	c.members = slices.Insert(c.members, i, int32(k))
}

// position is where member k is, or goes, in c.members.
func (cs *candSet) position(s *Scheduler, c *class, k int) int {
	rk := s.rank[cs.nodes[k]]
	i, _ := slices.BinarySearchFunc(c.members, rk, func(m int32, r int32) int { return int(s.rank[cs.nodes[m]] - r) })
	return i
}

// leave takes member k out of its class (before its node's vectors change); the class is
// dropped when it empties.
func (cs *candSet) leave(s *Scheduler, k int) {
	ci := cs.classOf[k]
	c := cs.classes[ci]
	if i := cs.position(s, c, k); i < len(c.members) && int(c.members[i]) == k {
		c.members = slices.Delete(c.members, i, i+1)
	}
	if len(c.members) > 0 {
		if c.node0 == cs.nodes[k] {
			c.node0 = cs.nodes[c.members[0]]
		}
		return
	}
	h := vectorHash(&s.nodes[cs.nodes[k]])
	keys := cs.byKey[h]
	for i, x := range keys {
		if x == ci {
			keys = append(keys[:i], keys[i+1:]...)
			break
		}
	}
	if len(keys) == 0 {
		delete(cs.byKey, h)
	} else {
		cs.byKey[h] = keys
	}
	cs.classes[ci] = nil
	cs.free = append(cs.free, ci)
}

func cacheKey(selector map[string]string, tolerations []corev1.Toleration) string {
	var b strings.Builder
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k + "=" + selector[k] + ";")
	}
	b.WriteByte('|')
	for _, t := range tolerations {
		fmt.Fprintf(&b, "%s/%s/%s/%s;", t.Key, t.Operator, t.Value, t.Effect)
	}
	return b.String()
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

// tolerates reports whether every NoSchedule and NoExecute taint is tolerated (TaintToleration's
// filter; PreferNoSchedule only scores).
func tolerates(taints []corev1.Taint, tolerations []corev1.Toleration) bool {
	_, bad := untolerated(taints, tolerations)
	return !bad
}

// Why is kube-scheduler's message for a pod that fits no node now, as its FitError writes it:
// "0/N nodes are available: " and, per reason, how many nodes the first filter that failed on
// them gave it, sorted, in the default profile's filter order (TaintToleration, NodeAffinity,
// NodeResourcesFit). The preemption postscript kube-scheduler appends is left out: Kueue's
// pods have no priority to preempt with.
func (s *Scheduler) Why(r *Request) string {
	only := nameSet(r.only)
	counts := map[string]int{}
	for i := range s.nodes {
		n := &s.nodes[i]
		if t, ok := untolerated(n.taints, r.tolerations); ok {
			counts[fmt.Sprintf("node(s) had untolerated taint {%s: %s}", t.Key, t.Value)]++
			continue
		}
		if !matches(n.labels, r.selector) || (only != nil && !only[n.name]) {
			counts["node(s) didn't match Pod's node affinity/selector"]++
			continue
		}
		fit := true
		for k, v := range r.req {
			if v > 0 && n.used[k]+v > n.alloc[k] {
				fit = false
				if k == podsIndex {
					counts["Too many pods"]++
				} else {
					counts["Insufficient "+string(s.res[k])]++
				}
			}
		}
		// The DynamicResources filter runs after NodeResourcesFit.
		if fit && r.claims != nil {
			if devs, err := s.allocate(i, r); err != nil || devs == nil {
				counts[errClaimsUnallocatable]++
			}
		}
	}
	reasons := make([]string, 0, len(counts))
	for reason, n := range counts {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, reason))
	}
	sort.Strings(reasons)
	msg := fmt.Sprintf("0/%d nodes are available:", len(s.nodes))
	if len(reasons) > 0 {
		msg += " " + strings.Join(reasons, ", ") + "."
	}
	return msg
}

// untolerated is the first NoSchedule or NoExecute taint the tolerations do not tolerate.
func untolerated(taints []corev1.Taint, tolerations []corev1.Toleration) (corev1.Taint, bool) {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		ok := false
		for j := range tolerations {
			// TaintTolerationComparisonOperators is alpha and off in kube-scheduler 1.36.
			if tolerations[j].ToleratesTaint(klog.Background(), t, false) {
				ok = true
				break
			}
		}
		if !ok {
			return *t, true
		}
	}
	return corev1.Taint{}, false
}

// ErrUnschedulable says no node can take the pod now.
var ErrUnschedulable = errors.New("no node fits the pod")

// Schedule picks the best node for r among those where it fits now and binds it there (the
// node's requested resources grow by r's). It returns the node's index. Of equally scored
// nodes it picks the one whose name sorts first, whether scored one by one or as a class.
func (s *Scheduler) Schedule(r *Request) (int, error) {
	if r.claims != nil {
		return s.scheduleClaims(r)
	}
	if r.set != nil {
		return s.scheduleClasses(r)
	}
	best, pick := int64(-1), int32(-1) // the best score, and the first node by name that has it
	for _, i := range r.candidates {
		n := &s.nodes[i]
		if !s.fits(n, r) {
			continue
		}
		if sc := s.score(n, r); sc > best || (sc == best && s.rank[i] < s.rank[pick]) {
			best, pick = sc, i
		}
	}
	if pick < 0 {
		return -1, ErrUnschedulable
	}
	s.bind(int(pick), r, 1)
	return int(pick), nil
}

// scheduleClasses is Schedule over the classes of r's candidate set.
func (s *Scheduler) scheduleClasses(r *Request) (int, error) {
	cs := r.set
	best, pick := int64(-1), int32(-1) // pick: the first node, by name, of the best classes
	for _, c := range cs.classes {
		if c == nil {
			continue
		}
		n := &s.nodes[c.node0]
		if !s.fits(n, r) {
			continue
		}
		sc := s.score(n, r)
		first := cs.nodes[c.members[0]]
		if sc > best || (sc == best && s.rank[first] < s.rank[pick]) {
			best, pick = sc, first
		}
	}
	if pick < 0 {
		return -1, ErrUnschedulable
	}
	s.bind(int(pick), r, 1)
	return int(pick), nil
}

// ScheduleOn binds r to node i if i is one of its candidates and r fits there now. A pod that
// fit nowhere can fit only where something left since, so the sim retries it on that node alone.
func (s *Scheduler) ScheduleOn(r *Request, i int) bool {
	if r.claims != nil {
		return s.scheduleClaimsOn(r, i)
	}
	k, found := slices.BinarySearch(r.candidates, int32(i))
	if !found || !s.fits(&s.nodes[r.candidates[k]], r) {
		return false
	}
	s.bind(i, r, 1)
	return true
}

// Release returns what r requested on node i (the pod left it), and the devices of its claims.
func (s *Scheduler) Release(i int, r *Request) {
	if r.claims != nil {
		s.releaseClaims(i, r)
	}
	s.bind(i, r, -1)
}

// CanEverFit reports whether r fits on one of its candidate nodes when that node is empty (its
// claims, if any, allocated there).
func (s *Scheduler) CanEverFit(r *Request) bool {
	for _, i := range r.candidates {
		n := &s.nodes[i]
		ok := true
		for k, v := range r.req {
			if v > n.alloc[k] {
				ok = false
				break
			}
		}
		if ok && (r.claims == nil || s.canEverAllocate(int(i), r)) {
			return true
		}
	}
	return false
}

func (s *Scheduler) bind(i int, r *Request, sign int64) {
	for _, m := range s.memberOf[i] {
		m.set.leave(s, m.idx)
	}
	n := &s.nodes[i]
	for k, v := range r.req {
		n.used[k] += sign * v
	}
	n.nzCPU += sign * r.nzCPU
	n.nzMem += sign * r.nzMem
	for _, m := range s.memberOf[i] {
		m.set.join(s, m.idx)
	}
}

func (s *Scheduler) fits(n *node, r *Request) bool {
	for k, v := range r.req {
		if v > 0 && n.used[k]+v > n.alloc[k] {
			return false
		}
	}
	return true
}

// score is NodeResourcesFit's score with the strategy plus NodeResourcesBalancedAllocation's,
// for the node with the pod on it.
func (s *Scheduler) score(n *node, r *Request) int64 {
	var fitScore, weightSum int64
	var rtcScore int64
	for j, rs := range s.strategy.Resources {
		k := s.fitIdx[j]
		if k < 0 {
			continue
		}
		alloc := n.alloc[k]
		var req int64
		switch k {
		case s.cpu:
			req = n.nzCPU + r.nzCPU
		case s.mem:
			req = n.nzMem + r.nzMem
		default:
			if r.req[k] == 0 { // an extended resource the pod does not request is not scored
				continue
			}
			req = n.used[k] + r.req[k]
		}
		if alloc == 0 {
			continue
		}
		switch s.strategy.Type {
		case LeastAllocated:
			fitScore += leastRequested(req, alloc) * rs.Weight
			weightSum += rs.Weight
		case MostAllocated:
			fitScore += mostRequested(req, alloc) * rs.Weight
			weightSum += rs.Weight
		case RequestedToCapacityRatio:
			u := int64(maxUtilization)
			if req <= alloc {
				u = req * maxUtilization / alloc
			}
			if v := brokenLinear(s.shape, u); v > 0 {
				rtcScore += v * rs.Weight
				weightSum += rs.Weight
			}
		}
	}
	var fit int64
	if weightSum > 0 {
		if s.strategy.Type == RequestedToCapacityRatio {
			fit = int64(math.Round(float64(rtcScore) / float64(weightSum)))
		} else {
			fit = fitScore / weightSum
		}
	}
	return fit + s.balanced(n, r)
}

func leastRequested(req, capacity int64) int64 {
	if req > capacity {
		return 0
	}
	return (capacity - req) * maxNodeScore / capacity
}

func mostRequested(req, capacity int64) int64 {
	if req > capacity {
		req = capacity
	}
	return req * maxNodeScore / capacity
}

// brokenLinear is kube-scheduler's helper.BuildBrokenLinearFunction.
func brokenLinear(shape []ShapePoint, p int64) int64 {
	for i := range shape {
		if p <= int64(shape[i].Utilization) {
			if i == 0 {
				return int64(shape[0].Score)
			}
			a, b := shape[i-1], shape[i]
			return int64(a.Score) + int64(b.Score-a.Score)*(p-int64(a.Utilization))/int64(b.Utilization-a.Utilization)
		}
	}
	return int64(shape[len(shape)-1].Score)
}

// balanced is NodeResourcesBalancedAllocation over cpu and memory (its default resources),
// counting requests as they are (useRequested).
func (s *Scheduler) balanced(n *node, r *Request) int64 {
	if r.req[s.cpu] == 0 && r.req[s.mem] == 0 {
		return 0 // a best-effort pod is not scored
	}
	var fr [2]float64
	m := 0
	for _, k := range s.balIdx {
		if n.alloc[k] == 0 {
			continue
		}
		f := float64(n.used[k]+r.req[k]) / float64(n.alloc[k])
		fr[m] = math.Min(f, 1)
		m++
	}
	std := 0.0
	if m == 2 {
		std = math.Abs((fr[0] - fr[1]) / 2)
	}
	return int64((1 - std) * maxNodeScore)
}
