package kubesched

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// Dynamic resource allocation: kube-scheduler's DynamicResources plugin. A pod whose template
// names ResourceClaims (the sim's MIG pods: one claim from a ResourceClaimTemplate for their
// slices) is feasible on a node only if its claims can be allocated there from the node's
// ResourceSlices, given the devices already allocated; its claims are then allocated there and
// their devices stay allocated until the pod leaves. Allocation is upstream's own allocator
// (k8s.io/dynamic-resource-allocation/structured, the one the plugin calls), so the placement
// geometry of partitionable devices (shared counters) binds exactly as on a cluster.
//
// The plugin scores only claims with prioritized lists (firstAvailable), which the sim's claims
// do not have: the feasible nodes are scored as for any pod, so the sim tries the nodes whose
// resources fit in score order and binds the first where the claims can be allocated, which is
// the node kube-scheduler would pick. Only the nodes with ResourceSlices are candidates (the
// plugin rejects the others: "cannot allocate all claims"); whole-GPU pods never meet this code.
//
// Each attempt builds an allocator over one node's slices (its pool: the node's counter sets and
// devices) and the devices allocated on that node: that allocator gives the answer
// kube-scheduler's, built over the whole cluster's slices, gives for the node, because a pool's
// devices are allocatable on its node only. Measured with BenchmarkMIGFill (64 nodes of 8 H100s,
// 19 devices per GPU, filled with 3,584 1g.10gb pods one at a time, on this shared 2-core
// machine): about 1.7 ms a placement, nearly all of it the allocator's CEL evaluation of the
// devices it scans, building the allocator next to nothing; so none is cached. A node where a
// pod's claims failed is not tried again for that pod until the node's devices change (Why asks
// again right after a failed Schedule).

// draFeatures are the allocator features of the sim's claims: partitionable devices (MIG
// placements consuming their GPU's counters), on by default from Kubernetes 1.34.
var draFeatures = structured.Features{PartitionableDevices: true}

// errClaimsUnallocatable is the DynamicResources filter's reason for a node where the pod's
// claims cannot be allocated.
const errClaimsUnallocatable = "cannot allocate all claims"

// draState is the DRA part of a Scheduler: the device classes, each node's slices and the
// devices allocated on each node.
type draState struct {
	classes   classLister
	slices    [][]*resourceapi.ResourceSlice  // per node
	allocated []sets.Set[structured.DeviceID] // per node
	// gen counts, per node, the changes to its allocated devices: an allocation that failed on a
	// node fails again until they change (Request.unallocatable).
	gen       []uint64
	withSlice []int32 // the nodes that have slices, in index order
	celCache  *cel.Cache
	// cand memoises the candidate nodes of claim requests per (selector, tolerations).
	cand map[string][]int32
}

type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("deviceclass %q not found", name)
}

// SetResources gives the scheduler the cluster's DeviceClasses and ResourceSlices, as the DRA
// driver publishes them. Every slice must belong to one of the scheduler's nodes (spec.nodeName):
// devices shared across nodes are not modelled.
func (s *Scheduler) SetResources(classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice) error {
	byName := make(map[string]int, len(s.nodes))
	for i := range s.nodes {
		byName[s.nodes[i].name] = i
	}
	d := &draState{classes: classLister(classes), slices: make([][]*resourceapi.ResourceSlice, len(s.nodes)),
		allocated: make([]sets.Set[structured.DeviceID], len(s.nodes)), gen: make([]uint64, len(s.nodes)), cand: map[string][]int32{},
		// As kube-scheduler's DynamicResources plugin builds its cache.
		celCache: cel.NewCache(10, cel.Features{})}
	for _, sl := range slices {
		if sl.Spec.NodeName == nil {
			return fmt.Errorf("resourceslice %s: not on one node (spec.nodeName): not modelled", sl.Name)
		}
		i, ok := byName[*sl.Spec.NodeName]
		if !ok {
			return fmt.Errorf("resourceslice %s: node %s is not in the cluster", sl.Name, *sl.Spec.NodeName)
		}
		d.slices[i] = append(d.slices[i], sl)
	}
	for i := range d.slices {
		if len(d.slices[i]) > 0 {
			d.withSlice = append(d.withSlice, int32(i))
			d.allocated[i] = sets.New[structured.DeviceID]()
		}
	}
	s.dra = d
	return nil
}

// CompileClaims is Compile for a pod with resource claims (the claims made from its templates).
// Its candidates are the nodes Compile would give that have ResourceSlices. The Request is one
// pod's: bound, it holds the devices allocated to its claims (Devices), which Release frees.
func (s *Scheduler) CompileClaims(requests corev1.ResourceList, selector map[string]string, tolerations []corev1.Toleration, onlyNodes []string, claims []*resourceapi.ResourceClaim) *Request {
	r, possible := s.compile(requests, selector, tolerations, onlyNodes)
	r.claims = claims
	d := s.dra
	if !possible || d == nil {
		return r
	}
	// Nodes with equal resources may differ in their devices: no candidate set, whose classes
	// would score them as one.
	if onlyNodes != nil {
		r.candidates = intersect(s.filter(selector, tolerations, onlyNodes), d.withSlice)
		return r
	}
	key := cacheKey(selector, tolerations)
	c, ok := d.cand[key]
	if !ok {
		c = intersect(s.filter(selector, tolerations, nil), d.withSlice)
		d.cand[key] = c
	}
	r.candidates = c
	return r
}

// intersect is the sorted node indexes in both a and b (both sorted).
func intersect(a, b []int32) []int32 {
	out := []int32{}
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			out = append(out, x)
		}
	}
	return out
}

// Devices lists the devices allocated to the claims of a bound claim request, in the order of
// its claims' results (nil for a pod without claims or not bound).
func (r *Request) Devices() []structured.DeviceID { return r.devices }

// HasClaims says whether r is a pod with resource claims.
func (r *Request) HasClaims() bool { return r.claims != nil }

// scheduleClaims is Schedule for a claim request: the nodes where its resources fit, best score
// first (ties by name), are tried until its claims can be allocated on one.
func (s *Scheduler) scheduleClaims(r *Request) (int, error) {
	if r.devices != nil {
		return -1, errors.New("schedule: the pod's claims are allocated already")
	}
	type scored struct {
		score int64
		node  int32
	}
	feasible := make([]scored, 0, len(r.candidates))
	for _, i := range r.candidates {
		if n := &s.nodes[i]; s.fits(n, r) {
			feasible = append(feasible, scored{s.score(n, r), i})
		}
	}
	slices.SortFunc(feasible, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return int(s.rank[a.node] - s.rank[b.node])
	})
	for _, f := range feasible {
		devs, err := s.allocate(int(f.node), r)
		if err != nil {
			return -1, err
		}
		if devs != nil {
			s.bindClaims(int(f.node), r, devs)
			return int(f.node), nil
		}
	}
	return -1, ErrUnschedulable
}

// scheduleClaimsOn is ScheduleOn for a claim request.
func (s *Scheduler) scheduleClaimsOn(r *Request, i int) bool {
	if r.devices != nil {
		return false
	}
	if _, found := slices.BinarySearch(r.candidates, int32(i)); !found || !s.fits(&s.nodes[i], r) {
		return false
	}
	// An allocator error (a claim's CEL selector that does not compile) surfaced when the pod
	// was first scheduled.
	devs, err := s.allocate(i, r)
	if err != nil || devs == nil {
		return false
	}
	s.bindClaims(i, r, devs)
	return true
}

// allocate runs upstream's allocator for r's claims on node i: the devices it picks, nil when they
// cannot be allocated there, or the allocator's error (invalid input, such as a CEL selector
// that does not compile).
func (s *Scheduler) allocate(i int, r *Request) ([]structured.DeviceID, error) {
	d := s.dra
	if d == nil || len(d.slices[i]) == 0 {
		return nil, nil
	}
	if g, ok := r.unallocatable[int32(i)]; ok && g == d.gen[i] {
		return nil, nil
	}
	devs, err := d.allocate(s.nodeObjs[i], d.slices[i], d.allocated[i], r.claims)
	if err == nil && devs == nil {
		// Why, after a failed Schedule, asks again.
		if r.unallocatable == nil {
			r.unallocatable = map[int32]uint64{}
		}
		r.unallocatable[int32(i)] = d.gen[i]
	}
	return devs, err
}

func (d *draState) allocate(node *corev1.Node, slices []*resourceapi.ResourceSlice, allocated sets.Set[structured.DeviceID], claims []*resourceapi.ResourceClaim) ([]structured.DeviceID, error) {
	ctx := context.Background()
	a, err := structured.NewAllocator(ctx, draFeatures, structured.AllocatedState{AllocatedDevices: allocated}, d.classes, slices, d.celCache)
	if err != nil {
		return nil, fmt.Errorf("dra allocator: %w", err)
	}
	res, err := a.Allocate(ctx, node, claims)
	if err != nil {
		return nil, fmt.Errorf("allocate claims on node %s: %w", node.Name, err)
	}
	if len(res) < len(claims) {
		return nil, nil
	}
	devs := []structured.DeviceID{}
	for _, ar := range res {
		for _, x := range ar.Devices.Results {
			devs = append(devs, structured.MakeDeviceID(x.Driver, x.Pool, x.Device))
		}
	}
	return devs, nil
}

// bindClaims binds r to node i with its claims allocated the devices devs.
func (s *Scheduler) bindClaims(i int, r *Request, devs []structured.DeviceID) {
	s.dra.allocated[i].Insert(devs...)
	s.dra.gen[i]++
	r.devices = devs
	s.bind(i, r, 1)
}

// releaseClaims frees the devices of r's claims on node i.
func (s *Scheduler) releaseClaims(i int, r *Request) {
	if s.dra != nil && s.dra.allocated[i] != nil && len(r.devices) > 0 {
		s.dra.allocated[i].Delete(r.devices...)
		s.dra.gen[i]++
	}
	r.devices = nil
}

// canEverAllocate says whether r's claims can be allocated on node i when nothing is allocated
// there.
func (s *Scheduler) canEverAllocate(i int, r *Request) bool {
	d := s.dra
	if d == nil || len(d.slices[i]) == 0 {
		return false
	}
	devs, err := d.allocate(s.nodeObjs[i], d.slices[i], sets.New[structured.DeviceID](), r.claims)
	return err == nil && devs != nil
}
