//go:build kueue_v0_18

package kueuelib

import (
	_ "unsafe" // go:linkname

	"github.com/go-logr/logr"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// KueueVersion is the Kueue module version this build links (build tag kueue_v0_18).
const KueueVersion = "v0.18.3"

// moveToInadmissible takes a Workload off the heap and into the inadmissible workloads as v0.18's
// queue does within itself: its unexported delete (which also takes the Workload's requests off
// the pending total) and insertInadmissible (which adds them back), both linknamed (seam 6).
func moveToInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info) error {
	cqDelete(c, logr.Discard(), key)
	cqInsertInadmissible(c, key, wInfo)
	return nil
}

//go:linkname cqDelete sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).delete
func cqDelete(c *qcache.ClusterQueue, log logr.Logger, key workload.Reference)

//go:linkname cqInsertInadmissible sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).insertInadmissible
func cqInsertInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info)
