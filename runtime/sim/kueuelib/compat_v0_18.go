//go:build kueue_v0_18

package kueuelib

import (
	"context"
	_ "unsafe" // go:linkname

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/podset"
	"sigs.k8s.io/kueue/pkg/workload"
)

// KueueVersion is the Kueue module version this build links (build tag kueue_v0_18).
const KueueVersion = "v0.18.3"

// The functions below are where Kueue versions differ in the calls this package makes; each is
// the named Kueue function of this version.

// isEvicted is workload.IsEvicted.
func isEvicted(wl *kueue.Workload) bool { return workload.IsEvicted(wl) }

// isFinished is workload.IsFinished.
func isFinished(wl *kueue.Workload) bool { return workload.IsFinished(wl) }

// patchAdmissionStatus is workload.PatchAdmissionStatus.
func patchAdmissionStatus(ctx context.Context, c client.Client, wl *kueue.Workload, clk clock.Clock, update func(*kueue.Workload) (bool, error)) error {
	return workload.PatchAdmissionStatus(ctx, c, wl, clk, update)
}

// finishWorkload is workload.Finish.
func finishWorkload(ctx context.Context, c client.Client, wl *kueue.Workload, reason, msg string, clk clock.Clock) error {
	return workload.Finish(ctx, c, wl, reason, msg, clk)
}

// releasedReason is the QuotaReserved=False reason the job reconciler gives a Workload whose
// eviction it completes: "Pending" before v0.19's unadmitted-workload reasons.
func releasedReason() string { return "Pending" }

// mergePodSet is podset.Merge, which takes no logger before v0.19.
func mergePodSet(_ logr.Logger, meta *metav1.ObjectMeta, spec *corev1.PodSpec, info podset.PodSetInfo) error {
	return podset.Merge(meta, spec, info)
}

// requestsOf is a pod set's total requests as the scheduler lists them.
func requestsOf(ps *workload.PodSetResources) corev1.ResourceList {
	return ps.Requests.ToResourceList()
}

// constructWorkload is jobframework.ConstructWorkload with no labels to copy.
func constructWorkload(ctx context.Context, c client.Client, job jobframework.GenericJob) (*kueue.Workload, error) {
	return jobframework.ConstructWorkload(ctx, c, job, nil)
}

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

// discardRecorder drops Kueue's Kubernetes events (events.EventRecorder, from v0.18); the sim
// records its own.
type discardRecorder struct{}

var _ events.EventRecorder = discardRecorder{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
}

// syncTASNode feeds node to the TAS node cache, as Kueue's TAS node controller does from Node
// events.
func syncTASNode(cc *schdcache.Cache, node *corev1.Node) { cc.TASCache().SyncNode(node) }

// setConditionAndUpdate is workload.SetConditionAndUpdate.
func setConditionAndUpdate(ctx context.Context, c client.Client, wl *kueue.Workload, condType string, status metav1.ConditionStatus, reason, msg, manager string, clk clock.Clock) error {
	return workload.SetConditionAndUpdate(ctx, c, wl, condType, status, reason, msg, manager, clk)
}
