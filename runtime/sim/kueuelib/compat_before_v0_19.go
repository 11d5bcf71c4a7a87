//go:build kueue_v0_15 || kueue_v0_17 || kueue_v0_18

package kueuelib

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/podset"
	"sigs.k8s.io/kueue/pkg/workload"
)

// The calls v0.19 moved or changed, as the releases before it have them: each is the named Kueue
// function of those releases.

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
