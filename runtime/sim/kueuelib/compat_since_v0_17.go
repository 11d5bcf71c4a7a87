//go:build !kueue_v0_15

package kueuelib

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/workload"
)

// The calls v0.17 on share and v0.15 has otherwise (compat_v0_15.go).

// syncTASNode feeds node to the TAS node cache, as Kueue's TAS node controller does from Node
// events.
func syncTASNode(cc *schdcache.Cache, node *corev1.Node) { cc.TASCache().SyncNode(node) }

// setConditionAndUpdate is workload.SetConditionAndUpdate.
func setConditionAndUpdate(ctx context.Context, c client.Client, wl *kueue.Workload, condType string, status metav1.ConditionStatus, reason, msg, manager string, clk clock.Clock) error {
	return workload.SetConditionAndUpdate(ctx, c, wl, condType, status, reason, msg, manager, clk)
}

// noLocalQueueMetrics turns Kueue's per-LocalQueue metrics off: nothing in a replay reads them,
// and with them on every requeue counts its LocalQueue's pending workloads by walking its
// ClusterQueue's (8 % of a forecast's time on a queue 1,000 deep).
func noLocalQueueMetrics() ([]qcache.Option, []schdcache.Option, []core.LocalQueueReconcilerOption) {
	off := &metrics.LocalQueueMetricsConfig{Enabled: false}
	return []qcache.Option{qcache.WithLocalQueueMetrics(off)}, []schdcache.Option{schdcache.WithLocalQueueMetrics(off)},
		[]core.LocalQueueReconcilerOption{core.WithLocalQueueMetrics(off)}
}
