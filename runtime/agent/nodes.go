package agent

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/render/contract"

	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
)

// gpuResources are the device plugins' extended resources a node or pod may carry.
var gpuResources = []corev1.ResourceName{"nvidia.com/gpu", "amd.com/gpu"}

// productFamilies maps the vendors' discovery labels (NVIDIA GFD's nvidia.com/gpu.product, AMD's
// amd.com/gpu.product-name) to catalog families, for nodes without kueuelab.io/gpu-family; the
// values are the ones render/cluster writes.
var productFamilies = map[string]string{
	"NVIDIA-H100-80GB-HBM3":   "H100-SXM",
	"NVIDIA-H100-NVL":         "H100-NVL",
	"NVIDIA-H200":             "H200-SXM",
	"NVIDIA-A100-SXM4-80GB":   "A100-SXM",
	"NVIDIA-A100-80GB-PCIe":   "A100-PCIE",
	"NVIDIA-L40S":             "L40S",
	"NVIDIA-L4":               "L4",
	"AMD_Instinct_MI300X_OAM": "MI300X",
}

// nodeState is what the agent remembers of a simulated node.
type nodeState struct {
	id         engine.NodeID
	gpu        *hw.GPU
	capRaw     string
	lastEnergy float64
	down       bool // NotReady: its pods make no progress
}

// gpuCount is the node's allocatable GPUs (or a pod's requested GPUs) over every vendor resource.
func gpuCount(rl corev1.ResourceList) int64 {
	var n int64
	for _, r := range gpuResources {
		if q, ok := rl[r]; ok {
			n += q.Value()
		}
	}
	return n
}

// nodeSpec reads a node's simulated hardware from its labels, annotations and allocatable.
func nodeSpec(n *corev1.Node, cat *hw.Catalog) (engine.NodeSpec, error) {
	s := engine.NodeSpec{Name: n.Name, CPUModel: n.Annotations[contract.CPUModel]}
	alloc := n.Status.Allocatable
	if len(alloc) == 0 {
		alloc = n.Status.Capacity
	}
	if q, ok := alloc[corev1.ResourceCPU]; ok {
		s.CPUCores = q.AsApproximateFloat64()
	}
	s.GPUs = int(gpuCount(alloc))
	if v, ok := n.Annotations[contract.PartitionedGPUs]; ok && s.GPUs == 0 {
		g, err := strconv.Atoi(v)
		if err != nil || g < 0 {
			return s, fmt.Errorf("node %s: annotation %s: %q is not a GPU count", n.Name, contract.PartitionedGPUs, v)
		}
		s.GPUs = g
	}
	if s.GPUs == 0 {
		return s, nil
	}
	r, err := contract.GPUReplicas(n.Labels)
	switch {
	case err != nil:
		return s, fmt.Errorf("node %s: %w", n.Name, err)
	case s.GPUs%r != 0:
		return s, fmt.Errorf("node %s: %d GPUs advertised, not a multiple of its %d replicas per GPU (label %s)", n.Name, s.GPUs, r, contract.GFDReplicas)
	case r > 1:
		s.GPUs, s.GPUReplicas = s.GPUs/r, r
	}
	fam := n.Labels[contract.GPUFamily]
	if fam == "" {
		for _, key := range []string{"nvidia.com/gpu.product", "amd.com/gpu.product-name"} {
			// GFD marks the product of GPUs shared by time-slicing.
			if f, ok := productFamilies[strings.TrimSuffix(n.Labels[key], contract.SharedProductSuffix)]; ok {
				fam = f
				break
			}
		}
	}
	if _, ok := cat.GPU(fam); !ok {
		return s, fmt.Errorf("node %s: %d GPUs of unknown family (label %s=%q, product %q)", n.Name, s.GPUs,
			contract.GPUFamily, n.Labels[contract.GPUFamily], n.Labels["nvidia.com/gpu.product"]+n.Labels["amd.com/gpu.product-name"])
	}
	s.GPUFamily = fam
	return s, nil
}

// capValue is the node's raw power-cap setting: the annotation when present, else the label.
func capValue(n *corev1.Node, key string) string {
	if v, ok := n.Annotations[key]; ok {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(n.Labels[key])
}
