package kueuewl

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Summary is what a Workload says about the run it stands for, whichever API version it was read
// in.
type Summary struct {
	Namespace, Name string
	Labels          map[string]string
	// OwnerKind and OwnerName name the object the Workload belongs to (Job, MPIJob, JobSet, ...):
	// its controller, else its first owner; "" when it has none.
	OwnerKind, OwnerName string
	// Created is the Workload's creation (history.Read replaces it with its owner's).
	Created  time.Time
	Queue    string // the LocalQueue
	Priority string // the priority class name
	PodSets  []PodSet
	// Admitted is when the Workload got quota (QuotaReserved, else Admitted); Finished when it got
	// Finished; Succeeded is Finished's reason.
	Admitted, Finished *time.Time
	Succeeded          bool

	// What a snapshot of a live Workload needs besides (read in v1beta2 only; zero from v1beta1).
	// PriorityValue is the priority Kueue resolved (spec.priority; nil: none, 0 to Kueue).
	PriorityValue *int32
	// CreatedAt is the time Kueue orders the Workload by at creation: kueuelab's Kueue keeps it to
	// the nanosecond (on the trace clock during a replay) in PreciseCreationAnnotation, any other
	// Kueue in metadata.creationTimestamp. Created, unlike it, may be replaced by the owner's time.
	CreatedAt time.Time
	// QueuedAt, when set, is the time Kueue orders the pending Workload by instead of its creation
	// (an eviction it requeues by), as Kueue's own Ordering says under the default requeuing
	// strategy (timestamp Eviction).
	QueuedAt *time.Time
	// Admission is the quota reservation Kueue holds for it (nil: none).
	Admission *Admission
	// Inactive: spec.active is false (deactivated: Kueue neither queues nor admits it).
	Inactive bool
	// MaxExecSec, when set, is spec.maximumExecutionTimeSeconds less
	// status.accumulatedPastExecutionTimeSeconds: the admitted time Kueue still grants it,
	// counted from its current admission, before it deactivates it (the job's
	// kueue.x-k8s.io/max-exec-time-seconds label sets the spec field).
	MaxExecSec *float64
	// Evictions is how often Kueue evicted it (status.schedulingStats, else 1 when it carries an
	// Evicted condition): its admissions before the last are not in its conditions. Requeued is
	// when Kueue last queued it again after an eviction, where its conditions say (every eviction
	// a waitForPodsReady timeout); nil otherwise.
	Evictions int
	Requeued  *time.Time
}

// Admission is a Workload's status.admission.
type Admission struct {
	ClusterQueue string
	PodSets      []AdmittedPodSet
}

// AdmittedPodSet is one podSetAssignment: the pods admitted and each resource's flavor.
type AdmittedPodSet struct {
	Name    string
	Count   int32
	Flavors map[string]string
}

// PreciseCreationAnnotation is where kueuelab's Kueue (runtime/tools/patches) writes a Workload's
// creation time to the nanosecond, RFC 3339, on its own clock.
const PreciseCreationAnnotation = "kueuelab.io/created-at"

// PodSet is one pod set of a Workload.
type PodSet struct {
	Name     string
	Count    int
	Template corev1.PodTemplateSpec
}

// ListWorkloads summarises the Workloads of a namespace ("" for all) in Kueue's v1beta2 API, or in
// v1beta1 when that is all the cluster serves (Kueue v0.14 and earlier): a cluster's history can
// be read from any Kueue, not only from those kueuelab replays on. c's scheme needs AddToScheme.
func ListWorkloads(ctx context.Context, c client.Reader, namespace string) ([]Summary, error) {
	var out []Summary
	var list kueue.WorkloadList
	err := c.List(ctx, &list, client.InNamespace(namespace))
	if meta.IsNoMatchError(err) {
		var old kueuev1beta1.WorkloadList
		if err := c.List(ctx, &old, client.InNamespace(namespace)); err != nil {
			return nil, fmt.Errorf("list Kueue Workloads (v1beta1): %w", err)
		}
		for i := range old.Items {
			out = append(out, summarizeV1beta1(&old.Items[i]))
		}
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list Kueue Workloads: %w", err)
	}
	for i := range list.Items {
		out = append(out, Summarize(&list.Items[i]))
	}
	return out, nil
}

// Summarize reads a Workload's summary.
func Summarize(wl *kueue.Workload) Summary {
	s := Summary{Namespace: wl.Namespace, Name: wl.Name, Created: wl.CreationTimestamp.Time, Queue: string(wl.Spec.QueueName), Labels: wl.Labels}
	if wl.Spec.PriorityClassRef != nil {
		s.Priority = wl.Spec.PriorityClassRef.Name
	}
	for _, ps := range wl.Spec.PodSets {
		s.PodSets = append(s.PodSets, PodSet{Name: string(ps.Name), Count: int(ps.Count), Template: ps.Template})
	}
	s.Admitted, s.Finished, s.Succeeded = runTimes(wl.Status.Conditions, kueue.WorkloadQuotaReserved, kueue.WorkloadAdmitted, kueue.WorkloadFinished, kueue.WorkloadFinishedReasonSucceeded)
	s.OwnerKind, s.OwnerName = owner(wl.OwnerReferences)
	s.PriorityValue, s.Inactive = wl.Spec.Priority, wl.Spec.Active != nil && !*wl.Spec.Active
	if m := wl.Spec.MaximumExecutionTimeSeconds; m != nil {
		// Below zero when Kueue has not yet deactivated a workload past its limit: none left.
		left := math.Max(float64(*m-ptr.Deref(wl.Status.AccumulatedPastExecutionTimeSeconds, 0)), 0)
		s.MaxExecSec = &left
	}
	// Kueue turns Requeued False at a waitForPodsReady eviction and True when it requeues the
	// Workload after the backoff; a preemption leaves it True, so its time says when the last
	// eviction ended only where every eviction was a PodsReady timeout.
	byTimeout := 0
	if st := wl.Status.SchedulingStats; st != nil {
		for _, e := range st.Evictions {
			s.Evictions += int(e.Count)
			if e.Reason == kueue.WorkloadEvictedByPodsReadyTimeout {
				byTimeout += int(e.Count)
			}
		}
	}
	if s.Evictions == 0 && meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted) != nil {
		s.Evictions = 1
	}
	if c := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued); c != nil && c.Status == metav1.ConditionTrue && s.Evictions > 0 && byTimeout == s.Evictions {
		t := c.LastTransitionTime.Time
		s.Requeued = &t
	}
	s.CreatedAt = wl.CreationTimestamp.Time
	if v, ok := wl.Annotations[PreciseCreationAnnotation]; ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			s.CreatedAt = t
		}
	}
	order := workload.Ordering{PodsReadyRequeuingTimestamp: kueueconfig.EvictionTimestamp}
	if ts := order.GetQueueOrderTimestamp(wl); ts != &wl.CreationTimestamp {
		t := ts.Time
		s.QueuedAt = &t
	}
	if a := wl.Status.Admission; a != nil && meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
		s.Admission = &Admission{ClusterQueue: string(a.ClusterQueue)}
		for _, psa := range a.PodSetAssignments {
			ps := AdmittedPodSet{Name: string(psa.Name), Flavors: map[string]string{}}
			for r, f := range psa.Flavors {
				ps.Flavors[string(r)] = string(f)
			}
			if psa.Count != nil {
				ps.Count = *psa.Count
			} else {
				for _, spec := range wl.Spec.PodSets {
					if spec.Name == psa.Name {
						ps.Count = spec.Count
					}
				}
			}
			s.Admission.PodSets = append(s.Admission.PodSets, ps)
		}
	}
	return s
}

// summarizeV1beta1 is Summarize for v1beta1, where the priority class is a name, not a reference.
func summarizeV1beta1(wl *kueuev1beta1.Workload) Summary {
	s := Summary{Namespace: wl.Namespace, Name: wl.Name, Created: wl.CreationTimestamp.Time, Queue: string(wl.Spec.QueueName),
		Priority: wl.Spec.PriorityClassName, Labels: wl.Labels}
	for _, ps := range wl.Spec.PodSets {
		s.PodSets = append(s.PodSets, PodSet{Name: string(ps.Name), Count: int(ps.Count), Template: ps.Template})
	}
	s.Admitted, s.Finished, s.Succeeded = runTimes(wl.Status.Conditions, kueuev1beta1.WorkloadQuotaReserved, kueuev1beta1.WorkloadAdmitted, kueuev1beta1.WorkloadFinished, kueuev1beta1.WorkloadFinishedReasonSucceeded)
	s.OwnerKind, s.OwnerName = owner(wl.OwnerReferences)
	return s
}

func runTimes(conds []metav1.Condition, quota, admitted, finished, succeeded string) (a, f *time.Time, ok bool) {
	for _, t := range []string{quota, admitted} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionTrue {
			a = &c.LastTransitionTime.Time
			break
		}
	}
	if c := meta.FindStatusCondition(conds, finished); c != nil && c.Status == metav1.ConditionTrue {
		f, ok = &c.LastTransitionTime.Time, c.Reason == succeeded
	}
	return a, f, ok
}

func owner(refs []metav1.OwnerReference) (string, string) {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return r.Kind, r.Name
		}
	}
	if len(refs) > 0 {
		return refs[0].Kind, refs[0].Name
	}
	return "", ""
}
