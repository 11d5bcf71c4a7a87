package kueuewl

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// AddToScheme registers the Kueue API versions kueuelab talks to a cluster in: v1beta2, which
// render emits and every supported Kueue serves, and v1beta1, which ListWorkloads falls back to
// on a cluster whose Kueue predates v1beta2 (v0.14 and earlier).
func AddToScheme(s *runtime.Scheme) error {
	if err := kueue.AddToScheme(s); err != nil {
		return fmt.Errorf("kueue v1beta2 types: %w", err)
	}
	if err := kueuev1beta1.AddToScheme(s); err != nil {
		return fmt.Errorf("kueue v1beta1 types: %w", err)
	}
	return nil
}

// Group is Kueue's API group.
var Group = kueue.SchemeGroupVersion.Group

// QueueKinds are the Kueue kinds a cluster spec renders to, in the order a spec's leftovers are
// deleted: the queues before the flavors they use (Kueue's resource-in-use finalizer holds a
// ResourceFlavor while a ClusterQueue names it), and the Topology after the flavors that name it.
var QueueKinds = []schema.GroupVersionKind{
	kueue.SchemeGroupVersion.WithKind("LocalQueue"),
	kueue.SchemeGroupVersion.WithKind("ClusterQueue"),
	kueue.SchemeGroupVersion.WithKind("Cohort"),
	kueue.SchemeGroupVersion.WithKind("ResourceFlavor"),
	kueue.SchemeGroupVersion.WithKind("Topology"),
	kueue.SchemeGroupVersion.WithKind("WorkloadPriorityClass"),
}

// ClusterQueueActive reports whether the named ClusterQueue is Active (it can admit), and when
// it is not, Kueue's reason and message.
func ClusterQueueActive(ctx context.Context, c client.Reader, name string) (bool, string, error) {
	var cq kueue.ClusterQueue
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &cq); err != nil {
		return false, "", fmt.Errorf("ClusterQueue %s: %w", name, err)
	}
	cond := meta.FindStatusCondition(cq.Status.Conditions, kueue.ClusterQueueActive)
	switch {
	case cond == nil:
		return false, "no " + kueue.ClusterQueueActive + " condition", nil
	case cond.Status != "True":
		return false, cond.Reason + ": " + cond.Message, nil
	}
	return true, "", nil
}

// ClusterQueueFlavors maps every ClusterQueue of the cluster to the ResourceFlavors its quotas
// name.
func ClusterQueueFlavors(ctx context.Context, c client.Reader) (map[string][]string, error) {
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return nil, fmt.Errorf("list ClusterQueues: %w", err)
	}
	out := make(map[string][]string, len(cqs.Items))
	for _, cq := range cqs.Items {
		var flavors []string
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				flavors = append(flavors, string(f.Name))
			}
		}
		out[cq.Name] = flavors
	}
	return out, nil
}
