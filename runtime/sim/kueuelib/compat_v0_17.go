//go:build kueue_v0_17

package kueuelib

import (
	_ "unsafe" // go:linkname

	"github.com/go-logr/logr"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/workload"
)

// KueueVersion is the Kueue module version this build links (build tag kueue_v0_17).
const KueueVersion = "v0.17.1"

// moveToInadmissible takes a Workload off the heap and into the inadmissible workloads: the
// queue's unexported delete (linknamed) and an insert into its unexported inadmissibleWorkloads
// map (insertInadmissible). v0.17's queue keeps no pending total to account.
func moveToInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info) error {
	cqDelete(c, logr.Discard(), key)
	return insertInadmissible(c, key, wInfo)
}

//go:linkname cqDelete sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).delete
func cqDelete(c *qcache.ClusterQueue, log logr.Logger, key workload.Reference)
