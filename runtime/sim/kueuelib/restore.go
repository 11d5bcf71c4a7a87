package kueuelib

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// RestoredPodSet is one pod set of a restored admission: the pods admitted and the flavor of
// each resource (a Workload's status.admission.podSetAssignments[]).
type RestoredPodSet struct {
	Name    string
	Count   int32
	Flavors map[string]string
}

// RestoredStatus is what a restored Workload's status holds besides its admission: its
// conditions (PodsReady, Evicted, Requeued, ...) and requeue state, as Kueue and the job
// reconciler last wrote them.
type RestoredStatus struct {
	Conditions []metav1.Condition
	// RequeueCount and RequeueAt are status.requeueState (nil RequeueAt: none).
	RequeueCount *int32
	RequeueAt    *time.Time
}

// Restore puts st into wl's status.
func (st RestoredStatus) restore(wl *kueue.Workload) {
	for _, c := range st.Conditions {
		c.ObservedGeneration = wl.Generation
		apimeta.SetStatusCondition(&wl.Status.Conditions, c)
	}
	if st.RequeueCount != nil || st.RequeueAt != nil {
		rs := &kueue.RequeueState{Count: st.RequeueCount}
		if st.RequeueAt != nil {
			t := metav1.NewTime(*st.RequeueAt)
			rs.RequeueAt = &t
		}
		wl.Status.RequeueState = rs
	}
}

// CreatePending creates wl pending, with the status st: a Workload Kueue finds when it starts,
// which its handler queues (or, backing off, leaves to the reconciler until requeueAt).
func (k *Kueue) CreatePending(wl *kueue.Workload, st RestoredStatus) error {
	wl.Generation = 1
	st.restore(wl)
	return k.restore(wl)
}

// restore creates a Workload of the state a run resumes from.
func (k *Kueue) restore(wl *kueue.Workload) error {
	defer k.Store.as(ByRestore)()
	return k.Store.Create(k.ctx, wl)
}

// CreateAdmitted creates wl as a Workload already admitted to ClusterQueue cq at time at, the way
// Kueue meets an admitted Workload when it starts: its informer's create event reaches the
// workload controller's handler, which puts the Workload in the cache with the quota its
// status.admission holds, never in a queue. The status is written by Kueue's own
// SetQuotaReservation and SyncAdmittedCondition (as the scheduler does on admission), and each
// pod set's resourceUsage is what the scheduler would write: the pod set's total requests
// (workload.NewInfo, with the DRA resources of its ResourceClaimTemplates as Kueue's workload
// controller computes them) for the resources the admission gives a flavor.
// st is the rest of its status.
func (k *Kueue) CreateAdmitted(wl *kueue.Workload, cq string, podsets []RestoredPodSet, at time.Time, st RestoredStatus) error {
	draOpts, err := k.dra.infoOptions(k.ctx, k.Store, wl)
	if err != nil {
		return fmt.Errorf("workload %s/%s: DRA resources: %w", wl.Namespace, wl.Name, err)
	}
	total := workload.NewInfo(wl, draOpts...).TotalRequests
	adm := &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq)}
	for _, rp := range podsets {
		var req *workload.PodSetResources
		for i := range total {
			if string(total[i].Name) == rp.Name {
				req = &total[i]
			}
		}
		if req == nil {
			return fmt.Errorf("workload %s/%s has no pod set %q to restore", wl.Namespace, wl.Name, rp.Name)
		}
		if rp.Count != req.Count {
			return fmt.Errorf("workload %s/%s pod set %s: %d pods admitted, the pod set has %d (partial admission is not restored)", wl.Namespace, wl.Name, rp.Name, rp.Count, req.Count)
		}
		requests := requestsOf(req)
		psa := kueue.PodSetAssignment{Name: req.Name, Count: new(rp.Count),
			Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{}, ResourceUsage: corev1.ResourceList{}}
		for r, f := range rp.Flavors {
			psa.Flavors[corev1.ResourceName(r)] = kueue.ResourceFlavorReference(f)
			psa.ResourceUsage[corev1.ResourceName(r)] = requests[corev1.ResourceName(r)]
		}
		for r, q := range requests {
			if _, ok := psa.Flavors[r]; !ok && !q.IsZero() {
				return fmt.Errorf("workload %s/%s pod set %s: the admission gives %s no flavor", wl.Namespace, wl.Name, rp.Name, r)
			}
		}
		adm.PodSetAssignments = append(adm.PodSetAssignments, psa)
	}
	if len(adm.PodSetAssignments) != len(wl.Spec.PodSets) {
		return fmt.Errorf("workload %s/%s: the admission names %d of its %d pod sets", wl.Namespace, wl.Name, len(adm.PodSetAssignments), len(wl.Spec.PodSets))
	}
	clk := clocktesting.NewFakeClock(at)
	wl.Generation = 1
	workload.SetQuotaReservation(wl, adm, clk)
	workload.SyncAdmittedCondition(wl, at)
	if !workload.IsAdmitted(wl) {
		return fmt.Errorf("workload %s/%s: not admitted after its quota reservation (admission checks or a delayed topology request pending?)", wl.Namespace, wl.Name)
	}
	st.restore(wl)
	if err := k.restore(wl); err != nil {
		return err
	}
	if draOpts != nil {
		// The workload controller's create handler leaves a Workload with DRA claims to its
		// Reconcile, which takes up pending ones only: a restarted Kueue finds an admitted one
		// when its cache's AddClusterQueue lists the ClusterQueue's admitted Workloads, and adds
		// it so. The sim adds the ClusterQueues first, so it adds the Workload itself.
		k.cache.AddOrUpdateWorkload(k.log, wl.DeepCopy())
	}
	return nil
}

// QueueOrderTime is the time the queues order the pending wl by within its priority (Kueue's
// workload.Ordering.GetQueueOrderTimestamp with this Kueue's requeuing timestamp): its creation,
// or the eviction that requeued it.
func (k *Kueue) QueueOrderTime(wl *kueue.Workload) time.Time {
	return k.ordering.GetQueueOrderTimestamp(wl).Time
}

// Parked says which pending Workloads Kueue keeps aside as inadmissible: tried, not admitted, and
// not to be tried again before something changes in their ClusterQueue or cohort.
func (k *Kueue) Parked() map[types.NamespacedName]bool {
	out := map[types.NamespacedName]bool{}
	for key := range k.heads.parked() {
		ns, name, _ := strings.Cut(key, "/")
		out[types.NamespacedName{Namespace: ns, Name: name}] = true
	}
	return out
}

// Park puts the restored pending Workload key aside as inadmissible, as Kueue had it.
func (k *Kueue) Park(key types.NamespacedName) error {
	found, err := k.heads.park(workload.NewReference(key.Namespace, key.Name))
	if err != nil {
		return fmt.Errorf("workload %s: %w", key, err)
	}
	if !found {
		return fmt.Errorf("workload %s is in no ClusterQueue's heap", key)
	}
	k.headsKnown = false
	return nil
}
