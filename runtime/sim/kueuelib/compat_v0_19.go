//go:build !kueue_v0_18 && !kueue_v0_17 && !kueue_v0_15

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
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/podset"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workload/evict"
	"sigs.k8s.io/kueue/pkg/workload/finish"
	"sigs.k8s.io/kueue/pkg/workload/patching"
)

// KueueVersion is the Kueue module version whose code this build links and whose unexported code
// the seams reach (checked by TestSeams). Each supported version has its compat_*.go, selected by
// the build tag kueue_v0_<minor> (none for this one, the default); runtime/kueuever lists them.
const KueueVersion = "v0.19.2"

// The functions below are where Kueue versions differ in the calls this package makes; each is
// the named Kueue function of this version.

// isEvicted is evict.IsEvicted.
func isEvicted(wl *kueue.Workload) bool { return evict.IsEvicted(wl) }

// isFinished is finish.IsFinished.
func isFinished(wl *kueue.Workload) bool { return finish.IsFinished(wl) }

// patchAdmissionStatus is patching.PatchAdmissionStatus.
func patchAdmissionStatus(ctx context.Context, c client.Client, wl *kueue.Workload, clk clock.Clock, update func(*kueue.Workload) (bool, error)) error {
	return patching.PatchAdmissionStatus(ctx, c, wl, clk, update)
}

// finishWorkload is finish.Finish.
func finishWorkload(ctx context.Context, c client.Client, wl *kueue.Workload, reason, msg string, clk clock.Clock) error {
	return finish.Finish(ctx, c, wl, reason, msg, clk)
}

// releasedReason is the QuotaReserved=False reason the job reconciler gives a Workload whose
// eviction it completes: PendingEvaluation, or Pending while the UnadmittedWorkloadsObservability
// gate is off.
func releasedReason() string {
	//lint:ignore SA1019 Kueue's own fallback reason while its UnadmittedWorkloadsObservability gate is off
	return workload.UnadmittedWorkloadReasonWithFallback(kueue.WorkloadQuotaReservedReasonPendingEvaluation, kueue.WorkloadPending)
}

// mergePodSet is podset.Merge.
func mergePodSet(log logr.Logger, meta *metav1.ObjectMeta, spec *corev1.PodSpec, info podset.PodSetInfo) error {
	return podset.Merge(log, meta, spec, info)
}

// requestsOf is a pod set's total requests as the scheduler lists them (the default formatting,
// which applies unless Kueue's Configuration sets one).
func requestsOf(ps *workload.PodSetResources) corev1.ResourceList {
	return ps.Requests.ToResourceList(nil)
}

// constructWorkload is jobframework.ConstructWorkload with no labels or annotations to copy.
func constructWorkload(ctx context.Context, c client.Client, job jobframework.GenericJob) (*kueue.Workload, error) {
	return jobframework.ConstructWorkload(ctx, c, job, nil, nil)
}

// moveToInadmissible is the queue's unexported moveHeapToInadmissible (linknamed, seam 6).
func moveToInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info) error {
	moveHeapToInadmissible(c, key, wInfo)
	return nil
}

//go:linkname moveHeapToInadmissible sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).moveHeapToInadmissible
func moveHeapToInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info)
