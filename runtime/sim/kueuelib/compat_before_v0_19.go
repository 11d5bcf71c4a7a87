//go:build kueue_v0_15 || kueue_v0_17 || kueue_v0_18

package kueuelib

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/controller/core"
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

// CounterQuota says why this Kueue cannot charge MIG slices: Kueue's quota for DRA devices by the
// counters they consume (deviceClassMappings with counter sources) is what the sim runs with
// Kueue v0.19, where it is on by default; it is alpha and off in v0.18 and absent before.
func CounterQuota() error {
	return fmt.Errorf("this sim links Kueue %s, which has no DRA counter quota on by default (alpha in v0.18, absent before): the sim charges MIG slices to quota with Kueue v0.19's, in the default build", KueueVersion)
}

// draIntegration is nothing before v0.19: the sim wires no DRA into Kueue (CounterQuota).
type draIntegration struct{}

func newDRA(mappings []config.DeviceClassMapping) (*draIntegration, error) {
	if len(mappings) > 0 {
		return nil, fmt.Errorf("resources.deviceClassMappings: %w", CounterQuota())
	}
	return &draIntegration{}, nil
}

func (*draIntegration) queueOptions() []qcache.Option { return nil }
func (*draIntegration) coreOptions() []core.Option    { return nil }
func (*draIntegration) connect(*qcache.Manager, int)  {}
func (*draIntegration) take() []types.NamespacedName  { return nil }
func (*draIntegration) infoOptions(context.Context, client.Client, *kueue.Workload) ([]workload.InfoOption, error) {
	return nil, nil
}
