package render

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/model/trace"
)

// Placement is what the cluster side decides for one workload before its objects are built:
// where it is queued, at which priority, and which nodes its GPU pods may land on.
type Placement struct {
	// Namespace the workload's objects are created in (the team's namespace).
	Namespace string
	// Queue is the LocalQueue name for the kueue.x-k8s.io/queue-name label.
	Queue string
	// PriorityClass is the WorkloadPriorityClass name for kueue.x-k8s.io/priority-class ("" for none).
	PriorityClass string
	// GPUNodeSelector pins GPU pods to a GPU family when the spec fixes one (nil otherwise).
	// With several GPU families and no --retarget it is nil: Kueue's flavor assignment then
	// injects the admitting ResourceFlavor's nodeLabels (and tolerations) into the pods.
	GPUNodeSelector map[string]string
	// GPUResource is the extended resource GPU pods request instead of the trace's
	// nvidia.com/gpu (amd.com/gpu on an MI300X family); "" means keep the trace's name.
	GPUResource corev1.ResourceName
	// MIGProfile, when set, runs the workload's whole-GPU pods on MIG slices of this profile
	// instead, one slice per GPU they ask for (the cluster spec's migFor).
	MIGProfile string
	// Tolerations every pod of the workload gets (e.g. KWOK's and the pool's taints).
	Tolerations []corev1.Toleration
	// TopologyLevel is the node label of the topology level a gang should be packed in
	// (kueue.x-k8s.io/podset-preferred-topology); "" when the cluster declares no Topology.
	TopologyLevel string
	// NodeLabelKeys are the label keys the cluster's nodes carry (shared, read-only). A trace's
	// node-affinity hint is rendered only on these keys; hints on others are dropped with a
	// warning, because no node could satisfy them. Nil drops every hint.
	NodeLabelKeys map[string]bool
}

// Placer decides the Placement of a workload from a cluster spec.
type Placer interface {
	Place(w *trace.Workload) (Placement, error)
}
