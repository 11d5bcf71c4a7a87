package kubesched

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
)

// migCluster is a whole-GPU H100 node with 8 GPUs and n MIG-partitioned H100 nodes with gpus GPUs
// each, as render/cluster builds them: nodes, DeviceClasses and NVIDIA's ResourceSlices.
func migCluster(t testing.TB, n, gpus int) ([]*corev1.Node, []*resourceapi.DeviceClass, []*resourceapi.ResourceSlice) {
	t.Helper()
	doc := fmt.Sprintf(`apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- {name: whole, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
- {name: mig, gpuFamily: H100-SXM, count: %d, gpusPerNode: %d, cpu: 64, memory: 512Gi, mig: {}}
clusterQueues:
- name: cq
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
  - flavor: h100-sxm-mig
    resources: {cpu: 64, memory: 512Gi, gpu.memory: 80Gi}
teams:
- {name: team-a, clusterQueue: cq}
`, n, gpus)
	spec, err := rcluster.Parse("mig.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var nodes []*corev1.Node
	var classes []*resourceapi.DeviceClass
	var rslices []*resourceapi.ResourceSlice
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Node:
			nodes = append(nodes, x)
		case *resourceapi.DeviceClass:
			classes = append(classes, x)
		case *resourceapi.ResourceSlice:
			rslices = append(rslices, x)
		}
	}
	return nodes, classes, rslices
}

// kwok tolerates the taint render/cluster gives every KWOK node.
var kwok = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists}}

// migClaim is the claim render's ResourceClaimTemplate gives a pod on one slice of profile.
func migClaim(profile string) []*resourceapi.ResourceClaim {
	return []*resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "p-mig"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: render.MIGDeviceClass,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: render.MIGSelector(profile)}}}}}}}}}}
}

func migScheduler(t testing.TB, n, gpus int) *Scheduler {
	t.Helper()
	nodes, classes, rslices := migCluster(t, n, gpus)
	sc, err := New(nodes, Strategy{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.SetResources(classes, rslices); err != nil {
		t.Fatal(err)
	}
	return sc
}

// deviceNames are the device names of a bound claim request.
func deviceNames(r *Request) []string {
	var out []string
	for _, d := range r.Devices() {
		out = append(out, d.Device.String())
	}
	return out
}

// TestClaimGeometry binds MIG pods one after the other on one 1-GPU H100 MIG node, with NVIDIA's
// placements ({0..6}:1 for 1g.10gb, {0,2,4}:2 for 2g.20gb, {0,4}:4 for 3g.40gb, {0}:4 for
// 4g.40gb, {0}:8 for 7g.80gb): which bind, on which placement (the allocator takes a profile's
// first free one), derived by hand.
func TestClaimGeometry(t *testing.T) {
	tests := []struct {
		name     string
		profiles []string
		want     []string // the device each pod gets, "" when it waits
	}{
		{"a 1g.10gb at start 0 keeps the 4g.40gb out", []string{"1g.10gb", "4g.40gb"},
			[]string{"gpu-0-mig-1g10gb-19-0", ""}},
		{"the 4g.40gb first, then a 3g.40gb at start 4", []string{"4g.40gb", "3g.40gb", "1g.10gb"},
			[]string{"gpu-0-mig-4g40gb-5-0", "gpu-0-mig-3g40gb-9-4", ""}},
		{"seven 1g.10gb, not eight", slices.Repeat([]string{"1g.10gb"}, 8),
			[]string{"gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3",
				"gpu-0-mig-1g10gb-19-4", "gpu-0-mig-1g10gb-19-5", "gpu-0-mig-1g10gb-19-6", ""}},
		// Two 2g.20gb take memory slices 0-3; the 3g.40gb goes to start 4, and the third 2g.20gb
		// (start 4 only left) finds it taken.
		{"2g.20gb twice, 3g.40gb, 2g.20gb", []string{"2g.20gb", "2g.20gb", "3g.40gb", "2g.20gb"},
			[]string{"gpu-0-mig-2g20gb-14-0", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-3g40gb-9-4", ""}},
		{"the whole GPU as 7g.80gb", []string{"7g.80gb", "1g.10gb"}, []string{"gpu-0-mig-7g80gb-0-0", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := migScheduler(t, 1, 1)
			for i, p := range tt.profiles {
				r := sc.CompileClaims(req("1", "1Gi", 0), nil, kwok, nil, migClaim(p))
				n, err := sc.Schedule(r)
				got := ""
				if err == nil {
					if name := sc.NodeName(n); !strings.Contains(name, "mig") {
						t.Errorf("pod %d (%s) bound to %s, not the MIG node", i, p, name)
					}
					got = strings.Join(deviceNames(r), ",")
				}
				if got != tt.want[i] {
					t.Errorf("pod %d (%s): devices %q (%v), want %q", i, p, got, err, tt.want[i])
				}
			}
		})
	}
}

// TestClaimRelease: the 4g.40gb that waits for the 1g.10gb at start 0 binds on that node once the
// 1g.10gb leaves it (ScheduleOn, as the sim retries a waiting pod on the node a pod left), and
// kube-scheduler's message says why it waited.
func TestClaimRelease(t *testing.T) {
	sc := migScheduler(t, 1, 1)
	small := sc.CompileClaims(req("1", "1Gi", 0), nil, kwok, nil, migClaim("1g.10gb"))
	n, err := sc.Schedule(small)
	if err != nil {
		t.Fatal(err)
	}
	big := sc.CompileClaims(req("1", "1Gi", 0), nil, kwok, nil, migClaim("4g.40gb"))
	if _, err := sc.Schedule(big); err != ErrUnschedulable {
		t.Fatalf("4g.40gb beside the 1g.10gb at start 0: %v, want unschedulable", err)
	}
	// The whole-GPU node fits its cpu and memory but has no slices; the MIG node's devices are
	// taken.
	if got, want := sc.Why(big), "0/2 nodes are available: 2 cannot allocate all claims."; got != want {
		t.Errorf("Why: %q, want %q", got, want)
	}
	if !sc.CanEverFit(big) {
		t.Error("CanEverFit: a 4g.40gb never fits an empty MIG node")
	}
	if sc.ScheduleOn(big, n) {
		t.Fatal("the 4g.40gb bound while the 1g.10gb holds slice 0")
	}
	sc.Release(n, small)
	if small.Devices() != nil {
		t.Errorf("released request keeps devices %v", small.Devices())
	}
	if !sc.ScheduleOn(big, n) {
		t.Fatal("the 4g.40gb does not bind on the emptied node")
	}
	if got := deviceNames(big); !slices.Equal(got, []string{"gpu-0-mig-4g40gb-5-0"}) {
		t.Errorf("4g.40gb got %v", got)
	}
	// Now the 1g.10gb takes the first placement the 4g.40gb leaves: start 4.
	again := sc.CompileClaims(req("1", "1Gi", 0), nil, kwok, nil, migClaim("1g.10gb"))
	if !sc.ScheduleOn(again, n) || !slices.Equal(deviceNames(again), []string{"gpu-0-mig-1g10gb-19-4"}) {
		t.Errorf("1g.10gb beside the 4g.40gb got %v, want start 4", deviceNames(again))
	}
}

// TestClaimNodeChoice: MIG pods go to the nodes with slices only, by the usual score (least
// allocated cpu and memory), and past a better-scored node whose devices cannot take them; a
// whole-GPU pod never goes to a MIG node (which has no nvidia.com/gpu).
func TestClaimNodeChoice(t *testing.T) {
	sc := migScheduler(t, 2, 1)
	mig := func(i int) bool { return sc.nodes[i].labels[contract.GPUSharing] == "mig" }
	// A 7g.80gb takes the first MIG node by name (equal scores); a busy cpu pod goes to the
	// other MIG node, which then scores lower for the next pod.
	whole := sc.CompileClaims(req("1", "1Gi", 0), nil, kwok, nil, migClaim("7g.80gb"))
	first, err := sc.Schedule(whole)
	if err != nil || !mig(first) {
		t.Fatalf("7g.80gb on %d (%v)", first, err)
	}
	other := -1
	for i := range sc.nodes {
		if mig(i) && i != first {
			other = i
		}
	}
	if !sc.ScheduleOn(sc.Compile(req("32", "1Gi", 0), nil, kwok, nil), other) {
		t.Fatal("cpu pod on the other MIG node")
	}
	// The first MIG node scores better (1 cpu of 64 used against 32) but its GPU is whole in
	// use: the 1g.10gb goes to the other.
	small := sc.CompileClaims(req("1", "1Gi", 0), nil, kwok, nil, migClaim("1g.10gb"))
	if n, err := sc.Schedule(small); err != nil || n != other {
		t.Errorf("1g.10gb on %d (%v), want the other MIG node %d", n, err, other)
	}
	gpu := sc.Compile(req("1", "1Gi", 1), nil, kwok, nil)
	if n, err := sc.Schedule(gpu); err != nil || mig(n) {
		t.Errorf("whole-GPU pod on %d (%v), want the whole-GPU node", n, err)
	}
}

// BenchmarkMIGFill fills 64 MIG nodes of 8 H100s with 1g.10gb pods (7 per GPU, 3,584 pods), one at
// a time, then empties them: the cost of a MIG pod's placement, in allocator attempts.
func BenchmarkMIGFill(b *testing.B) {
	nodes, classes, rslices := migCluster(b, 64, 8)
	claims := migClaim("1g.10gb")
	for b.Loop() {
		sc, err := New(nodes, Strategy{})
		if err != nil {
			b.Fatal(err)
		}
		if err := sc.SetResources(classes, rslices); err != nil {
			b.Fatal(err)
		}
		var bound []*Request
		var at []int
		for {
			r := sc.CompileClaims(req("0.1", "1Gi", 0), nil, kwok, nil, claims)
			n, err := sc.Schedule(r)
			if err != nil {
				break
			}
			bound, at = append(bound, r), append(at, n)
		}
		if len(bound) != 64*8*7 {
			b.Fatalf("%d pods bound, want %d", len(bound), 64*8*7)
		}
		for i, r := range bound {
			sc.Release(at[i], r)
		}
	}
}
