package cluster

import (
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
)

// wl builds a workload; pods are "role:replicas:gpus:cpu:memory" specs.
func wl(id, ns, intent string, gang bool, pods ...string) *trace.Workload {
	w := &trace.Workload{WorkloadID: id, Namespace: ns, IntentClass: intent, Gang: gang}
	for _, p := range pods {
		var role, cpu, mem string
		var n, gpus int
		f := strings.Split(p, ":")
		role, cpu, mem = f[0], f[3], f[4]
		fmt.Sscan(f[1], &n)
		fmt.Sscan(f[2], &gpus)
		r := trace.Requests{trace.ResourceCPU: cpu, trace.ResourceMemory: mem}
		if gpus > 0 {
			r[trace.ResourceGPU] = fmt.Sprint(gpus)
		}
		w.Pods = append(w.Pods, trace.PodGroup{Role: role, Replicas: n, Requests: r, Gang: gang})
	}
	return w
}

var h100 = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

// amd moves a workload's GPU requests to amd.com/gpu, as Joulie's --amd-gpu-ratio writes them.
func amd(w *trace.Workload) *trace.Workload {
	for _, p := range w.Pods {
		if n, ok := p.Requests[trace.ResourceGPU]; ok {
			delete(p.Requests, trace.ResourceGPU)
			p.Requests[trace.ResourceAMDGPU] = n
		}
	}
	return w
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name    string
		spec    string
		w       *trace.Workload
		want    render.Placement
		wantErr string
	}{
		{"team by namespace", "teams", wl("w1", "team-b", "", false, "main:1:1:8:64Gi"),
			render.Placement{Namespace: "team-b", Queue: "team-b-lq", PriorityClass: "standard", GPUNodeSelector: h100, GPUResource: "nvidia.com/gpu"}, ""},
		{"intent to priority", "teams", wl("w2", "team-a", "eco", false, "main:1:0:4:8Gi"),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "eco"}, ""},
		{"performance", "teams", wl("w3", "team-c", "performance", false, "main:1:0:4:8Gi"),
			render.Placement{Namespace: "team-c", Queue: "team-c-lq", PriorityClass: "performance"}, ""},
		{"namespace mapping", "mixed", wl("w4", "ml-platform", "", false, "main:1:0:4:8Gi"),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "standard"}, ""},
		{"default team", "mixed", wl("w5", "someone", "", false, "main:1:0:4:8Gi"),
			render.Placement{Namespace: "team-b", Queue: "team-b-lq", PriorityClass: "standard"}, ""},
		{"single family small", "small", wl("w6", "team-z", "", false, "main:1:2:8:64Gi"),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "standard", GPUNodeSelector: h100, GPUResource: "nvidia.com/gpu"}, ""},
		{"several families unpinned", "mixed", wl("w7", "team-a", "", false, "main:1:2:8:64Gi"),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "standard", GPUResource: "nvidia.com/gpu"}, ""},
		{"gang gets topology level", "mixed", wl("w8", "team-a", "", true, "launcher:1:0:2:4Gi", "worker:4:8:96:800Gi"),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "standard", GPUResource: "nvidia.com/gpu", TopologyLevel: "cloud.provider.com/topology-rack"}, ""},
		{"no team", "teams", wl("w9", "team-z", "", false, "main:1:0:4:8Gi"),
			render.Placement{}, `workload w9: namespace "team-z" matches no team (teams: team-a, team-b, team-c)`},
		{"unknown intent", "teams", wl("w10", "team-a", "urgent", false, "main:1:0:4:8Gi"),
			render.Placement{}, `workload w10: intentClass "urgent" has no priority class`},
		{"pod too many gpus", "small", wl("w11", "team-a", "", false, "worker:2:16:8:64Gi"),
			render.Placement{}, "workload w11: pod role worker needs 16 nvidia.com/gpu but the largest node has 8 (pool h100)"},
		{"pod too much cpu", "small", wl("w12", "team-a", "", false, "main:1:0:500:8Gi"),
			render.Placement{}, "workload w12: pod role main needs 500 cpu but the largest node has 192 (pool h100)"},
		{"pod too much memory", "small", wl("w13", "team-a", "", false, "worker:1:8:8:3Ti"),
			render.Placement{}, "workload w13: pod role worker needs 3Ti memory but the largest node has 2000Gi (pool h100)"},
		{"gang larger than cluster", "small", wl("w14", "team-a", "", true, "worker:4:8:8:64Gi"),
			render.Placement{}, "workload w14: the gang needs 32 nvidia.com/gpu in total but the eligible pools have 16"},
		{"amd on amd pools", "mixed", amd(wl("w15", "team-a", "", true, "launcher:1:0:2:4Gi", "worker:2:4:48:400Gi")),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "standard", GPUResource: "amd.com/gpu", TopologyLevel: "cloud.provider.com/topology-rack"}, ""},
		{"amd gang larger than the amd pools", "mixed", amd(wl("w16", "team-a", "", true, "worker:5:8:8:64Gi")),
			render.Placement{}, "workload w16: the gang needs 40 amd.com/gpu in total but the eligible pools have 32"},
		{"amd pinned to a single nvidia family", "small", amd(wl("w17", "team-a", "", false, "main:1:2:8:64Gi")),
			render.Placement{Namespace: "team-a", Queue: "team-a-lq", PriorityClass: "standard", GPUNodeSelector: h100, GPUResource: "nvidia.com/gpu"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := loadExample(t, tc.spec).Placer(1, false).Place(tc.w)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.NodeLabelKeys[contract.Pool] || !got.NodeLabelKeys["kubernetes.io/hostname"] || got.NodeLabelKeys["joulie.io/power-profile"] {
				t.Errorf("node label keys %v", got.NodeLabelKeys)
			}
			got.NodeLabelKeys = nil
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPlaceNoGPUPool(t *testing.T) {
	in := strings.Replace(base, "- name: h100\n  gpuFamily: H100-SXM\n  count: 4\n  gpusPerNode: 8\n  cpu: 192\n  memory: 2000Gi\n  labels:\n    zone: a\n  taints:\n  - {key: gpu, value: \"true\", effect: NoSchedule}\n", "", 1)
	in = strings.Replace(in, "  - flavor: h100-sxm\n    resources:\n      cpu: 768\n      memory: 8000Gi\n      nvidia.com/gpu: {nominalQuota: 32, borrowingLimit: 8, lendingLimit: 16}\n", "", 1)
	s, err := Parse("cpu-only.yaml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Placer(1, true).Place(wl("w1", "team-a", "", false, "main:1:1:4:8Gi"))
	if err == nil || !strings.Contains(err.Error(), "workload w1 requests 1 nvidia.com/gpu but the cluster has no GPU node pool") {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.Placer(1, true).Place(wl("w2", "team-a", "", false, "main:1:0:4:8Gi")); err != nil {
		t.Fatalf("CPU workload on a CPU cluster: %v", err)
	}
}

func familyOf(p render.Placement) string {
	for _, f := range catalog {
		if f.GPU() && p.GPUNodeSelector[f.ProductLabel] == f.ProductValue {
			return f.Name
		}
	}
	return ""
}

func TestRetargetDeterministicAndOrderFree(t *testing.T) {
	s := loadExample(t, "mixed")
	ws := make([]*trace.Workload, 200)
	for i := range ws {
		ws[i] = wl(fmt.Sprintf("wl-%05d", i), "team-a", "", false, "main:1:1:4:16Gi")
	}
	place := func(seed uint64, reverse bool) map[string]string {
		pl := s.Placer(seed, true)
		out := map[string]string{}
		for i := range ws {
			w := ws[i]
			if reverse {
				w = ws[len(ws)-1-i]
			}
			p, err := pl.Place(w)
			if err != nil {
				t.Fatal(err)
			}
			out[w.WorkloadID] = familyOf(p)
		}
		return out
	}
	a, b, c := place(7, false), place(7, true), place(8, false)
	diff := 0
	for id, f := range a {
		if b[id] != f {
			t.Fatalf("%s: %s forward, %s reversed", id, f, b[id])
		}
		if c[id] != f {
			diff++
		}
	}
	if diff == 0 {
		t.Error("seeds 7 and 8 chose identical families for 200 workloads")
	}
}

func TestRetargetCapacityShares(t *testing.T) {
	s := loadExample(t, "mixed")
	pl := s.Placer(42, true)
	const n = 10000
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		p, err := pl.Place(wl(fmt.Sprintf("w%d", i), "team-a", "", false, "main:1:1:4:16Gi"))
		if err != nil {
			t.Fatal(err)
		}
		fam := familyOf(p)
		counts[fam]++
		if want := catalog[fam].Resource; p.GPUResource != want {
			t.Fatalf("%s on %s: GPUResource %s, want %s", p.Namespace, fam, p.GPUResource, want)
		}
	}
	// mixed.yaml: H100 8x8, A100 8x8, L40S 8x4, MI300X 4x8 = 64/64/32/32 of 192 GPUs.
	want := map[string]float64{"H100-SXM": 64.0 / 192, "A100-SXM": 64.0 / 192, "L40S": 32.0 / 192, "MI300X": 32.0 / 192}
	for fam, share := range want {
		got := float64(counts[fam]) / n
		t.Logf("%-8s share %.4f (capacity %.4f)", fam, got, share)
		if math.Abs(got-share) > 0.02 {
			t.Errorf("%s: share %.4f, capacity share %.4f", fam, got, share)
		}
	}
}

func TestRetargetKeepsShapeFeasible(t *testing.T) {
	s := loadExample(t, "mixed")
	pl := s.Placer(3, true)
	for i := 0; i < 500; i++ {
		// 8 GPUs per pod: L40S nodes have 4, so L40S must never be chosen.
		p, err := pl.Place(wl(fmt.Sprintf("big-%d", i), "team-a", "", true, "worker:2:8:32:256Gi"))
		if err != nil {
			t.Fatal(err)
		}
		if fam := familyOf(p); fam == "L40S" || fam == "" {
			t.Fatalf("8-GPU pods retargeted to %q", fam)
		}
	}
	_, err := pl.Place(wl("huge", "team-a", "", false, "worker:1:16:32:256Gi"))
	if err == nil || !strings.Contains(err.Error(), "retarget: no GPU family fits: workload huge: pod role worker needs 16") {
		t.Fatalf("err = %v", err)
	}
	var amd corev1.ResourceName = "amd.com/gpu"
	found := false
	for i := 0; i < 100 && !found; i++ {
		p, err := pl.Place(wl(fmt.Sprintf("m-%d", i), "team-c", "", false, "main:1:1:4:16Gi"))
		if err != nil {
			t.Fatal(err)
		}
		found = p.GPUResource == amd && p.GPUNodeSelector["amd.com/gpu.product-name"] == "AMD_Instinct_MI300X_OAM"
		if found && (len(p.Tolerations) != 1 || p.Tolerations[0].Key != "amd.com/gpu") {
			t.Errorf("MI300X placement tolerations = %v, want the pool's amd.com/gpu taint", p.Tolerations)
		}
	}
	if !found {
		t.Error("no workload retargeted to MI300X with amd.com/gpu in 100 tries")
	}
}
