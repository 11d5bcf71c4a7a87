//go:build !kueue_v0_18 && !kueue_v0_17 && !kueue_v0_15

package kueuelib

import (
	"context"
	"fmt"
	_ "unsafe" // go:linkname

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/dra"
	"sigs.k8s.io/kueue/pkg/features"
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

// CounterQuota is nil: this Kueue charges DRA devices by the counters they consume
// (deviceClassMappings with counter sources, on by default from v0.19).
func CounterQuota() error { return nil }

// draIntegration is Kueue's DRA integration as its main wires it (cmd/kueue/main.go,
// core.SetupControllers): with the KueueDRAIntegration gate on, a dra.ResourceMapper filled from
// the Configuration's deviceClassMappings and a dra.ExtendedResourceCache, given to the queue
// manager and the workload controller, whose DRA reconcile channel the queue manager gets; with
// KueueDRAIntegrationPartitionableDevices or ...ConsumableCapacity on, the ResourceSlice API is
// there (utildra.CheckResourceSliceAPIAvailable; the Store serves ResourceSlices). The workload
// controller's handlers then leave a Workload with ResourceClaimTemplates to its Reconcile, which
// charges them (dra.GetResourceRequestsForResourceClaimTemplates, dra.GetCounterResourcesForWorkload)
// and queues it with workload.WithPreprocessedDRAResources: the sim runs that Reconcile as is.
// The DeviceClass events that fill the ExtendedResourceCache are not delivered: the classes the
// sim stores are static and map no extended resource.
//
// That Reconcile's charge is Kueue's cost, and the sim pays it as Kueue does, on every reconcile
// of a pending Workload with claims: a CEL pass over every device of the driver. Measured here
// (2 shared cores), on 32 nodes of 8 MIG H100s (4,864 devices) about 0.3 s a pass, some 60 µs a
// device, and nearly all of the replay's time.
type draIntegration struct {
	mapper   *dra.ResourceMapper
	backed   *dra.ExtendedResourceCache
	sliceAPI bool
	// events is the reconcile channel: the queue manager sends on it the DRA Workloads a
	// LocalQueue added after them finds.
	events chan event.TypedGenericEvent[*kueue.Workload]
}

func newDRA(mappings []config.DeviceClassMapping) (*draIntegration, error) {
	d := &draIntegration{sliceAPI: features.Enabled(features.KueueDRAIntegrationPartitionableDevices) ||
		features.Enabled(features.KueueDRAIntegrationConsumableCapacity)}
	if !features.Enabled(features.KueueDRAIntegration) {
		return d, nil
	}
	d.mapper, d.backed = dra.NewResourceMapper(), dra.NewExtendedResourceCache()
	if len(mappings) > 0 {
		if err := d.mapper.PopulateFromConfiguration(mappings); err != nil {
			return nil, fmt.Errorf("kueue %s: resources.deviceClassMappings: %w", KueueVersion, err)
		}
	}
	return d, nil
}

func (d *draIntegration) queueOptions() []qcache.Option {
	if d.backed == nil {
		return nil
	}
	return []qcache.Option{qcache.WithDRABackedResources(d.backed)}
}

func (d *draIntegration) coreOptions() []core.Option {
	return []core.Option{core.WithDRAMapper(d.mapper), core.WithDRABackedResources(d.backed),
		core.WithResourceSliceAPIAvailable(d.sliceAPI)}
}

// connect gives the queue manager a reconcile channel with room for n more Workloads (the queue
// manager sends while the sim's single goroutine is in its call: a full channel would block it).
func (d *draIntegration) connect(qm *qcache.Manager, n int) {
	if d.mapper == nil || (d.events != nil && cap(d.events)-len(d.events) >= n) {
		return
	}
	ch := make(chan event.TypedGenericEvent[*kueue.Workload], len(d.events)+n+64)
	for len(d.events) > 0 {
		ch <- <-d.events
	}
	d.events = ch
	qm.SetDRAReconcileChannel(ch)
}

// take returns the keys sent on the reconcile channel since the last call, in order.
func (d *draIntegration) take() []types.NamespacedName {
	var out []types.NamespacedName
	for len(d.events) > 0 {
		e := <-d.events
		out = append(out, types.NamespacedName{Namespace: e.Object.Namespace, Name: e.Object.Name})
	}
	return out
}

// infoOptions are the options of workload.NewInfo for wl, a Workload restored with its admission:
// its DRA resources as the workload controller's Reconcile computes them for a pending one (the
// claim templates' device counts, then the counters their devices consume, merged).
func (d *draIntegration) infoOptions(ctx context.Context, cl client.Client, wl *kueue.Workload) ([]workload.InfoOption, error) {
	if d.mapper == nil || !dra.NeedsDRAReconcile(wl, d.backed) {
		return nil, nil
	}
	slices := dra.NewResourceSliceCache(cl)
	res, errs := dra.GetResourceRequestsForResourceClaimTemplates(ctx, cl, slices, d.mapper, wl)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if features.Enabled(features.KueueDRAIntegrationPartitionableDevices) && d.sliceAPI {
		counters, errs := dra.GetCounterResourcesForWorkload(ctx, cl, slices, d.mapper, wl)
		if len(errs) > 0 {
			return nil, errs.ToAggregate()
		}
		res = mergeDRAResources(res, counters)
	}
	if len(res) == 0 {
		return nil, nil
	}
	return []workload.InfoOption{workload.WithPreprocessedDRAResources(res, nil)}, nil
}

//go:linkname mergeDRAResources sigs.k8s.io/kueue/pkg/controller/core.mergeDRAResources
func mergeDRAResources(dst, src map[kueue.PodSetReference]corev1.ResourceList) map[kueue.PodSetReference]corev1.ResourceList
