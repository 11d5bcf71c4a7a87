package cluster

import (
	"sort"
	"strings"

	"github.com/kueuelab/kueuelab/render/contract"

	corev1 "k8s.io/api/core/v1"
)

// family describes one GPU family of the catalog: how its nodes are labelled by the vendor's
// feature discovery and which extended resource its device plugin advertises.
type family struct {
	// Name is the catalog name written in a cluster spec (gpuFamily).
	Name string
	// ProductLabel and ProductValue are the node label a real cluster carries for this GPU
	// (NVIDIA GPU Feature Discovery's nvidia.com/gpu.product, AMD's node labeller's
	// amd.com/gpu.product-name); empty for CPU.
	ProductLabel, ProductValue string
	// Resource is the device plugin's extended resource; empty for CPU.
	Resource corev1.ResourceName
}

// CPUFamily is the catalog name of GPU-less node pools.
const CPUFamily = "CPU"

const (
	nvidiaProduct = "nvidia.com/gpu.product"
	nvidiaGPU     = corev1.ResourceName("nvidia.com/gpu")
	amdProduct    = "amd.com/gpu.product-name"
	amdGPU        = corev1.ResourceName("amd.com/gpu")
)

// catalog lists the GPU families a node pool may declare; product label values are the ones
// the vendors' discovery daemons publish for these boards.
var catalog = map[string]family{
	"H100-SXM":  {Name: "H100-SXM", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-H100-80GB-HBM3", Resource: nvidiaGPU},
	"H100-NVL":  {Name: "H100-NVL", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-H100-NVL", Resource: nvidiaGPU},
	"H200-SXM":  {Name: "H200-SXM", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-H200", Resource: nvidiaGPU},
	"A100-SXM":  {Name: "A100-SXM", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-A100-SXM4-80GB", Resource: nvidiaGPU},
	"A100-PCIE": {Name: "A100-PCIE", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-A100-80GB-PCIe", Resource: nvidiaGPU},
	"L40S":      {Name: "L40S", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-L40S", Resource: nvidiaGPU},
	"L4":        {Name: "L4", ProductLabel: nvidiaProduct, ProductValue: "NVIDIA-L4", Resource: nvidiaGPU},
	"MI300X":    {Name: "MI300X", ProductLabel: amdProduct, ProductValue: "AMD_Instinct_MI300X_OAM", Resource: amdGPU},
	CPUFamily:   {Name: CPUFamily},
}

// CPUFlavor is the ResourceFlavor derived for CPU pools.
var CPUFlavor = catalog[CPUFamily].FlavorName()

// GPU reports whether the family has GPUs.
func (f family) GPU() bool { return f.Resource != "" }

// FlavorName is the ResourceFlavor derived for the family: its lowercased name.
func (f family) FlavorName() string { return FlavorOf(f.Name) }

// FlavorOf is the ResourceFlavor derived for a catalog family name (a node's
// kueuelab.io/gpu-family label): the lowercased name.
func FlavorOf(family string) string {
	b := []byte(family)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// TimeSlicedFlavorOf is the ResourceFlavor derived for a family's pools whose GPUs are
// time-sliced.
func TimeSlicedFlavorOf(family string) string { return flavorFor(family, contract.SharingTimeSlicing) }

// NodeFlavor is the ResourceFlavor of a node render wrote, from its labels: its family's
// (kueuelab.io/gpu-family), the MIG or time-sliced one where its GPUs are shared that way
// (kueuelab.io/gpu-sharing).
func NodeFlavor(labels map[string]string) string {
	return flavorFor(labels[contract.GPUFamily], labels[contract.GPUSharing])
}

// flavorFor is the ResourceFlavor of a family's nodes whose GPUs are shared as sharing says (the
// contract.GPUSharing label's value; "" for whole devices).
func flavorFor(family, sharing string) string {
	switch sharing {
	case gpuSharingMIG:
		return FlavorOf(family) + migFlavorSuffix
	case contract.SharingTimeSlicing:
		return FlavorOf(family) + timeSlicedFlavorSuffix
	}
	return FlavorOf(family)
}

// NodeLabels selects the family's nodes: the vendor product label for GPUs, kueuelab's family
// label for CPU nodes (which carry no vendor label).
func (f family) NodeLabels() map[string]string {
	if f.GPU() {
		return map[string]string{f.ProductLabel: f.ProductValue}
	}
	return map[string]string{contract.GPUFamily: f.Name}
}

// familyNames lists the catalog in sorted order for error messages.
func familyNames() []string {
	names := make([]string, 0, len(catalog))
	for n := range catalog {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// gpuResource reports whether name is a GPU resource of the catalog.
func gpuResource(name corev1.ResourceName) bool { return name == nvidiaGPU || name == amdGPU }

// FamilyOfNode is the catalog family of a node with these labels: the one whose vendor product
// label the node carries, else the one its kueuelab.io/gpu-family label names; ok is false when
// neither says (a node that is not kueuelab's and has no known GPU).
func FamilyOfNode(labels map[string]string) (name string, ok bool) {
	for _, n := range familyNames() {
		// GPU Feature Discovery marks the product of time-sliced GPUs -SHARED.
		if f := catalog[n]; f.GPU() && strings.TrimSuffix(labels[f.ProductLabel], contract.SharedProductSuffix) == f.ProductValue {
			return n, true
		}
	}
	if f, ok := catalog[labels[contract.GPUFamily]]; ok {
		return f.Name, true
	}
	return "", false
}

// FamilyResource is the GPU resource of a catalog family ("" for CPU or an unknown family).
func FamilyResource(name string) string { return string(catalog[name].Resource) }
