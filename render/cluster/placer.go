package cluster

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
)

// Placer returns the render.Placer of a validated spec. A workload goes to the team whose name
// is its namespace (else namespaceMapping, else defaultTeam), at the priority class of its
// intent. GPU pods are pinned to a family only when the cluster has a single GPU family or
// retarget is set; retarget picks, for each GPU workload, a family of its team's ClusterQueue
// that fits its pods, weighted by the family's GPU count and decided by hash(seed, workload
// id), so the choice does not depend on the order workloads are placed in.
//
// A workload asking for amd.com/gpu goes to AMD families and one asking for nvidia.com/gpu to
// NVIDIA ones, unless the cluster has a single GPU family (every GPU workload is pinned to it and
// asks for its resource) or retarget is set. The Placement lists the label keys the nodes carry,
// so render keeps a trace's node-affinity hints only on labels some node has.
func (s *Spec) Placer(seed uint64, retarget bool) render.Placer {
	p := &placer{s: s, seed: seed, retarget: retarget, labelKeys: map[string]bool{}}
	for i := range s.NodePools {
		if nodes := s.nodes(&s.NodePools[i]); len(nodes) > 0 {
			for k := range nodes[0].GetLabels() { // every node of a pool carries the same keys
				p.labelKeys[k] = true
			}
		}
	}
	for _, f := range s.flavors {
		var gpus int64
		for _, np := range f.Pools {
			p.pools = append(p.pools, newPoolCap(np, f))
			gpus += int64(np.Count) * int64(np.GPUsPerNode)
		}
		switch {
		case f.wholeGPUs():
			p.gpuFlavors = append(p.gpuFlavors, f)
		case f.MIG:
			p.migFlavors = append(p.migFlavors, f)
		}
		if p.gpuCap == nil {
			p.gpuCap = map[string]int64{}
		}
		p.gpuCap[f.Name] = gpus
	}
	return p
}

type placer struct {
	s          *Spec
	seed       uint64
	retarget   bool
	pools      []poolCap
	gpuFlavors []*flavor        // flavors of whole GPUs
	migFlavors []*flavor        // flavors of MIG-partitioned GPUs
	gpuCap     map[string]int64 // GPUs per flavor name
	labelKeys  map[string]bool  // label keys of the nodes
}

// poolCap is one node of a pool, as numbers.
type poolCap struct {
	pool     *NodePool
	flavor   *flavor
	cpu, mem float64
	gpus     int64
}

func newPoolCap(np *NodePool, f *flavor) poolCap {
	c, m := resource.MustParse(np.CPU), resource.MustParse(np.Memory)
	// A time-sliced pool's nodes advertise (and pods ask for) replicas.
	return poolCap{pool: np, flavor: f, cpu: c.AsApproximateFloat64(), mem: m.AsApproximateFloat64(), gpus: int64(np.GPUsPerNode * np.replicas())}
}

func (p *placer) Place(w *trace.Workload) (render.Placement, error) {
	if !p.s.valid {
		return render.Placement{}, fmt.Errorf("workload %s: cluster spec %s is not validated", w.WorkloadID, p.s.file)
	}
	team, err := p.s.teamFor(w.Namespace)
	if err != nil {
		return render.Placement{}, fmt.Errorf("workload %s: %w", w.WorkloadID, err)
	}
	intent := w.Intent()
	if intent != trace.IntentPerformance && intent != trace.IntentStandard && intent != trace.IntentEco {
		return render.Placement{}, fmt.Errorf("workload %s: intentClass %q has no priority class (performance, standard or eco)", w.WorkloadID, intent)
	}
	pl := render.Placement{
		Namespace:     team.Name,
		Queue:         team.LocalQueue,
		PriorityClass: (*p.s.PriorityClasses.get(intent)).Name,
		NodeLabelKeys: p.labelKeys,
	}
	gang := isGang(w)
	if t := p.s.Topology; t != nil && gang {
		pl.TopologyLevel = map[string]string{LevelBlock: t.BlockLabel, LevelRack: t.RackLabel, LevelHostname: hostnameLabel}[t.GangLevel]
	}
	if w.GPUFractionPods() > 0 && w.TotalGPUs() == 0 && p.hasMIGQuota(team) {
		// Shares go on slices, beside any slices the workload asks for by profile.
		if profile := p.fractionProfile(w, team); profile != "" {
			sw, _ := render.OnSlices(w, nil, profile)
			pl.MIGProfile = profile
			return p.placeMIG(sw, pl, team)
		}
	}
	if w.GPUFractionPods() > 0 && w.MIGSlices() > 0 {
		return pl, fmt.Errorf("workload %s asks for MIG slices and for a share of a GPU that no MIG profile its ClusterQueue %s has quota on holds: a pod on slices cannot sit beside one on a whole GPU of the same flavor",
			w.WorkloadID, p.s.clusterQueue(team.ClusterQueue).Name)
	}
	// A family the spec moves onto slices (migFor) takes its shares there too, one slice of the
	// rule's profile each: the operator's choice, a share larger than the slice then slowed.
	if r := p.s.migRule(w); r != nil && p.hasMIGQuota(team) {
		sw, _ := render.OnSlices(w, nil, r.Profile)
		pl.MIGProfile = r.Profile
		return p.placeMIG(sw, pl, team)
	}
	if w.MIGSlices() > 0 {
		return p.placeMIG(w, pl, team)
	}
	if w.GPUFractionPods() > 0 {
		// Without a slice that holds them, shares of a GPU run on one device each (render does the
		// same): a replica of a time-sliced GPU where the queue has quota on one, else a whole GPU.
		w, _ = render.OnWholeGPUs(w, nil)
		if f := p.timeSlicedFlavor(team); f != nil && w.MIGSlices() == 0 {
			pl.GPUNodeSelector, pl.GPUResource, pl.Tolerations = f.nodeLabels(), f.Family.Resource, f.tolerations()
			return pl, p.fits(w, p.poolsOf(f), f.Family.Resource, gang)
		}
	}
	if w.TotalGPUs() == 0 {
		return pl, p.fits(w, p.pools, corev1.ResourceName(trace.ResourceGPU), false)
	}
	want := corev1.ResourceName(w.GPUResource()) // the vendor the trace asks for
	if len(p.gpuFlavors) == 0 {
		return pl, fmt.Errorf("workload %s requests %d %s but the cluster has no GPU node pool", w.WorkloadID, w.TotalGPUs(), want)
	}
	cq := p.s.clusterQueue(team.ClusterQueue)
	var candidates []*flavor
	for _, fq := range cq.Quotas {
		if f := p.s.flavor(fq.Flavor); f.wholeGPUs() {
			if _, ok := fq.Resources[string(f.Family.Resource)]; ok {
				candidates = append(candidates, f)
			}
		}
	}
	if len(candidates) == 0 {
		return pl, fmt.Errorf("workload %s requests GPUs but team %s's ClusterQueue %s has no GPU quota", w.WorkloadID, team.Name, cq.Name)
	}
	var fixed *flavor
	switch {
	case p.retarget:
		if fixed, err = p.retargetFlavor(w, candidates); err != nil {
			return pl, err
		}
	case len(p.gpuFlavors) == 1:
		fixed = p.gpuFlavors[0]
		if candidates[0] != fixed {
			return pl, fmt.Errorf("workload %s: team %s's ClusterQueue %s has no quota on flavor %s", w.WorkloadID, team.Name, cq.Name, fixed.Name)
		}
	}
	if fixed != nil {
		pl.GPUNodeSelector = fixed.nodeLabels()
		pl.GPUResource = fixed.Family.Resource
		// Kueue injects the flavor's tolerations on admission too; carrying them from the start
		// keeps pinned pods schedulable whatever checks run before admission.
		pl.Tolerations = fixed.tolerations()
		return pl, p.fits(w, p.poolsOf(fixed), fixed.Family.Resource, gang)
	}
	// Unpinned pods keep the trace's GPU resource, so only flavors of that vendor can admit them.
	var eligible []poolCap
	for _, f := range candidates {
		if f.Family.Resource == want {
			eligible = append(eligible, p.poolsOf(f)...)
		}
	}
	if len(eligible) == 0 {
		return pl, fmt.Errorf("workload %s requests %s but team %s's ClusterQueue %s has quota on no flavor providing it (use --retarget to move it to another family)", w.WorkloadID, want, team.Name, cq.Name)
	}
	pl.GPUResource = want
	return pl, p.fits(w, eligible, pl.GPUResource, gang)
}

// timeSlicedFlavor is the first time-sliced flavor in the order of team's ClusterQueue's quotas
// with quota on its GPUs; nil when there is none.
func (p *placer) timeSlicedFlavor(team *Team) *flavor {
	for _, fq := range p.s.clusterQueue(team.ClusterQueue).Quotas {
		if f := p.s.flavor(fq.Flavor); f != nil && f.Replicas > 1 {
			if _, ok := fq.Resources[string(f.Family.Resource)]; ok {
				return f
			}
		}
	}
	return nil
}

// isGang reports whether the workload's pods must start together.
func isGang(w *trace.Workload) bool {
	for _, g := range w.Pods {
		if g.Gang {
			return true
		}
	}
	return w.Gang
}

func (p *placer) poolsOf(f *flavor) []poolCap {
	var out []poolCap
	for _, pc := range p.pools {
		if pc.flavor == f {
			out = append(out, pc)
		}
	}
	return out
}

// retargetFlavor picks among the candidate flavors whose nodes fit the workload, weighted by
// their GPU count.
func (p *placer) retargetFlavor(w *trace.Workload, candidates []*flavor) (*flavor, error) {
	var fitting []*flavor
	var total int64
	var firstErr error
	for _, f := range candidates {
		if err := p.fits(w, p.poolsOf(f), f.Family.Resource, isGang(w)); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		fitting = append(fitting, f)
		total += p.gpuCap[f.Name]
	}
	if len(fitting) == 0 {
		return nil, fmt.Errorf("retarget: no GPU family fits: %w", firstErr)
	}
	x := int64(pick(p.seed, w.WorkloadID) % uint64(total))
	for _, f := range fitting {
		if x < p.gpuCap[f.Name] {
			return f, nil
		}
		x -= p.gpuCap[f.Name]
	}
	return fitting[len(fitting)-1], nil
}

// pick hashes (seed, id) to a well-mixed 64-bit value (FNV-1a, then SplitMix64's finalizer
// because FNV's low bits follow the last bytes of similar ids too closely).
func pick(seed uint64, id string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(id))
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fits checks that every pod of w fits a single node of pools (GPU pods) or of any pool
// (CPU-only pods), and that a gang's GPUs fit the pools' total.
func (p *placer) fits(w *trace.Workload, pools []poolCap, gpuRes corev1.ResourceName, gang bool) error {
	var poolGPUs int64
	for _, pc := range pools {
		poolGPUs += int64(pc.pool.Count) * pc.gpus
	}
	if gang && w.TotalGPUs() > poolGPUs {
		return fmt.Errorf("workload %s: the gang needs %d %s in total but the eligible pools have %d", w.WorkloadID, w.TotalGPUs(), gpuRes, poolGPUs)
	}
	for _, g := range w.Pods {
		if g.Replicas <= 0 {
			continue
		}
		gpus := g.GPUs()
		cand := pools
		if gpus == 0 {
			cand = p.pools
		}
		cpu, mem := g.Requests.Value(trace.ResourceCPU), g.Requests.Value(trace.ResourceMemory)
		ok := false
		var maxGPU, maxCPU, maxMem *poolCap
		for i := range cand {
			c := &cand[i]
			if gpus <= c.gpus && cpu <= c.cpu && mem <= c.mem {
				ok = true
				break
			}
			if maxGPU == nil || c.gpus > maxGPU.gpus {
				maxGPU = c
			}
			if maxCPU == nil || c.cpu > maxCPU.cpu {
				maxCPU = c
			}
			if maxMem == nil || c.mem > maxMem.mem {
				maxMem = c
			}
		}
		if ok {
			continue
		}
		switch {
		case maxGPU == nil:
			return fmt.Errorf("workload %s: pod role %s: no eligible node pool", w.WorkloadID, g.Role)
		case gpus > maxGPU.gpus:
			return fmt.Errorf("workload %s: pod role %s needs %d %s but the largest node has %d (pool %s)", w.WorkloadID, g.Role, gpus, gpuRes, maxGPU.gpus, maxGPU.pool.Name)
		case cpu > maxCPU.cpu:
			return fmt.Errorf("workload %s: pod role %s needs %s cpu but the largest node has %s (pool %s)", w.WorkloadID, g.Role, g.Requests[trace.ResourceCPU], maxCPU.pool.CPU, maxCPU.pool.Name)
		case mem > maxMem.mem:
			return fmt.Errorf("workload %s: pod role %s needs %s memory but the largest node has %s (pool %s)", w.WorkloadID, g.Role, g.Requests[trace.ResourceMemory], maxMem.pool.Memory, maxMem.pool.Name)
		default:
			names := make([]string, len(cand))
			for i, c := range cand {
				names[i] = c.pool.Name
			}
			return fmt.Errorf("workload %s: pod role %s (%d %s, %s cpu, %s memory) fits no single node of pools %s", w.WorkloadID, g.Role, gpus, gpuRes, g.Requests[trace.ResourceCPU], g.Requests[trace.ResourceMemory], strings.Join(names, ", "))
		}
	}
	return nil
}

// TeamOf is the name of the team (its LocalQueue) a trace namespace's workloads go to.
func (s *Spec) TeamOf(ns string) (string, error) {
	t, err := s.teamFor(ns)
	if err != nil {
		return "", err
	}
	return t.Name, nil
}

// teamFor maps a trace namespace to a team: same name, else namespaceMapping, else defaultTeam.
func (s *Spec) teamFor(ns string) (*Team, error) {
	if t := s.team(ns); t != nil {
		return t, nil
	}
	if name, ok := s.NamespaceMapping[ns]; ok {
		return s.team(name), nil
	}
	if s.DefaultTeam != "" {
		return s.team(s.DefaultTeam), nil
	}
	names := make([]string, len(s.Teams))
	for i, t := range s.Teams {
		names[i] = t.Name
	}
	return nil, fmt.Errorf("namespace %q matches no team (teams: %s); map it under namespaceMapping or set defaultTeam in %s", ns, strings.Join(names, ", "), s.file)
}
