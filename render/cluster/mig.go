package cluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PoolMIG partitions every GPU of a pool into MIG slices, published as NVIDIA's DRA driver
// publishes them with its DynamicMIG feature: every placement of every profile is a device of
// DeviceClass mig.nvidia.com that consumes the GPU's shared counters (its memory slices, SMs and
// memory), so kube-scheduler's allocator cuts the GPUs on demand and the placement geometry holds.
// The pool's nodes advertise no whole nvidia.com/gpu; their flavor is the family's with a "-mig"
// suffix, and Kueue charges its quota through a counter mapping (MIGQuotaResource).
type PoolMIG struct {
	// Profiles limits the profiles published (default: every profile of the family).
	Profiles []string `yaml:"profiles,omitempty"`
}

// MIGQuotaResource is the ClusterQueue resource MIG slices are charged in: the GPU memory their
// profiles consume, from the "memory" counter of NVIDIA's ResourceSlices, through Kueue's
// deviceClassMappings counter source (the name and mapping of Kueue's own documentation).
const MIGQuotaResource = corev1.ResourceName("gpu.memory")

// migFlavorSuffix marks the flavor of a family's MIG-partitioned pools.
const migFlavorSuffix = "-mig"

// gpuSharingMIG is the value of the contract.GPUSharing node label on MIG-partitioned nodes.
const gpuSharingMIG = "mig"

var (
	hwCatalogOnce sync.Once
	hwCatalog     *hw.Catalog
	hwCatalogErr  error
)

// migTable returns the MIG geometry of a catalog family (nil when it has none).
func migTable(family string) (*hw.MIG, error) {
	hwCatalogOnce.Do(func() { hwCatalog, hwCatalogErr = hw.DefaultCatalog() })
	if hwCatalogErr != nil {
		return nil, hwCatalogErr
	}
	g, ok := hwCatalog.GPU(family)
	if !ok {
		return nil, nil
	}
	return g.MIG, nil
}

// SliceShare is the share of a GPU's compute one slice of the MIG profile holds on the spec's
// MIG-partitioned pools (3/7 for a 3g.40gb), from the first such pool whose family has the
// profile; 0 when none has it.
func (s *Spec) SliceShare(profile string) float64 {
	for i := range s.NodePools {
		np := &s.NodePools[i]
		if np.MIG == nil {
			continue
		}
		table, err := migTable(np.GPUFamily)
		if err != nil || table == nil {
			continue
		}
		for j := range table.Profiles {
			if p := &table.Profiles[j]; p.Name == profile {
				return table.ComputeFraction(p)
			}
		}
	}
	return 0
}

// validateMIG checks a pool's MIG partitioning against the family's MIG table.
func (s *Spec) validateMIG(l *errList, p fieldPath, np *NodePool, fam family) {
	if np.MIG == nil {
		return
	}
	mp := p.key("mig")
	if !fam.GPU() || fam.Resource != nvidiaGPU {
		l.add(mp, "MIG needs an NVIDIA GPU family, %s is not one", np.GPUFamily)
		return
	}
	table, err := migTable(fam.Name)
	if err != nil {
		l.add(mp, "hardware catalog: %v", err)
		return
	}
	if table == nil {
		l.add(mp, "GPU family %s has no MIG (MIG-capable: %s)", fam.Name, strings.Join(migFamilies(), ", "))
		return
	}
	// NVIDIA's driver publishes one counter set per GPU in one ResourceSlice, which holds at most
	// resourceapi.ResourceSliceMaxCounterSets of them.
	if np.GPUsPerNode > resourceapi.ResourceSliceMaxCounterSets {
		l.add(p.key("gpusPerNode"), "a MIG pool's nodes have at most %d GPUs (one DRA counter set per GPU in one ResourceSlice), got %d", resourceapi.ResourceSliceMaxCounterSets, np.GPUsPerNode)
	}
	seen := map[string]bool{}
	for j, name := range np.MIG.Profiles {
		if findProfile(table, name) == nil {
			l.add(mp.key("profiles").idx(j), "unknown MIG profile %q for %s (one of %s)", name, fam.Name, strings.Join(table.ProfileNames(), ", "))
		}
		if seen[name] {
			l.add(mp.key("profiles").idx(j), "profile %q listed twice", name)
		}
		seen[name] = true
	}
}

// migFamilies lists the catalog families that have MIG profiles.
func migFamilies() []string {
	var out []string
	for _, name := range familyNames() {
		if t, err := migTable(name); err == nil && t != nil {
			out = append(out, name)
		}
	}
	return out
}

// migProfiles returns the profiles a MIG pool publishes, smallest first.
func migProfiles(np *NodePool) []*hw.MIGProfile {
	table, _ := migTable(np.GPUFamily)
	if table == nil || np.MIG == nil {
		return nil
	}
	var out []*hw.MIGProfile
	for i := range table.Profiles {
		p := &table.Profiles[i]
		if len(np.MIG.Profiles) == 0 || slices.Contains(np.MIG.Profiles, p.Name) {
			out = append(out, p)
		}
	}
	return out
}

// HasMIG reports whether some pool of the spec is MIG-partitioned.
func (s *Spec) HasMIG() bool {
	for i := range s.NodePools {
		if s.NodePools[i].MIG != nil {
			return true
		}
	}
	return false
}

// KueueResources is the "resources" section of Kueue's Configuration the spec needs: the
// deviceClassMappings that charge MIG slices to MIGQuotaResource by the memory counter their
// devices consume (Kueue's counter-based quota for partitionable devices, on by default from
// v0.19); nil when no pool is MIG-partitioned.
func (s *Spec) KueueResources() map[string]any {
	if !s.HasMIG() {
		return nil
	}
	return MIGKueueResources()
}

// MIGKueueResources is the "resources" section of Kueue's Configuration that charges MIG slices
// (see KueueResources), for a cluster configured once for any spec.
func MIGKueueResources() map[string]any {
	return map[string]any{"deviceClassMappings": []any{map[string]any{
		"name":             string(MIGQuotaResource),
		"deviceClassNames": []any{render.MIGDeviceClass},
		"sources": []any{map[string]any{"counter": map[string]any{
			"name":           "memory",
			"driver":         render.NVIDIADRADriver,
			"deviceSelector": map[string]any{"cel": map[string]any{"expression": fmt.Sprintf("device.driver == '%s'", render.NVIDIADRADriver)}},
		}}},
	}}}
}

// WithKueueResources returns Kueue Configuration fields (as experiment variants and `run` pass
// them) with the spec's KueueResources added; a "resources" section already there keeps its
// other fields, and one with its own deviceClassMappings is an error.
func (s *Spec) WithKueueResources(fields map[string]any) (map[string]any, error) {
	add := s.KueueResources()
	if add == nil {
		return fields, nil
	}
	out := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		out[k] = v
	}
	res := map[string]any{}
	if cur, ok := out["resources"]; ok {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("kueue config: resources is %T, want a map", cur)
		}
		if _, ok := m["deviceClassMappings"]; ok {
			return nil, fmt.Errorf("kueue config: resources.deviceClassMappings is set, but the cluster spec's MIG pools need their own")
		}
		for k, v := range m {
			res[k] = v
		}
	}
	for k, v := range add {
		res[k] = v
	}
	out["resources"] = res
	return out, nil
}

// migDeviceClasses are the DeviceClasses NVIDIA's driver chart installs for whole GPUs and MIG
// slices, with its CEL selectors.
func migDeviceClasses() []client.Object {
	class := func(name, typ string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "DeviceClass"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == '%s' && device.attributes['%s'].type == '%s'", render.NVIDIADRADriver, render.NVIDIADRADriver, typ),
			}}}},
		}
	}
	return []client.Object{class(render.GPUDeviceClass, "gpu"), class(render.MIGDeviceClass, "mig")}
}

// migSlices are the ResourceSlices NVIDIA's driver publishes for a node whose GPUs are
// MIG-partitionable, in its layout for Kubernetes 1.35+: one pool named after the node, one slice
// holding a counter set per GPU (memory-slice-0…N−1, multiprocessors, memory), and one slice per
// GPU holding the whole GPU (which consumes every counter) and every placement of every profile
// (which consumes its memory slices, SMs and memory). Device names are the driver's:
// gpu-<minor>-mig-<profile without dots>-<profile id>-<placement start>.
func migSlices(node *corev1.Node, np *NodePool) []client.Object {
	table, _ := migTable(np.GPUFamily)
	if table == nil {
		return nil
	}
	fam := catalog[np.GPUFamily]
	full := table.Full()
	n := np.GPUsPerNode
	pool := resourceapi.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: int64(n + 1)}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Labels: map[string]string{contract.Pool: np.Name}}
	}
	tm := metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"}
	counters := func(p *hw.MIGProfile, start, size int) map[string]resourceapi.Counter {
		c := map[string]resourceapi.Counter{
			"memory":          {Value: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI)},
			"multiprocessors": {Value: *resource.NewQuantity(int64(p.Multiprocessors), resource.DecimalSI)},
		}
		for k := start; k < start+size; k++ {
			c[fmt.Sprintf("memory-slice-%d", k)] = resourceapi.Counter{Value: *resource.NewQuantity(1, resource.DecimalSI)}
		}
		return c
	}
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	var sets []resourceapi.CounterSet
	for g := 0; g < n; g++ {
		sets = append(sets, resourceapi.CounterSet{Name: counterSetName(g), Counters: counters(full, 0, table.MemorySlices)})
	}
	out := []client.Object{&resourceapi.ResourceSlice{
		TypeMeta:   tm,
		ObjectMeta: meta(node.Name + "-counters"),
		Spec:       resourceapi.ResourceSliceSpec{Driver: render.NVIDIADRADriver, Pool: pool, NodeName: ptr.To(node.Name), SharedCounters: sets},
	}}
	for g := 0; g < n; g++ {
		uuid := fmt.Sprintf("GPU-%s-%d", node.Name, g)
		devs := []resourceapi.Device{{
			Name: fmt.Sprintf("gpu-%d", g),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"type": str("gpu"), "uuid": str(uuid), "productName": str(fam.ProductValue),
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: *resource.NewQuantity(full.MemoryMiB<<20, resource.BinarySI)},
			},
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: counterSetName(g), Counters: counters(full, 0, table.MemorySlices)}},
		}}
		for _, p := range migProfiles(np) {
			for _, start := range p.Starts {
				devs = append(devs, resourceapi.Device{
					Name: MIGDeviceName(g, p, start),
					Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
						"type": str("mig"), "profile": str(p.Name), "parentUUID": str(uuid), "productName": str(fam.ProductValue),
					},
					Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
						"memory":          {Value: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI)},
						"multiprocessors": {Value: *resource.NewQuantity(int64(p.Multiprocessors), resource.DecimalSI)},
					},
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: counterSetName(g), Counters: counters(p, start, p.MemorySlices)}},
				})
			}
		}
		out = append(out, &resourceapi.ResourceSlice{
			TypeMeta:   tm,
			ObjectMeta: meta(fmt.Sprintf("%s-gpu-%d", node.Name, g)),
			Spec:       resourceapi.ResourceSliceSpec{Driver: render.NVIDIADRADriver, Pool: pool, NodeName: ptr.To(node.Name), Devices: devs},
		})
	}
	return out
}

// findProfile returns the table's profile named name, nil when it has none.
func findProfile(table *hw.MIG, name string) *hw.MIGProfile {
	for i := range table.Profiles {
		if table.Profiles[i].Name == name {
			return &table.Profiles[i]
		}
	}
	return nil
}

func counterSetName(gpu int) string { return fmt.Sprintf("gpu-%d-counter-set", gpu) }

// MIGDeviceName is the name NVIDIA's DRA driver gives the device of profile p placed at start on
// GPU minor gpu (gpu-0-mig-1g10gb-19-0).
func MIGDeviceName(gpu int, p *hw.MIGProfile, start int) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", gpu, strings.ReplaceAll(p.Name, ".", ""), p.ProfileID, start)
}

// placeMIG places a workload whose pods ask for MIG slices: on the MIG flavors its team's
// ClusterQueue has MIGQuotaResource quota on, whose pools publish every profile it asks for, with
// each pod's slices and CPU and memory fitting one node. Kueue's flavor assignment picks among
// them; a single one pins the pods (node labels and tolerations), as for whole GPUs.
func (p *placer) placeMIG(w *trace.Workload, pl render.Placement, team *Team) (render.Placement, error) {
	if len(p.migFlavors) == 0 {
		return pl, fmt.Errorf("workload %s asks for MIG slices but the cluster has no MIG-partitioned node pool (nodePools[].mig)", w.WorkloadID)
	}
	cq := p.s.clusterQueue(team.ClusterQueue)
	var candidates []*flavor
	for _, fq := range cq.Quotas {
		if f := p.s.flavor(fq.Flavor); f.MIG {
			if _, ok := fq.Resources[string(MIGQuotaResource)]; ok {
				candidates = append(candidates, f)
			}
		}
	}
	if len(candidates) == 0 {
		return pl, fmt.Errorf("workload %s asks for MIG slices but team %s's ClusterQueue %s has no %s quota on a MIG flavor", w.WorkloadID, team.Name, cq.Name, MIGQuotaResource)
	}
	var eligible []*flavor
	var firstErr error
	for _, f := range candidates {
		if err := p.fitsMIG(w, f); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		eligible = append(eligible, f)
	}
	if len(eligible) == 0 {
		return pl, firstErr
	}
	if len(eligible) == 1 {
		pl.GPUNodeSelector = eligible[0].nodeLabels()
		pl.Tolerations = eligible[0].tolerations()
	}
	return pl, nil
}

// fractionProfile is the MIG profile the shares of a GPU w's pods ask for run on: the smallest
// (fewest compute, then memory slices) that holds the largest share both of the GPU's compute and
// of its memory, among the profiles published by the pools of the MIG flavors team's ClusterQueue
// has quota on; "" when none holds it.
func (p *placer) fractionProfile(w *trace.Workload, team *Team) string {
	var share float64
	for _, g := range w.Pods {
		share = max(share, g.Requests.GPUFraction())
	}
	const slack = 1e-9
	var best *hw.MIGProfile
	var bestTable *hw.MIG
	for _, fq := range p.s.clusterQueue(team.ClusterQueue).Quotas {
		f := p.s.flavor(fq.Flavor)
		if f == nil || !f.MIG {
			continue
		}
		if _, ok := fq.Resources[string(MIGQuotaResource)]; !ok {
			continue
		}
		for _, pc := range p.poolsOf(f) {
			table, _ := migTable(pc.pool.GPUFamily)
			if table == nil {
				continue
			}
			for _, q := range migProfiles(pc.pool) {
				if table.ComputeFraction(q) < share-slack || table.MemoryFraction(q) < share-slack {
					continue
				}
				if best == nil || table.ComputeFraction(q) < bestTable.ComputeFraction(best)-slack ||
					table.ComputeFraction(q) < bestTable.ComputeFraction(best)+slack && table.MemoryFraction(q) < bestTable.MemoryFraction(best)-slack {
					best, bestTable = q, table
				}
			}
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// hasMIGQuota reports whether the team's ClusterQueue has MIGQuotaResource quota on a MIG flavor.
func (p *placer) hasMIGQuota(team *Team) bool {
	for _, fq := range p.s.clusterQueue(team.ClusterQueue).Quotas {
		if f := p.s.flavor(fq.Flavor); f != nil && f.MIG {
			if _, ok := fq.Resources[string(MIGQuotaResource)]; ok {
				return true
			}
		}
	}
	return false
}

// fitsMIG checks that every pod of w fits one node of some pool of MIG flavor f: the pool
// publishes the pod's profile, its GPUs hold the pod's slices (each GPU at most as many
// instances as the profile's placements), and the node its CPU and memory.
func (p *placer) fitsMIG(w *trace.Workload, f *flavor) error {
	for _, g := range w.Pods {
		profile, n := g.MIG()
		cpu, mem := g.Requests.Value(trace.ResourceCPU), g.Requests.Value(trace.ResourceMemory)
		ok := false
		var why string
		for _, pc := range p.poolsOf(f) {
			var mp *hw.MIGProfile
			for _, x := range migProfiles(pc.pool) {
				if x.Name == profile {
					mp = x
				}
			}
			switch {
			case profile == "":
			case mp == nil:
				why = fmt.Sprintf("pool %s (%s) does not publish MIG profile %s", pc.pool.Name, pc.pool.GPUFamily, profile)
				continue
			case n > int64(len(mp.Starts)*pc.pool.GPUsPerNode):
				why = fmt.Sprintf("pod role %s needs %d %s slices but a node of pool %s holds %d", g.Role, n, profile, pc.pool.Name, len(mp.Starts)*pc.pool.GPUsPerNode)
				continue
			}
			if cpu > pc.cpu || mem > pc.mem {
				why = fmt.Sprintf("pod role %s (%s cpu, %s memory) does not fit a node of pool %s", g.Role, g.Requests[trace.ResourceCPU], g.Requests[trace.ResourceMemory], pc.pool.Name)
				continue
			}
			ok = true
			break
		}
		if !ok {
			return fmt.Errorf("workload %s on flavor %s: %s", w.WorkloadID, f.Name, why)
		}
	}
	return nil
}

// MIGRule moves the workloads of a family whose pods each ask for at most MaxGPUs whole NVIDIA
// GPUs onto slices of Profile, one slice per GPU, on the spec's MIG flavors; a team whose
// ClusterQueue has no MIG quota keeps whole GPUs.
type MIGRule struct {
	Family  trace.Family `yaml:"family"`
	Profile string       `yaml:"profile"`
	// MaxGPUs is the largest per-pod GPU request moved (default 1).
	MaxGPUs int64 `yaml:"maxGPUs,omitempty"`
}

func (s *Spec) validateMIGFor(l *errList) {
	for i := range s.MIGFor {
		r := &s.MIGFor[i]
		p := fieldPath{"migFor"}.idx(i)
		if !r.Family.Known() || !r.Family.GPU() {
			l.add(p.key("family"), "%q is not a GPU workload family (one of %s)", r.Family, gpuFamiliesList())
		}
		if r.MaxGPUs == 0 {
			r.MaxGPUs = 1
		}
		if r.MaxGPUs < 0 {
			l.add(p.key("maxGPUs"), "must be ≥ 1, got %d", r.MaxGPUs)
		}
		published := false
		for j := range s.NodePools {
			for _, mp := range migProfiles(&s.NodePools[j]) {
				published = published || mp.Name == r.Profile
			}
		}
		if !published {
			l.add(p.key("profile"), "no MIG pool of the spec publishes profile %q", r.Profile)
		}
		for j := range s.MIGFor[:i] {
			if s.MIGFor[j].Family == r.Family {
				l.add(p.key("family"), "family %s has a rule already (migFor[%d])", r.Family, j)
			}
		}
	}
}

func gpuFamiliesList() string {
	var out []string
	for _, f := range trace.Families {
		if f.GPU() {
			out = append(out, string(f))
		}
	}
	return strings.Join(out, ", ")
}

// migRule returns the spec's rule that moves w onto MIG slices, nil when none does: w's family
// has one, every GPU pod asks for whole NVIDIA GPUs, at most the rule's MaxGPUs each.
func (s *Spec) migRule(w *trace.Workload) *MIGRule {
	for i := range s.MIGFor {
		r := &s.MIGFor[i]
		if r.Family != w.WorkloadType || w.TotalGPUs() == 0 || w.GPUResource() != trace.ResourceGPU {
			continue
		}
		for _, g := range w.Pods {
			if g.GPUs() > r.MaxGPUs {
				return nil
			}
		}
		return r
	}
	return nil
}
