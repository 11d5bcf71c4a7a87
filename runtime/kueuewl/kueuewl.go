// Package kueuewl is where runtime code that needs a few facts of Kueue's objects gets them,
// so that Kueue's API types and versions are known here rather than in every package. It reads
// what kueuelab records from a Kueue Workload: both engines (the cluster engine's watcher and the
// sim's lifecycle) record admissions through it, so the same Workload is the same result in
// either. It does the GPU accounting of Workloads and pods, summarises a cluster's Workloads for a
// history import (in v1beta2, or v1beta1 from a Kueue that predates v1beta2) and a live one for a
// snapshot (its admission and queue order), reads a cluster's queue objects in a cluster spec's
// terms (ReadQueues), says whether a
// ClusterQueue is Active and which flavors ClusterQueues use, names the Kueue kinds and API
// versions a client talks to, and reads Kueue's Configuration as the Kueue it belongs to runs it.
package kueuewl

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// IsGPU reports whether a resource name is a GPU (nvidia.com/gpu, amd.com/gpu, ...).
func IsGPU(resource string) bool { return strings.HasSuffix(resource, "/gpu") }

// Flavors maps each pod set of an admitted Workload to the flavor of its GPU resource, else of
// its cpu, else of its first resource by name; nil when the Workload has no admission.
func Flavors(wl *kueue.Workload) map[string]string {
	if wl.Status.Admission == nil {
		return nil
	}
	out := map[string]string{}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		pick := ""
		names := make([]string, 0, len(psa.Flavors))
		for r := range psa.Flavors {
			names = append(names, string(r))
		}
		sort.Strings(names)
		for _, r := range names {
			f := string(psa.Flavors[corev1.ResourceName(r)])
			switch {
			case IsGPU(r):
				pick = f
			case r == string(corev1.ResourceCPU) && pick == "":
				pick = f
			}
		}
		if pick == "" && len(names) > 0 {
			pick = string(psa.Flavors[corev1.ResourceName(names[0])])
		}
		out[string(psa.Name)] = pick
	}
	return out
}
