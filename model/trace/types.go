// Package trace holds kueuelab's trace format (schema v2, JSON Lines): the record types, a strict
// streaming reader and a fast deterministic writer. A trace has two record types: a logical
// workload (type=workload) and one record per pod of it (type=job).
package trace

import "encoding/json"

// SchemaVersion is the only trace schema version this package reads and writes.
const SchemaVersion = "v2"

// Record type discriminators (the "type" field of every line).
const (
	TypeWorkload = "workload"
	TypeJob      = "job"
)

// Family is a workload family (the trace's workloadType).
type Family string

// The workload families the generator produces and render understands.
const (
	DistributedTraining     Family = "distributed_training"
	ParameterServerTraining Family = "parameter_server_training"
	HPOExperiment           Family = "hpo_experiment"
	SingleGPUTraining       Family = "single_gpu_training"
	DebugEval               Family = "debug_eval"
	CPUPreprocess           Family = "cpu_preprocess"
	CPUAnalytics            Family = "cpu_analytics"
)

// Families lists every family in a stable order (GPU families first).
var Families = []Family{DebugEval, SingleGPUTraining, DistributedTraining, ParameterServerTraining, HPOExperiment, CPUPreprocess, CPUAnalytics}

// Known reports whether f is one of Families.
func (f Family) Known() bool {
	for _, k := range Families {
		if k == f {
			return true
		}
	}
	return false
}

// GPU reports whether the family runs on GPUs.
func (f Family) GPU() bool { return f != CPUPreprocess && f != CPUAnalytics }

// Pod roles. A single-pod family uses RoleMain.
const (
	RoleLauncher   = "launcher"
	RoleWorker     = "worker"
	RolePS         = "ps"
	RoleController = "controller"
	RoleTrial      = "trial"
	RoleMain       = "main"
)

// Intent classes (the seed generator's intentClass): they map to Kueue WorkloadPriorityClasses.
const (
	IntentPerformance = "performance"
	IntentStandard    = "standard"
	IntentEco         = "eco"
)

// Resource names used in requests.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
	// ResourceGPU is NVIDIA's device-plugin resource, the GPU resource most traces ask for.
	ResourceGPU = "nvidia.com/gpu"
	// ResourceAMDGPU is AMD's device-plugin resource (Joulie's workloadgen --amd-gpu-ratio writes it).
	ResourceAMDGPU = "amd.com/gpu"
)

// GPUResources are the request names counted as GPUs: whole devices of one vendor each.
var GPUResources = []string{ResourceGPU, ResourceAMDGPU}

// IsGPUResource reports whether name is one of GPUResources.
func IsGPUResource(name string) bool { return name == ResourceGPU || name == ResourceAMDGPU }

// Requests maps a resource name to a Kubernetes quantity string ("4", "12Gi", "500m").
// Quantities stay strings so the trace round-trips as written; ParseQuantity validates them.
type Requests map[string]string

// Class is the workloadClass of a record: coarse labels derived from the profile. Both labels are
// optional (Joulie's workloadgen leaves gpu out for CPU-only workloads).
type Class struct {
	CPU string `json:"cpu"`
	GPU string `json:"gpu"`
}

// Profile holds the five intensities in [0, 1] that describe how a workload uses a node. Each is
// optional in a trace and then 0 (Joulie's workloadgen omits zero intensities, such as
// gpuUtilization for a CPU-only workload); the object itself is required.
type Profile struct {
	CPUUtilization      float64 `json:"cpuUtilization"`
	GPUUtilization      float64 `json:"gpuUtilization"`
	MemoryIntensity     float64 `json:"memoryIntensity"`
	IOIntensity         float64 `json:"ioIntensity"`
	CPUFeedIntensityGPU float64 `json:"cpuFeedIntensityGpu"`
}

// PodGroup is replicas identical pods of one role of a logical workload. A role may have several
// groups that differ in their requests: Joulie's workloadgen writes one group per HPO trial (role
// trial, replicas 1, each with its own requests) and may repeat the worker role.
type PodGroup struct {
	Role     string   `json:"role"`
	Replicas int      `json:"replicas"`
	Requests Requests `json:"requests"`
	Gang     bool     `json:"gang,omitempty"`
}

// Workload is a type=workload record: one logical workload (a training run, an HPO experiment, ...).
type Workload struct {
	SchemaVersion          string     `json:"schemaVersion"`
	WorkloadID             string     `json:"workloadId"`
	SubmitTimeOffsetSec    float64    `json:"submitTimeOffsetSec"`
	Namespace              string     `json:"namespace"`
	WorkloadType           Family     `json:"workloadType"`
	Gang                   bool       `json:"gang,omitempty"`
	DurationSec            float64    `json:"durationSec"`
	WorkloadClass          Class      `json:"workloadClass"`
	SharedIntensityProfile Profile    `json:"sharedIntensityProfile"`
	Pods                   []PodGroup `json:"pods"`
	// IntentClass is performance, standard or eco (optional; empty means standard).
	IntentClass string `json:"intentClass,omitempty"`
	// Tags are free-form labels a writer may add; kept as written.
	Tags json.RawMessage `json:"tags,omitempty"`
	// CheckpointIntervalSec, when > 0, lets a preempted pod resume from its last checkpoint.
	CheckpointIntervalSec float64 `json:"checkpointIntervalSec,omitempty"`
	// CheckpointCostSec is the pause each checkpoint costs (the workload makes no progress).
	CheckpointCostSec float64 `json:"checkpointCostSec,omitempty"`
	// RestartOverheadSec is how long a restart after a failure or preemption takes before work
	// resumes from the last checkpoint (process start, rendezvous, checkpoint load).
	RestartOverheadSec float64 `json:"restartOverheadSec,omitempty"`
	// MaxRestarts is how often the workload's owner restarts it after a pod failure (the kind's
	// own policy: Job backoffLimit, JobSet failurePolicy.maxRestarts, PyTorchJob and MPIJob
	// runPolicy.backoffLimit); 0: a pod failure fails the workload.
	MaxRestarts int `json:"maxRestarts,omitempty"`
}

// PodTemplate is the pod shape of a job record.
type PodTemplate struct {
	Requests Requests `json:"requests"`
	// Affinity is a Kubernetes affinity object, kept verbatim.
	Affinity json.RawMessage `json:"affinity,omitempty"`
}

// Work is the amount of work a pod must do, in abstract units (see package work).
type Work struct {
	CPUUnits float64 `json:"cpuUnits"`
	GPUUnits float64 `json:"gpuUnits"`
}

// Sensitivity says how strongly a pod's progress follows CPU and GPU speed, each in [0, 1].
type Sensitivity struct {
	CPU float64 `json:"cpu"`
	GPU float64 `json:"gpu"`
}

// Job is a type=job record: one pod of a logical workload.
type Job struct {
	SchemaVersion       string          `json:"schemaVersion"`
	JobID               string          `json:"jobId"`
	WorkloadID          string          `json:"workloadId"`
	WorkloadType        Family          `json:"workloadType"`
	PodRole             string          `json:"podRole"`
	Gang                bool            `json:"gang,omitempty"`
	SubmitTimeOffsetSec float64         `json:"submitTimeOffsetSec"`
	Namespace           string          `json:"namespace"`
	PodTemplate         PodTemplate     `json:"podTemplate"`
	Work                Work            `json:"work"`
	Sensitivity         Sensitivity     `json:"sensitivity"`
	WorkloadClass       Class           `json:"workloadClass"`
	WorkloadProfile     Profile         `json:"workloadProfile"`
	IntentClass         string          `json:"intentClass,omitempty"`
	Tags                json.RawMessage `json:"tags,omitempty"`
}

// GPUs returns the GPUs requested by one pod of the group (0 when none or unparsable).
func (p PodGroup) GPUs() int64 { return p.Requests.GPUs() }

// GPUResource returns the GPU resource the workload's pods request (nvidia.com/gpu or amd.com/gpu),
// "" when none does. A workload mixing vendors is refused by Validate.
func (w *Workload) GPUResource() string {
	for _, p := range w.Pods {
		if r := p.Requests.GPUResource(); r != "" {
			return r
		}
	}
	return ""
}

// TotalGPUs returns the GPUs the whole workload requests.
func (w *Workload) TotalGPUs() int64 {
	var n int64
	for _, p := range w.Pods {
		n += int64(p.Replicas) * p.GPUs()
	}
	return n
}

// PodCount returns the number of pods of the workload.
func (w *Workload) PodCount() int {
	n := 0
	for _, p := range w.Pods {
		n += p.Replicas
	}
	return n
}

// Intent returns the workload's intent class, standard when unset.
func (w *Workload) Intent() string {
	if w.IntentClass == "" {
		return IntentStandard
	}
	return w.IntentClass
}
