package cluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
)

// tsSpec has a whole-GPU pool and a pool of one H100 node with 2 GPUs time-sliced 4 ways.
const tsSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- name: h100
  gpuFamily: H100-SXM
  count: 1
  gpusPerNode: 8
  cpu: 192
  memory: 2000Gi
- name: shared
  gpuFamily: H100-SXM
  count: 1
  gpusPerNode: 2
  cpu: 64
  memory: 512Gi
  timeSlicing: {replicas: 4}
clusterQueues:
- name: cq
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
  - flavor: h100-sxm-shared
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}
teams:
- name: team-a
  clusterQueue: cq
`

// The node a time-sliced pool renders is what NVIDIA's device plugin and GPU Feature Discovery
// make of it: GPUs × replicas advertised, the product marked -SHARED, the replica and strategy
// labels; its flavor selects it and the whole-GPU flavor does not.
func TestTimeSlicedObjects(t *testing.T) {
	s, err := Parse("ts.yaml", []byte(tsSpec))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := s.Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]*corev1.Node{}
	flavors := map[string]map[string]string{}
	for _, o := range objs {
		switch x := o.(type) {
		case *corev1.Node:
			nodes[x.Labels[contract.Pool]] = x
		case *kueue.ResourceFlavor:
			flavors[x.Name] = x.Spec.NodeLabels
		}
	}
	n := nodes["shared"]
	if n == nil {
		t.Fatal("no node of pool shared")
	}
	if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("allocatable nvidia.com/gpu %s, want 8 (2 GPUs × 4 replicas)", q.String())
	}
	for k, v := range map[string]string{
		"nvidia.com/gpu.product":          "NVIDIA-H100-80GB-HBM3-SHARED",
		"nvidia.com/gpu.replicas":         "4",
		"nvidia.com/gpu.sharing-strategy": "time-slicing",
		"nvidia.com/gpu.count":            "2",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if r, err := contract.GPUReplicas(n.Labels); err != nil || r != 4 {
		t.Errorf("contract.GPUReplicas = %d, %v; want 4", r, err)
	}
	if r, err := contract.GPUReplicas(nodes["h100"].Labels); err != nil || r != 1 {
		t.Errorf("whole-GPU node: contract.GPUReplicas = %d, %v; want 1", r, err)
	}
	matches := func(sel, labels map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for flavor, want := range map[string]map[string]bool{
		"h100-sxm":        {"h100": true, "shared": false},
		"h100-sxm-shared": {"h100": false, "shared": true},
	} {
		sel, ok := flavors[flavor]
		if !ok {
			t.Fatalf("no flavor %s (have %v)", flavor, flavors)
		}
		for pool, m := range want {
			if got := matches(sel, nodes[pool].Labels); got != m {
				t.Errorf("flavor %s selects pool %s: %v, want %v", flavor, pool, got, m)
			}
		}
	}
	if got := NodeFlavor(n.Labels); got != "h100-sxm-shared" {
		t.Errorf("NodeFlavor = %s, want h100-sxm-shared", got)
	}

	// A share of a GPU goes to a replica, pinned to the time-sliced flavor's nodes.
	w := &trace.Workload{WorkloadID: "w", Namespace: "team-a", WorkloadType: trace.DebugEval, IntentClass: trace.IntentStandard,
		Pods: []trace.PodGroup{{Role: "main", Replicas: 1, Requests: trace.Requests{"cpu": "4", trace.ResourceGPUFraction: "0.5"}}}}
	p, err := s.Placer(1, false).Place(w)
	if err != nil {
		t.Fatal(err)
	}
	if !matches(p.GPUNodeSelector, n.Labels) || matches(p.GPUNodeSelector, nodes["h100"].Labels) {
		t.Errorf("a share's node selector %v, want the time-sliced nodes' only", p.GPUNodeSelector)
	}
}

func TestTimeSlicingSpecErrors(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     string
	}{
		{"one replica", "timeSlicing: {replicas: 4}", "timeSlicing: {replicas: 1}", "ts.yaml:16: nodePools[1].timeSlicing.replicas: must be between 2 and 64"},
		{"an AMD family", "  gpuFamily: H100-SXM\n  count: 1\n  gpusPerNode: 2", "  gpuFamily: MI300X\n  count: 1\n  gpusPerNode: 2", "nodePools[1].timeSlicing: time-slicing is NVIDIA's device plugin's"},
		{"with MIG", "timeSlicing: {replicas: 4}", "timeSlicing: {replicas: 4}\n  mig: {}", "nodePools[1].timeSlicing: a pool's GPUs are either MIG-partitioned or time-sliced"},
		{"unknown field", "timeSlicing: {replicas: 4}", "timeSlicing: {replicas: 4, renameByDefault: true}", "nodePools[1].timeSlicing.renameByDefault: unknown field"},
		{"pools of one flavor sliced differently", "clusterQueues:", "- {name: shared2, gpuFamily: H100-SXM, count: 1, gpusPerNode: 2, cpu: 64, memory: 512Gi, timeSlicing: {replicas: 2}}\nclusterQueues:",
			"nodePools[2].timeSlicing.replicas: pools of flavor h100-sxm-shared time-slice their GPUs alike: shared has 4 replicas, this pool 2"},
		{"label kueuelab sets", "  timeSlicing: {replicas: 4}", "  timeSlicing: {replicas: 4}\n  labels: {nvidia.com/gpu.replicas: \"2\"}", `nodePools[1].labels["nvidia.com/gpu.replicas"]: label is set by kueuelab`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(tsSpec, tc.old) {
				t.Fatalf("spec has no %q", tc.old)
			}
			_, err := Parse("ts.yaml", []byte(strings.Replace(tsSpec, tc.old, tc.new, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
