package kueuewl

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// GPUs sums the GPU resources (nvidia.com/gpu, amd.com/gpu, ...) of a resource list.
func GPUs(rl corev1.ResourceList) int64 {
	var n int64
	for name, q := range rl {
		if IsGPU(string(name)) {
			n += q.Value()
		}
	}
	return n
}

// PodGPUs is the GPUs a pod's containers request.
func PodGPUs(spec *corev1.PodSpec) int64 {
	var n int64
	for i := range spec.Containers {
		n += GPUs(spec.Containers[i].Resources.Requests)
	}
	return n
}

// GPUUsage is the GPU accounting of an unfinished Workload: what it asks for, where, and what its
// admission reserves while it holds quota.
type GPUUsage struct {
	Namespace string
	// LocalQueue is the queue the Workload was submitted to; ClusterQueue is its admission's, ""
	// before it has one.
	LocalQueue, ClusterQueue string
	// Requested is the GPUs of all its pod sets.
	Requested int64
	// HoldsQuota: Kueue reserved quota for it (QuotaReserved, with an admission).
	HoldsQuota bool
	// Reserved maps each flavor to the GPUs the admission reserves on it (while HoldsQuota).
	Reserved map[string]int64
}

// UsageOf returns a Workload's GPU accounting; ok is false once it finished (it holds and asks
// for nothing).
func UsageOf(wl *kueue.Workload) (u GPUUsage, ok bool) {
	if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return GPUUsage{}, false
	}
	u = GPUUsage{Namespace: wl.Namespace, LocalQueue: string(wl.Spec.QueueName)}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		u.Requested += int64(ps.Count) * PodGPUs(&ps.Template.Spec)
	}
	adm := wl.Status.Admission
	if adm == nil {
		return u, true
	}
	u.ClusterQueue = string(adm.ClusterQueue)
	if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		return u, true
	}
	u.HoldsQuota, u.Reserved = true, map[string]int64{}
	for _, psa := range adm.PodSetAssignments {
		for r, f := range psa.Flavors {
			if IsGPU(string(r)) {
				use := psa.ResourceUsage[r]
				u.Reserved[string(f)] += use.Value()
			}
		}
	}
	return u, true
}

// ListUsage returns the GPU accounting of the unfinished Workloads c lists (opts as for List).
func ListUsage(ctx context.Context, c client.Reader, opts ...client.ListOption) ([]GPUUsage, error) {
	var wls kueue.WorkloadList
	if err := c.List(ctx, &wls, opts...); err != nil {
		return nil, fmt.Errorf("list Kueue Workloads: %w", err)
	}
	out := make([]GPUUsage, 0, len(wls.Items))
	for i := range wls.Items {
		if u, ok := UsageOf(&wls.Items[i]); ok {
			out = append(out, u)
		}
	}
	return out, nil
}
