package kubesched

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpuNode(name string, gpus int64, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("512Gi"),
			corev1.ResourcePods: resource.MustParse("110"), "nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}
}

func req(cpu string, mem string, gpus int64) corev1.ResourceList {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	if gpus > 0 {
		rl["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return rl
}

func mustNew(t *testing.T, nodes []*corev1.Node, s Strategy) *Scheduler {
	t.Helper()
	sc, err := New(nodes, s)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestFilters(t *testing.T) {
	taint := corev1.Taint{Key: "amd.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	nodes := []*corev1.Node{
		gpuNode("h100", 8, map[string]string{"family": "h100"}),
		gpuNode("mi300", 8, map[string]string{"family": "mi300"}, taint),
	}
	tolerate := []corev1.Toleration{{Key: "amd.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	tests := []struct {
		name     string
		req      corev1.ResourceList
		selector map[string]string
		tol      []corev1.Toleration
		want     string // node, or "" when unschedulable
	}{
		{"selector picks the pool", req("1", "1Gi", 1), map[string]string{"family": "h100"}, nil, "h100"},
		{"taint keeps pods off", req("1", "1Gi", 1), map[string]string{"family": "mi300"}, nil, ""},
		{"toleration lets it on", req("1", "1Gi", 1), map[string]string{"family": "mi300"}, tolerate, "mi300"},
		{"too many GPUs", req("1", "1Gi", 9), nil, tolerate, ""},
		{"too much cpu", req("65", "1Gi", 0), nil, tolerate, ""},
		{"unknown resource", corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}, nil, tolerate, ""},
		{"selector matches nothing", req("1", "1Gi", 0), map[string]string{"family": "l4"}, tolerate, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := mustNew(t, nodes, Strategy{})
			n, err := sc.Schedule(sc.Compile(tt.req, tt.selector, tt.tol, nil))
			got := ""
			if err == nil {
				got = sc.NodeName(n)
			}
			if got != tt.want {
				t.Errorf("bound to %q (%v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestCapacityAndRelease fills a node with 1-GPU pods; the ninth waits until one leaves.
func TestCapacityAndRelease(t *testing.T) {
	sc := mustNew(t, []*corev1.Node{gpuNode("n", 8, nil)}, Strategy{})
	r := sc.Compile(req("1", "1Gi", 1), nil, nil, nil)
	for i := range 8 {
		if _, err := sc.Schedule(r); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	if _, err := sc.Schedule(r); err == nil {
		t.Fatal("a ninth 1-GPU pod fit on an 8-GPU node")
	}
	sc.Release(0, r)
	if _, err := sc.Schedule(r); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if !sc.CanEverFit(sc.Compile(req("1", "1Gi", 8), nil, nil, nil)) || sc.CanEverFit(sc.Compile(req("1", "1Gi", 9), nil, nil, nil)) {
		t.Error("CanEverFit")
	}
}

// TestStrategies places 1-GPU pods on two empty 8-GPU nodes: LeastAllocated spreads them,
// MostAllocated packs them, and RequestedToCapacityRatio on GPUs with a rising shape packs too;
// a tie goes to node a, whose name sorts first. Then an 8-GPU pod fits only where nothing was
// packed.
func TestStrategies(t *testing.T) {
	nodes := func() []*corev1.Node { return []*corev1.Node{gpuNode("a", 8, nil), gpuNode("b", 8, nil)} }
	pack := []ShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}
	tests := []struct {
		s       Strategy
		perNode [2]int // on a, on b
		bigFits bool
	}{
		{Strategy{}, [2]int{2, 2}, false},
		{Strategy{Type: MostAllocated}, [2]int{4, 0}, true},
		{Strategy{Type: RequestedToCapacityRatio, Resources: []ResourceSpec{{Name: "nvidia.com/gpu", Weight: 5}, {Name: "cpu", Weight: 1}}, Shape: pack}, [2]int{4, 0}, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.s.Type), func(t *testing.T) {
			sc := mustNew(t, nodes(), tt.s)
			r := sc.Compile(req("4", "32Gi", 1), nil, nil, nil)
			var got [2]int
			for range 4 {
				n, err := sc.Schedule(r)
				if err != nil {
					t.Fatal(err)
				}
				got[n]++
			}
			if got != tt.perNode {
				t.Errorf("pods per node %v, want %v", got, tt.perNode)
			}
			_, err := sc.Schedule(sc.Compile(req("8", "64Gi", 8), nil, nil, nil))
			if (err == nil) != tt.bigFits {
				t.Errorf("8-GPU pod fits: %v, want %v", err == nil, tt.bigFits)
			}
		})
	}
}

// TestScoresMatchKubeScheduler checks the scores against values computed by hand with
// kube-scheduler's formulas (integer division as in its code).
func TestScoresMatchKubeScheduler(t *testing.T) {
	n := gpuNode("n", 8, nil) // 64 cpu, 512Gi
	cases := []struct {
		s    Strategy
		want int64
	}{
		// cpu (64000-16000)*100/64000 = 75, memory (512-128)/512 → 75; fit 75. Balanced: both
		// fractions 0.25 → 100. Total 175.
		{Strategy{}, 175},
		// Most: 25 + 25 → 25; balanced 100.
		{Strategy{Type: MostAllocated}, 125},
		// GPUs 2/8 = 25 % on the shape 0→0, 100→10 (×10): 25; cpu 25 % → 25; weights 3 and 1:
		// round((25*3 + 25*1)/4) = 25; balanced 100.
		{Strategy{Type: RequestedToCapacityRatio, Resources: []ResourceSpec{{Name: "nvidia.com/gpu", Weight: 3}, {Name: "cpu", Weight: 1}},
			Shape: []ShapePoint{{0, 0}, {100, 10}}}, 125},
	}
	for _, c := range cases {
		sc := mustNew(t, []*corev1.Node{n}, c.s)
		r := sc.Compile(req("16", "128Gi", 2), nil, nil, nil)
		if got := sc.score(&sc.nodes[0], r); got != c.want {
			t.Errorf("%s: score %d, want %d", c.s.Type, got, c.want)
		}
	}
}

func TestStrategyValidation(t *testing.T) {
	bad := []Strategy{
		{Type: "Spread"},
		{Type: RequestedToCapacityRatio},
		{Type: MostAllocated, Shape: []ShapePoint{{0, 0}}},
		{Type: RequestedToCapacityRatio, Shape: []ShapePoint{{50, 1}, {40, 2}}},
		{Type: RequestedToCapacityRatio, Shape: []ShapePoint{{0, 11}}},
		{Resources: []ResourceSpec{{Name: "cpu", Weight: 0}}},
	}
	for _, s := range bad {
		if _, err := New(nil, s); err == nil {
			t.Errorf("strategy %+v accepted", s)
		}
	}
}

// TestClassesPickABestNode schedules and releases random pods on three pools and checks every
// pick against a node-by-node evaluation: the node chosen is the first by name of those that fit
// with the best score, and a pod is refused only when no node fits.
func TestClassesPickABestNode(t *testing.T) {
	var nodes []*corev1.Node
	for i := range 30 {
		pool := []string{"a", "b", "c"}[i%3]
		gpus := int64(8)
		if pool == "c" {
			gpus = 4
		}
		nodes = append(nodes, gpuNode(fmt.Sprintf("%s-%02d", pool, i), gpus, map[string]string{"pool": pool}))
	}
	for _, st := range []Strategy{{}, {Type: MostAllocated}, {Type: RequestedToCapacityRatio,
		Resources: []ResourceSpec{{Name: "nvidia.com/gpu", Weight: 3}, {Name: "cpu", Weight: 1}}, Shape: []ShapePoint{{0, 0}, {100, 10}}}} {
		sc := mustNew(t, nodes, st)
		rng := rand.New(rand.NewPCG(7, 7))
		type bound struct {
			node int
			r    *Request
		}
		var live []bound
		for step := range 2000 {
			if len(live) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(live))
				sc.Release(live[k].node, live[k].r)
				live = append(live[:k], live[k+1:]...)
				continue
			}
			var sel map[string]string
			if p := rng.IntN(4); p < 3 {
				sel = map[string]string{"pool": []string{"a", "b", "c"}[p]}
			}
			r := sc.Compile(req(fmt.Sprint(1+rng.IntN(16)), fmt.Sprintf("%dGi", 1+rng.IntN(64)), int64(rng.IntN(5))), sel, nil, nil)
			best, want := int64(-1), -1 // the best score, and the first node by name that has it
			for _, i := range r.candidates {
				n := &sc.nodes[i]
				if !sc.fits(n, r) {
					continue
				}
				if score := sc.score(n, r); score > best || (score == best && n.name < sc.nodes[want].name) {
					best, want = score, int(i)
				}
			}
			node, err := sc.Schedule(r)
			if best < 0 {
				if err == nil {
					t.Fatalf("%s step %d: bound where nothing fits", st.Type, step)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s step %d: refused, best score %d", st.Type, step, best)
			}
			// Scored before the bind: undo it to compare.
			sc.bind(node, r, -1)
			got := sc.score(&sc.nodes[node], r)
			fit := sc.fits(&sc.nodes[node], r)
			sc.bind(node, r, 1)
			if !fit || got != best || node != want {
				t.Fatalf("%s step %d: picked node %d (fits %v, score %d), want node %d (score %d)", st.Type, step, node, fit, got, want, best)
			}
			live = append(live, bound{node, r})
		}
	}
}

// TestWhy: the message is kube-scheduler's FitError text for the same nodes (its format, from
// pkg/scheduler/framework FitError.Error: per reason the number of nodes, sorted as strings),
// with each node counted under the first default-profile filter that rejects it.
func TestWhy(t *testing.T) {
	taint := corev1.Taint{Key: "amd.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	nodes := []*corev1.Node{
		gpuNode("a", 8, map[string]string{"family": "h100"}),
		gpuNode("b", 8, map[string]string{"family": "h100"}),
		gpuNode("c", 8, map[string]string{"family": "l4"}),
		gpuNode("d", 8, map[string]string{"family": "h100"}, taint),
	}
	sc := mustNew(t, nodes, Strategy{})
	h100 := map[string]string{"family": "h100"}
	if _, err := sc.Schedule(sc.Compile(req("60", "1Gi", 2), h100, nil, nil)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *Request
		want string
	}{
		{"GPUs short on both candidates, one of them cpu too", sc.Compile(req("8", "1Gi", 9), h100, nil, nil),
			"0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {amd.com/gpu: present}, 2 Insufficient nvidia.com/gpu."},
		{"a TAS pod held to node a", sc.Compile(req("8", "1Gi", 1), h100, nil, []string{"a"}),
			"0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {amd.com/gpu: present}, 2 node(s) didn't match Pod's node affinity/selector."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sc.Why(tt.req); got != tt.want {
				t.Errorf("Why:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
