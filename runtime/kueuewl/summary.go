package kueuewl

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
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
}

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
