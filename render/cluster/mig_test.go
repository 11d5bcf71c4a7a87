package cluster

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
)

// migSpec has a whole-GPU pool and a MIG-partitioned pool of one H100 node with 2 GPUs.
const migSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- name: h100
  gpuFamily: H100-SXM
  count: 1
  gpusPerNode: 8
  cpu: 192
  memory: 2000Gi
- name: mig
  gpuFamily: H100-SXM
  count: 1
  gpusPerNode: 2
  cpu: 64
  memory: 512Gi
  mig: {}
clusterQueues:
- name: cq
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
  - flavor: h100-sxm-mig
    resources: {cpu: 64, memory: 512Gi, gpu.memory: 160Gi}
teams:
- name: team-a
  clusterQueue: cq
`

func parseMIG(t *testing.T, text string) *Spec {
	t.Helper()
	s, err := Parse("mig.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMIGObjects(t *testing.T) {
	s := parseMIG(t, migSpec)
	objs, err := s.Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*corev1.Node
	var rslices []*resourceapi.ResourceSlice
	var classes []string
	var flavorLabels map[string]string
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Node:
			nodes = append(nodes, x)
		case *resourceapi.ResourceSlice:
			rslices = append(rslices, x)
		case *resourceapi.DeviceClass:
			classes = append(classes, x.Name)
		}
		if o.GetName() == "h100-sxm-mig" && o.GetObjectKind().GroupVersionKind().Kind == "ResourceFlavor" {
			flavorLabels = flavorNodeLabels(t, o)
		}
	}
	if want := []string{"gpu.nvidia.com", "mig.nvidia.com"}; !slices.Equal(classes, want) {
		t.Errorf("DeviceClasses %v, want %v", classes, want)
	}
	if len(nodes) != 2 {
		t.Fatalf("%d nodes, want 2", len(nodes))
	}
	mig := nodes[1]
	if _, ok := mig.Status.Capacity["nvidia.com/gpu"]; ok {
		t.Errorf("MIG node advertises whole GPUs: %v", mig.Status.Capacity)
	}
	if q := nodes[0].Status.Capacity["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("whole-GPU node has %v GPUs, want 8", q.String())
	}
	if mig.Labels[contract.GPUSharing] != "mig" || nodes[0].Labels[contract.GPUSharing] != "" {
		t.Errorf("gpu-sharing labels: MIG node %q, whole node %q", mig.Labels[contract.GPUSharing], nodes[0].Labels[contract.GPUSharing])
	}
	for k, v := range flavorLabels {
		if mig.Labels[k] != v {
			t.Errorf("MIG flavor's node label %s=%s not on the MIG node", k, v)
		}
	}
	if flavorLabels[contract.GPUSharing] != "mig" {
		t.Errorf("MIG flavor's node labels %v lack %s=mig", flavorLabels, contract.GPUSharing)
	}
	// NVIDIA's split layout: a counter slice and one slice per GPU, all in the node's pool.
	if len(rslices) != 3 {
		t.Fatalf("%d ResourceSlices, want 3 (counters + 2 GPUs)", len(rslices))
	}
	// The H100's placements, counted by hand from nvidia-smi mig -lgipp: 1g.10gb 7, 1g.20gb 4,
	// 2g.20gb 3, 3g.40gb 2, 4g.40gb 1, 7g.80gb 1, plus the whole GPU.
	const perGPU = 7 + 4 + 3 + 2 + 1 + 1 + 1
	name := regexp.MustCompile(`^gpu-[0-9]+(-mig-[0-9]g[0-9]+gb-[0-9]+-[0-7])?$`)
	for i, rs := range rslices {
		if rs.Spec.Pool.Name != mig.Name || rs.Spec.Pool.ResourceSliceCount != 3 || ptr.Deref(rs.Spec.NodeName, "") != mig.Name {
			t.Errorf("slice %s: pool %+v node %v", rs.Name, rs.Spec.Pool, rs.Spec.NodeName)
		}
		if i == 0 {
			if len(rs.Spec.Devices) != 0 || len(rs.Spec.SharedCounters) != 2 {
				t.Fatalf("counter slice has %d devices and %d counter sets", len(rs.Spec.Devices), len(rs.Spec.SharedCounters))
			}
			c := rs.Spec.SharedCounters[0].Counters
			if m := c["memory"].Value; m.Value() != 81920<<20 || len(c) != 10 {
				t.Errorf("counter set %v: want memory 81920Mi, multiprocessors and 8 memory slices", c)
			}
			continue
		}
		if len(rs.Spec.Devices) != perGPU {
			t.Errorf("slice %s: %d devices, want %d", rs.Name, len(rs.Spec.Devices), perGPU)
		}
		for _, d := range rs.Spec.Devices {
			if !name.MatchString(d.Name) {
				t.Errorf("device name %q is not NVIDIA's form", d.Name)
			}
		}
	}
	if got := rslices[1].Spec.Devices[1].Name; got != "gpu-0-mig-1g10gb-19-0" {
		t.Errorf("first MIG device %q, want gpu-0-mig-1g10gb-19-0", got)
	}
}

func flavorNodeLabels(t *testing.T, o any) map[string]string {
	t.Helper()
	rf, ok := o.(*kueue.ResourceFlavor)
	if !ok {
		t.Fatalf("flavor object is %T", o)
	}
	return rf.Spec.NodeLabels
}

// allocate runs kube-scheduler's structured allocator (k8s.io/dynamic-resource-allocation, with
// partitionable devices as Kubernetes 1.36 enables them) over the spec's MIG node, one claim per
// profile in order, keeping what each allocated; it returns how many claims were allocated.
func allocate(t *testing.T, s *Spec, profiles ...string) int {
	t.Helper()
	objs, err := s.Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var node *corev1.Node
	var rslices []*resourceapi.ResourceSlice
	var classes []*resourceapi.DeviceClass
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Node:
			if x.Labels[contract.GPUSharing] == "mig" {
				node = x
			}
		case *resourceapi.ResourceSlice:
			rslices = append(rslices, x)
		case *resourceapi.DeviceClass:
			classes = append(classes, x)
		}
	}
	allocated := sets.New[structured.DeviceID]()
	cache := cel.NewCache(10, cel.Features{})
	for i, p := range profiles {
		w := &trace.Workload{WorkloadID: fmt.Sprintf("w%d", i), Namespace: "team-a", WorkloadType: trace.DebugEval, DurationSec: 60,
			Pods: []trace.PodGroup{{Role: "main", Replicas: 1, Requests: trace.Requests{trace.MIGResource(p): "1"}}}}
		tmpl := migTemplate(t, w)
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name, Namespace: tmpl.Namespace, UID: "u"}, Spec: tmpl.Spec.Spec}
		a, err := structured.NewAllocator(context.Background(), structured.Features{PartitionableDevices: true},
			structured.AllocatedState{AllocatedDevices: allocated}, classLister(classes), rslices, cache)
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Allocate(context.Background(), node, []*resourceapi.ResourceClaim{claim})
		if err != nil || len(res) == 0 {
			return i
		}
		for _, r := range res[0].Devices.Results {
			allocated.Insert(structured.MakeDeviceID(r.Driver, r.Pool, r.Device))
		}
	}
	return len(profiles)
}

// migTemplate renders w's ResourceClaimTemplate as render writes it.
func migTemplate(t *testing.T, w *trace.Workload) *resourceapi.ResourceClaimTemplate {
	t.Helper()
	r, err := render.NewRenderer(render.DefaultRegistry(), render.DefaultMapping(), render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := r.Render(w, nil, render.Placement{Namespace: w.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if x, ok := o.(*resourceapi.ResourceClaimTemplate); ok {
			return x
		}
	}
	t.Fatalf("no ResourceClaimTemplate among %d objects", len(objs))
	return nil
}

type classLister []*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l, nil }
func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for _, c := range l {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no DeviceClass %s", name)
}

// TestMIGGeometryUnderTheAllocator allocates slices on a 2-GPU MIG node with kube-scheduler's own
// allocator: what fits and what the placement geometry forbids, derived by hand from NVIDIA's
// placement table ({0..6}:1 for 1g.10gb, {0,2,4,6}:2 for 1g.20gb, {0,2,4}:2 for 2g.20gb, {0,4}:4
// for 3g.40gb, {0}:4 for 4g.40gb, {0}:8 for 7g.80gb).
func TestMIGGeometryUnderTheAllocator(t *testing.T) {
	s := parseMIG(t, migSpec)
	rep := func(p string, n int) []string { return slices.Repeat([]string{p}, n) }
	tests := []struct {
		name     string
		profiles []string
		want     int // claims allocated, in order
	}{
		{"seven 1g.10gb per GPU, 14 on two", rep("1g.10gb", 15), 14},
		{"one 4g.40gb per GPU", rep("4g.40gb", 3), 2},
		{"4g.40gb beside 3g.40gb on each GPU", []string{"4g.40gb", "3g.40gb", "4g.40gb", "3g.40gb"}, 4},
		{"a whole 7g.80gb per GPU", []string{"7g.80gb", "7g.80gb", "1g.10gb"}, 2},
		// A 1g.10gb at start 0 of GPU 0 leaves its slices 0-3 unusable for a 4g.40gb (start 0 only),
		// which goes to GPU 1; a second 1g.10gb takes start 1 of GPU 0, and the second 4g.40gb finds
		// no GPU although GPU 0 still has 5 of 7 compute slices and 60 of 80 GB free.
		{"geometry forbids a 4g.40gb beside 1g.10gb at start 0", []string{"1g.10gb", "4g.40gb", "1g.10gb", "4g.40gb"}, 3},
		// Three 2g.20gb take slices 0-5 of one GPU; the 1g.10gb instances at 6 fit, and GPU 1 holds
		// the rest: 3 + 1 on GPU 0 (start 6), 7 on GPU 1.
		{"2g.20gb and 1g.10gb", append(rep("2g.20gb", 3), rep("1g.10gb", 9)...), 3 + 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := allocate(t, s, tc.profiles...); got != tc.want {
				t.Errorf("allocated %d of %v, want %d", got, tc.profiles, tc.want)
			}
		})
	}
}

func TestMIGSpecErrors(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"family without MIG", "  gpuFamily: H100-SXM\n  count: 1\n  gpusPerNode: 2", "  gpuFamily: L40S\n  count: 1\n  gpusPerNode: 2", "mig.yaml:16: nodePools[1].mig: GPU family L40S has no MIG"},
		{"unknown profile", "  mig: {}", "  mig: {profiles: [1g.10gb, 1g.5gb]}", `nodePools[1].mig.profiles[1]: unknown MIG profile "1g.5gb" for H100-SXM`},
		{"too many GPUs", "  gpusPerNode: 2", "  gpusPerNode: 16", "nodePools[1].gpusPerNode: a MIG pool's nodes have at most 8 GPUs"},
		{"whole GPUs on a MIG flavor", "gpu.memory: 160Gi", "nvidia.com/gpu: 2", `resources["nvidia.com/gpu"]: flavor h100-sxm-mig is MIG-partitioned`},
		{"gpu.memory on a whole flavor", "nvidia.com/gpu: 8}", "gpu.memory: 8Gi}", `resources["gpu.memory"]: flavor h100-sxm is not MIG-partitioned`},
		{"unknown mig field", "  mig: {}", "  mig: {layout: all-1g.10gb}", "nodePools[1].mig.layout: unknown field"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(migSpec, tc.old) {
				t.Fatalf("spec has no %q", tc.old)
			}
			_, err := Parse("mig.yaml", []byte(strings.Replace(migSpec, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestMIGPlacement(t *testing.T) {
	s := parseMIG(t, migSpec)
	pl := s.Placer(1, false)
	w := &trace.Workload{WorkloadID: "w", Namespace: "team-a", WorkloadType: trace.DebugEval,
		Pods: []trace.PodGroup{{Role: "main", Replicas: 1, Requests: trace.Requests{"cpu": "4", trace.MIGResource("2g.20gb"): "1"}}}}
	p, err := pl.Place(w)
	if err != nil {
		t.Fatal(err)
	}
	if p.GPUNodeSelector[contract.GPUSharing] != "mig" {
		t.Errorf("MIG workload's node selector %v, want the MIG flavor's labels", p.GPUNodeSelector)
	}
	w.Pods[0].Requests = trace.Requests{trace.MIGResource("2g.20gb"): "7"}
	if _, err := pl.Place(w); err == nil || !strings.Contains(err.Error(), "needs 7 2g.20gb slices but a node of pool mig holds 6") {
		t.Errorf("7 2g.20gb slices on a 2-GPU node: error %v", err)
	}
	w.Pods[0].Requests = trace.Requests{trace.MIGResource("1g.5gb"): "1"}
	if _, err := pl.Place(w); err == nil || !strings.Contains(err.Error(), "does not publish MIG profile 1g.5gb") {
		t.Errorf("unknown profile: error %v", err)
	}
	// A whole-GPU workload stays on the whole-GPU flavor, pinned to it as the only one.
	w.Pods[0].Requests = trace.Requests{"nvidia.com/gpu": "1"}
	p, err = pl.Place(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.GPUNodeSelector[contract.GPUSharing]; ok || p.GPUResource != "nvidia.com/gpu" {
		t.Errorf("whole-GPU workload placed with %v / %s", p.GPUNodeSelector, p.GPUResource)
	}
}

func TestKueueResources(t *testing.T) {
	s := parseMIG(t, migSpec)
	got, err := s.WithKueueResources(map[string]any{"resources": map[string]any{"excludeResourcePrefixes": []any{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	res := got["resources"].(map[string]any)
	if _, ok := res["excludeResourcePrefixes"]; !ok {
		t.Errorf("resources lost its other fields: %v", res)
	}
	m := res["deviceClassMappings"].([]any)[0].(map[string]any)
	if m["name"] != "gpu.memory" || m["deviceClassNames"].([]any)[0] != "mig.nvidia.com" {
		t.Errorf("mapping %v", m)
	}
	if _, err := s.WithKueueResources(map[string]any{"resources": map[string]any{"deviceClassMappings": []any{}}}); err == nil {
		t.Error("a variant's own deviceClassMappings beside MIG pools: no error")
	}
	plain := parseMIG(t, strings.Replace(strings.Replace(migSpec, "  mig: {}\n", "", 1),
		"  - flavor: h100-sxm-mig\n    resources: {cpu: 64, memory: 512Gi, gpu.memory: 160Gi}\n", "", 1))
	if plain.KueueResources() != nil {
		t.Error("a spec without MIG pools asks Kueue for device class mappings")
	}
}

// withTeamB is migSpec with a team-b whose ClusterQueue cq-b has whole H100s and no MIG quota,
// and tail after the teams.
func withTeamB(tail string) string {
	text := migSpec + "- name: team-b\n  clusterQueue: cq-b\n" + tail
	return strings.Replace(text, "teams:\n", `- name: cq-b
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
teams:
`, 1)
}

func TestMIGFor(t *testing.T) {
	text := withTeamB("migFor:\n- {family: debug_eval, profile: 3g.40gb}\n")
	s := parseMIG(t, text)
	pl := s.Placer(1, false)
	w := &trace.Workload{WorkloadID: "w", Namespace: "team-a", WorkloadType: trace.DebugEval, DurationSec: 60,
		Pods: []trace.PodGroup{{Role: "main", Replicas: 1, Requests: trace.Requests{"cpu": "4", "nvidia.com/gpu": "1"}}}}
	p, err := pl.Place(w)
	if err != nil {
		t.Fatal(err)
	}
	if p.MIGProfile != "3g.40gb" || p.GPUNodeSelector[contract.GPUSharing] != "mig" {
		t.Fatalf("debug_eval on team-a placed with profile %q, selector %v; want 3g.40gb on the MIG flavor", p.MIGProfile, p.GPUNodeSelector)
	}
	r, err := render.NewRenderer(render.DefaultRegistry(), render.DefaultMapping(), render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := r.Render(w, nil, p)
	if err != nil {
		t.Fatal(err)
	}
	var claim *resourceapi.ResourceClaimTemplate
	for _, o := range objs {
		if x, ok := o.(*resourceapi.ResourceClaimTemplate); ok {
			claim = x
		}
	}
	if claim == nil || claim.Spec.Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression != render.MIGSelector("3g.40gb") {
		t.Errorf("rendered claim %+v, want one 3g.40gb slice", claim)
	}
	if w.Pods[0].Requests["nvidia.com/gpu"] != "1" {
		t.Errorf("placing and rendering changed the trace's workload: %v", w.Pods[0].Requests)
	}
	// Two GPUs per pod is above maxGPUs (1): whole GPUs. team-b has no MIG quota: whole GPUs.
	for _, tc := range []struct{ ns, gpus string }{{"team-a", "2"}, {"team-b", "1"}} {
		w.Namespace, w.Pods[0].Requests["nvidia.com/gpu"] = tc.ns, tc.gpus
		p, err := pl.Place(w)
		if err != nil {
			t.Fatal(err)
		}
		if p.MIGProfile != "" {
			t.Errorf("%s asking %s GPUs moved to %s slices", tc.ns, tc.gpus, p.MIGProfile)
		}
	}
	bad := strings.Replace(text, "profile: 3g.40gb", "profile: 3g.71gb", 1)
	if _, err := Parse("mig.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), `migFor[0].profile: no MIG pool of the spec publishes profile "3g.71gb"`) {
		t.Errorf("unpublished profile: error %v", err)
	}
}

// A share of a GPU runs on the smallest slice that holds it of both the compute and the memory
// (H100-SXM: 7 compute and 8 memory slices; the profiles worked out by hand below) where the
// team's ClusterQueue has MIG quota, on one whole GPU where it has none; either way the pod's
// utilisation of its device is the share of its own, and the rounding is reported.
func TestGPUFractions(t *testing.T) {
	s := parseMIG(t, withTeamB(""))
	pl := s.Placer(1, false)
	var warnings []string
	r, err := render.NewRenderer(render.DefaultRegistry(), render.DefaultMapping(), render.Options{Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		team, share, profile string
	}{
		{"team-a", "0.1", "1g.10gb"},  // 1/7 ≥ 0.1, 1/8 ≥ 0.1
		{"team-a", "0.14", "1g.20gb"}, // 1/7 ≥ 0.14 but 1/8 < 0.14: 1g.20gb has 2 memory slices
		{"team-a", "0.25", "2g.20gb"}, // 2/7, 2/8
		{"team-a", "0.5", "4g.40gb"},  // 3/7 < 0.5
		{"team-a", "0.9", "7g.80gb"},
		{"team-b", "0.5", ""}, // no MIG quota: a whole GPU
	} {
		t.Run(tc.team+"/"+tc.share, func(t *testing.T) {
			warnings = nil
			prof := trace.Profile{CPUUtilization: 0.5, GPUUtilization: 0.8, MemoryIntensity: 0.3, IOIntensity: 0.1, CPUFeedIntensityGPU: 0.2}
			w := &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: "w", Namespace: tc.team, WorkloadType: trace.DebugEval, DurationSec: 600,
				SharedIntensityProfile: prof, WorkloadClass: trace.Class{CPU: "cpu.mixed", GPU: "gpu.compute_bound"},
				Pods: []trace.PodGroup{{Role: "main", Replicas: 1, Requests: trace.Requests{"cpu": "4", trace.ResourceGPUFraction: tc.share}}}}
			if err := w.Validate(); err != nil {
				t.Fatal(err)
			}
			p, err := pl.Place(w)
			if err != nil {
				t.Fatal(err)
			}
			if p.MIGProfile != tc.profile {
				t.Fatalf("share %s on %s placed on profile %q, want %q", tc.share, tc.team, p.MIGProfile, tc.profile)
			}
			objs, err := r.Render(w, nil, p)
			if err != nil {
				t.Fatal(err)
			}
			var spec *corev1.PodTemplateSpec
			for _, o := range objs {
				if j, ok := o.(*batchv1.Job); ok {
					spec = &j.Spec.Template
				}
			}
			if spec == nil {
				t.Fatalf("no Job among %d objects", len(objs))
			}
			req := spec.Spec.Containers[0].Resources.Requests
			if _, ok := req[trace.ResourceGPUFraction]; ok {
				t.Errorf("the share reached the container's requests: %v", req)
			}
			gpu := req[corev1.ResourceName(trace.ResourceGPU)]
			if tc.profile == "" {
				if gpu.Value() != 1 || len(spec.Spec.ResourceClaims) != 0 {
					t.Errorf("share on a whole GPU: requests %v, claims %v", req, spec.Spec.ResourceClaims)
				}
			} else if !gpu.IsZero() || len(spec.Spec.ResourceClaims) != 1 {
				t.Errorf("share on a slice: requests %v, claims %v", req, spec.Spec.ResourceClaims)
			}
			c, err := contract.Parse(spec.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			share, _ := trace.ParseQuantity(tc.share)
			if want := share * 0.8; math.Abs(c.Profile.GPUUtilization-want) > 1e-12 || c.MIGProfile != tc.profile {
				t.Errorf("contract: GPU utilisation %v on profile %q, want %v on %q", c.Profile.GPUUtilization, c.MIGProfile, want, tc.profile)
			}
			want := "runs on one nvidia.com/mig-" + tc.profile + " slice"
			if tc.profile == "" {
				want = "runs on a whole nvidia.com/gpu"
			}
			if len(warnings) != 1 || !strings.Contains(warnings[0], "share "+strconv.FormatFloat(share, 'g', -1, 64)+" of a GPU "+want) {
				t.Errorf("warnings %q, want one saying the share %s", warnings, want)
			}
			if w.Pods[0].Requests[trace.ResourceGPUFraction] != tc.share || len(w.Pods[0].Requests) != 2 {
				t.Errorf("placing and rendering changed the trace's workload: %v", w.Pods[0].Requests)
			}
		})
	}
	// Beside slices asked for by profile, a share goes on slices too; without MIG quota the mix
	// is refused, naming the queue.
	mixed := func(ns string) *trace.Workload {
		return &trace.Workload{WorkloadID: "mixed", Namespace: ns, WorkloadType: trace.DebugEval, Pods: []trace.PodGroup{
			{Role: "a", Replicas: 1, Requests: trace.Requests{"cpu": "4", trace.MIGResource("1g.10gb"): "1"}},
			{Role: "b", Replicas: 1, Requests: trace.Requests{"cpu": "4", trace.ResourceGPUFraction: "0.25"}}}}
	}
	if p, err := pl.Place(mixed("team-a")); err != nil || p.MIGProfile != "2g.20gb" {
		t.Errorf("slices and a share on team-a: profile %q, error %v; want 2g.20gb", p.MIGProfile, err)
	}
	if _, err := pl.Place(mixed("team-b")); err == nil || !strings.Contains(err.Error(), "asks for MIG slices and for a share of a GPU that no MIG profile its ClusterQueue cq-b has quota on holds") {
		t.Errorf("slices and a share on team-b: error %v", err)
	}
}
