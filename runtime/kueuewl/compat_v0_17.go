//go:build kueue_v0_17 || kueue_v0_15

package kueuewl

import kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

// hasConcurrentAdmission is false: concurrent admission came in v0.18.
func hasConcurrentAdmission(*kueue.ClusterQueue) bool { return false }
