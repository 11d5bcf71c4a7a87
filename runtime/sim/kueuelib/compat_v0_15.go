//go:build kueue_v0_15

package kueuelib

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/podset"
	"sigs.k8s.io/kueue/pkg/workload"
)

// KueueVersion is the Kueue module version this build links (build tag kueue_v0_15).
const KueueVersion = "v0.15.0"

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

// moveToInadmissible takes a Workload off the heap and into the inadmissible workloads: the
// queue's unexported delete (linknamed; v0.15's takes the Workload) and an insert into its
// unexported inadmissibleWorkloads map, reached through reflection as the heads are (seam 6).
func moveToInadmissible(c *qcache.ClusterQueue, key workload.Reference, wInfo *workload.Info) error {
	f := reflect.ValueOf(c).Elem().FieldByName("inadmissibleWorkloads")
	if !f.IsValid() || f.Kind() != reflect.Map || f.Type().Key() != reflect.TypeFor[workload.Reference]() ||
		f.Type().Elem() != reflect.TypeFor[*workload.Info]() {
		return fmt.Errorf("kueue %s seam: queue.ClusterQueue has no map inadmissibleWorkloads of *workload.Info by workload.Reference", KueueVersion)
	}
	cqDelete(c, logr.Discard(), wInfo.Obj)
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetMapIndex(reflect.ValueOf(key), reflect.ValueOf(wInfo))
	return nil
}

//go:linkname cqDelete sigs.k8s.io/kueue/pkg/cache/queue.(*ClusterQueue).delete
func cqDelete(c *qcache.ClusterQueue, log logr.Logger, w *kueue.Workload)

// discardRecorder drops Kueue's Kubernetes events (record.EventRecorder, before v0.18); the sim
// records its own.
type discardRecorder struct{}

var _ record.EventRecorder = discardRecorder{}

func (discardRecorder) Event(runtime.Object, string, string, string)          {}
func (discardRecorder) Eventf(runtime.Object, string, string, string, ...any) {}
func (discardRecorder) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

// syncTASNode does nothing in v0.15: its TAS lists the nodes from the API at each snapshot.
func syncTASNode(*schdcache.Cache, *corev1.Node) {}

// setConditionAndUpdate is v0.15's workload.UpdateStatus.
func setConditionAndUpdate(ctx context.Context, c client.Client, wl *kueue.Workload, condType string, status metav1.ConditionStatus, reason, msg, manager string, clk clock.Clock) error {
	return workload.UpdateStatus(ctx, c, wl, condType, status, reason, msg, manager, clk)
}
