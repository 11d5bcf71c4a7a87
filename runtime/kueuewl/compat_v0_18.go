//go:build !kueue_v0_17 && !kueue_v0_15

package kueuewl

import kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

// The ClusterQueue fields this package reads that older Kueue releases lack: the build tag
// kueue_v0_<minor> selects a release's file (runtime/kueuever).

// hasConcurrentAdmission says whether cq sets a concurrent-admission policy (from v0.18).
func hasConcurrentAdmission(cq *kueue.ClusterQueue) bool {
	return cq.Spec.ConcurrentAdmissionPolicy != nil
}
