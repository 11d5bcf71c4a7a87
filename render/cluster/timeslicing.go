package cluster

import (
	"strconv"

	"github.com/kueuelab/kueuelab/render/contract"
)

// timeSlicedFlavorSuffix marks the flavor of a family's pools whose GPUs are time-sliced.
const timeSlicedFlavorSuffix = "-shared"

// maxReplicas bounds a pool's time-slicing replicas: beyond it a GPU is a queue, not a device.
const maxReplicas = 64

// validateTimeSlicing checks a pool's time-slicing.
func (s *Spec) validateTimeSlicing(l *errList, p fieldPath, np *NodePool, fam family) {
	if np.TimeSlicing == nil {
		return
	}
	tp := p.key("timeSlicing")
	switch {
	case !fam.GPU() || fam.Resource != nvidiaGPU:
		l.add(tp, "time-slicing is NVIDIA's device plugin's (sharing.timeSlicing): %s has no NVIDIA GPUs", np.GPUFamily)
	case np.MIG != nil:
		l.add(tp, "a pool's GPUs are either MIG-partitioned or time-sliced, not both (make two pools)")
	}
	if r := np.TimeSlicing.Replicas; r < 2 || r > maxReplicas {
		l.add(tp.key("replicas"), "must be between 2 and %d (devices advertised per GPU), got %d", maxReplicas, r)
	}
}

// sharing is the value of the pool's contract.GPUSharing node label: how its GPUs are shared
// ("" for whole devices).
func (np *NodePool) sharing() string {
	switch {
	case np.MIG != nil:
		return gpuSharingMIG
	case np.TimeSlicing != nil:
		return contract.SharingTimeSlicing
	}
	return ""
}

// replicas is how many devices the pool advertises per GPU: 1 unless time-sliced.
func (np *NodePool) replicas() int {
	if np.TimeSlicing != nil && np.TimeSlicing.Replicas > 1 {
		return np.TimeSlicing.Replicas
	}
	return 1
}

// timeSlicingLabels are the labels GPU Feature Discovery writes on a node of a time-sliced pool,
// over the family's product label.
func timeSlicingLabels(np *NodePool, fam family, labels map[string]string) {
	// Whole-GPU flavors, which select the plain product, never match such a node.
	labels[fam.ProductLabel] = fam.ProductValue + contract.SharedProductSuffix
	labels[contract.GFDSharingStrategy] = contract.SharingTimeSlicing
	labels[contract.GFDReplicas] = strconv.Itoa(np.TimeSlicing.Replicas)
	labels[contract.GFDCount] = strconv.Itoa(np.GPUsPerNode)
}
