package contract

// Keys written or read between render, the agent, the runner and the local cluster besides the
// pod-template annotations of contract.go. Every kueuelab.io/ key lives in this package, and so
// does every other project's key render writes (Kueue's labels, below).

import (
	"fmt"
	"strconv"
)

// Pod annotations the agent writes (and the runner and the KWOK completion stages read).
const (
	// Complete carries the agent's verdict to the KWOK completion stages: "true" or "fail".
	Complete = Prefix + "complete"
	// Progress holds the agent's progress of a pod as JSON, rewritten every checkpoint interval.
	Progress = Prefix + "progress"
	// EnergyJoules is the pod's energy in joules of trace time, written at completion.
	EnergyJoules = Prefix + "energy-joules"
	// BusyGPUSeconds is the compute a pod on time-sliced GPUs used, in GPU-seconds of trace time
	// (0 elsewhere), written at completion.
	BusyGPUSeconds = Prefix + "busy-gpu-seconds"
	// RunTraceSec is how long the pod ran, in trace seconds, written at completion.
	RunTraceSec = Prefix + "run-trace-sec"
	// FinishedTraceSec is the trace time at which the pod's work ended, written at completion.
	FinishedTraceSec = Prefix + "finished-trace-sec"
	// StartedTraceSec is the trace time at which the agent started the pod's current run.
	StartedTraceSec = Prefix + "started-trace-sec"
	// FinishedAt is the wall-clock time (RFC 3339, ns) of the completion write.
	FinishedAt = Prefix + "finished-at"
	// InjectFailure makes a pod fail: "true" when its work is done, or a fraction in (0, 1) to
	// fail once that share of the work is done.
	InjectFailure = Prefix + "inject-failure"
)

// Node keys.
const (
	// PowerCap is the node label or annotation (annotation wins) holding a GPU power cap: a
	// catalog profile ("eco", "performance"), a percentage of max ("70%") or watts ("450W").
	PowerCap = Prefix + "power-cap"
	// GPUFamily is the node label naming the node's catalog GPU family; without it the vendor
	// product label is mapped.
	GPUFamily = Prefix + "gpu-family"
	// CPUModel is the node annotation naming the node's catalog CPU model.
	CPUModel = Prefix + "cpu-model"
	// Pool is the node label naming the cluster spec's node pool.
	Pool = Prefix + "pool"
	// GPUSharing is the node label saying how the node's GPUs are shared ("mig": partitioned into
	// MIG slices, allocated through DRA); absent on nodes whose GPUs are whole devices.
	GPUSharing = Prefix + "gpu-sharing"
	// GFDReplicas, GFDSharingStrategy and GFDCount are the labels NVIDIA's GPU Feature Discovery
	// puts on a node whose GPUs the device plugin shares (sharing.timeSlicing): the devices
	// advertised per GPU, the strategy (SharingTimeSlicing) and the physical GPUs. The node's
	// allocatable then counts replicas.
	GFDReplicas        = "nvidia.com/gpu.replicas"
	GFDSharingStrategy = "nvidia.com/gpu.sharing-strategy"
	GFDCount           = "nvidia.com/gpu.count"
	SharingTimeSlicing = "time-slicing"
	// SharedProductSuffix is what GPU Feature Discovery appends to nvidia.com/gpu.product on such a
	// node.
	SharedProductSuffix = "-SHARED"
	// PartitionedGPUs is the node annotation giving the number of physical GPUs of a node whose
	// GPUs are allocated as MIG slices through DRA (its allocatable then has no whole GPUs).
	PartitionedGPUs = Prefix + "partitioned-gpus"
	// Team is the namespace label naming the cluster spec's team.
	Team = Prefix + "team"
	// Fault is the node label (value FaultNodeDown) with which the runner's fault injector takes a
	// node down: kueuelab's KWOK stage then reports it NotReady. The same key is the NoSchedule
	// taint that keeps pods off the node meanwhile.
	Fault         = Prefix + "fault"
	FaultNodeDown = "node-down"
)

// Trial is the label the runner puts on each trial Job it creates for an HPO experiment: the
// trial's index.
const Trial = Prefix + "trial"

// Resync is the annotation the runner sets on a job whose pods outlived its Workload's quota
// reservation: the update makes the job's operator look at its pods again (the value counts the
// requests). An operator that acts on its informer cache can miss pods it created an instant
// before the job was suspended, and one that backs off on every event (mpi-operator) may not look
// again for up to 1,000 s.
const Resync = Prefix + "resync"

// AppliedHash is the annotation in which the local cluster's apply remembers what it applied.
const AppliedHash = Prefix + "applied-hash"

// Kueue's labels, which render writes on the object Kueue queues. They are Kueue's
// (sigs.k8s.io/kueue/pkg/controller/constants), copied here so that render does not import Kueue's
// code; keys_test.go checks them against Kueue's constants, so a Kueue that renames them fails a
// test.
const (
	// KueueQueueLabel names the LocalQueue the object is submitted to (constants.QueueLabel).
	KueueQueueLabel = "kueue.x-k8s.io/queue-name"
	// KueuePriorityClassLabel names the object's WorkloadPriorityClass
	// (constants.WorkloadPriorityClassLabel).
	KueuePriorityClassLabel = "kueue.x-k8s.io/priority-class"
)

// GPUReplicas is how many devices a node advertises per GPU, read from GPU Feature Discovery's
// labels: the nvidia.com/gpu.replicas of a node whose sharing strategy is time-slicing, 1 for any
// other node. A time-sliced node whose replica label is not a positive count is an error.
func GPUReplicas(labels map[string]string) (int, error) {
	if labels[GFDSharingStrategy] != SharingTimeSlicing {
		return 1, nil
	}
	r, err := strconv.Atoi(labels[GFDReplicas])
	if err != nil || r < 1 {
		return 0, fmt.Errorf("label %s: %q is not a replica count", GFDReplicas, labels[GFDReplicas])
	}
	return r, nil
}
