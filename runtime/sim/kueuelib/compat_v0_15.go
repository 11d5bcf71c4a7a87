//go:build kueue_v0_15

package kueuelib

import (
	"context"
	_ "unsafe" // go:linkname

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/workload"
)

// KueueVersion is the Kueue module version this build links (build tag kueue_v0_15).
const KueueVersion = "v0.15.0"

// moveToInadmissible takes a Workload off the heap and into the inadmissible workloads: the
// queue's unexported delete (linknamed; v0.15's takes the Workload) and an insert into its
// unexported inadmissibleWorkloads map (insertInadmissible).
func moveToInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info) error {
	cqDelete(c, logr.Discard(), wInfo.Obj)
	return insertInadmissible(c, key, wInfo)
}

//go:linkname cqDelete sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).delete
func cqDelete(c *qcache.ClusterQueue, log logr.Logger, w *kueue.Workload)

// syncTASNode does nothing in v0.15: its TAS lists the nodes from the API at each snapshot.
func syncTASNode(*schdcache.Cache, *corev1.Node) {}

// setConditionAndUpdate is v0.15's workload.UpdateStatus.
func setConditionAndUpdate(ctx context.Context, c client.Client, wl *kueue.Workload, condType string, status metav1.ConditionStatus, reason, msg, manager string, clk clock.Clock) error {
	return workload.UpdateStatus(ctx, c, wl, condType, status, reason, msg, manager, clk)
}

// noLocalQueueMetrics: v0.15 reports them only under the LocalQueueMetrics gate, off by default.
func noLocalQueueMetrics() ([]qcache.Option, []schdcache.Option, []core.LocalQueueReconcilerOption) {
	return nil, nil, nil
}
