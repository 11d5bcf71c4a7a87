package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pollwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kueuelab/kueuelab/render/cluster"
	rtcluster "github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// resetTimeout bounds the wait for a reset's deletions (namespaces and Kueue finalizers).
const resetTimeout = 3 * time.Minute

// clusterObjects is the union, by kind and name, of every variant's cluster objects: what a
// reset deletes so that no variant sees another's queues, flavors or nodes.
func clusterObjects(specs []*cluster.Spec) ([]client.Object, error) {
	seen := map[string]bool{}
	var out []client.Object
	for _, s := range specs {
		objs, err := s.Objects(cluster.Options{})
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			k := fmt.Sprintf("%T/%s/%s", o, o.GetNamespace(), o.GetName())
			if !seen[k] {
				seen[k] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

// reset deletes objs from the cluster (Namespaces first, so the workloads in them go and Kueue's
// finalizers on queues and flavors can clear) and waits until every one is gone. On kueuelab's own
// cluster (own) it also deletes the queues, flavors and nodes of other specs, as a run does: an
// earlier run's ClusterQueue would otherwise keep a shared ResourceFlavor in use forever (Kueue's
// resource-in-use finalizer) and could lend quota to this one. On any other cluster a flavor that a
// ClusterQueue outside objs uses is left in place and said so: deleting it could never complete.
func reset(ctx context.Context, rc *rest.Config, objs []client.Object, own bool, log io.Writer) error {
	scheme, err := rtcluster.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	inUse, err := flavorsUsedElsewhere(ctx, c, objs)
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	var namespaces, queues, flavors []client.Object
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return fmt.Errorf("reset: %w", err)
		}
		switch gvk.Kind {
		case "Namespace":
			namespaces = append(namespaces, o)
		case "Topology":
			flavors = append(flavors, o)
		case "ResourceFlavor":
			if by, ok := inUse[o.GetName()]; ok && !own {
				fmt.Fprintf(log, "reset: kept ResourceFlavor %s: ClusterQueue %s of another spec uses it\n", o.GetName(), by)
				continue
			}
			flavors = append(flavors, o)
		default:
			queues = append(queues, o)
		}
	}
	t0 := time.Now()
	deleted := 0
	if own {
		// Delete the Kueue queue objects and kueuelab nodes of other specs first: an earlier
		// spec's ClusterQueue holds the flavors this reset deletes.
		if err := rtcluster.PruneOthers(ctx, rc, objs, log); err != nil {
			return fmt.Errorf("reset: %w", err)
		}
	}
	var wait []client.Object
	for _, group := range [][]client.Object{namespaces, queues, flavors} {
		wait = append(wait, group...)
		for _, o := range group {
			err := c.Delete(ctx, o.DeepCopyObject().(client.Object), client.PropagationPolicy(metav1.DeletePropagationBackground))
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("reset: delete %T %s: %w", o, o.GetName(), err)
			default:
				deleted++
			}
		}
	}
	if deleted == 0 {
		return nil
	}
	var left client.Object
	err = pollwait.PollUntilContextTimeout(ctx, 250*time.Millisecond, resetTimeout, true, func(ctx context.Context) (bool, error) {
		for _, o := range wait {
			cur := o.DeepCopyObject().(client.Object)
			err := c.Get(ctx, client.ObjectKeyFromObject(o), cur)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, err
			}
			left = o
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		what := "?"
		if left != nil {
			what = fmt.Sprintf("%T %s", left, left.GetName())
		}
		return errors.Join(fmt.Errorf("reset: %s still there after %s", what, resetTimeout), err)
	}
	fmt.Fprintf(log, "reset: deleted %d objects of earlier runs in %s\n", deleted, time.Since(t0).Round(100*time.Millisecond))
	return nil
}

// flavorsUsedElsewhere maps each ResourceFlavor name that a ClusterQueue outside objs uses to that
// queue's name.
func flavorsUsedElsewhere(ctx context.Context, c client.Client, objs []client.Object) (map[string]string, error) {
	ours := map[string]bool{}
	for _, o := range objs {
		if gvk, err := apiutil.GVKForObject(o, c.Scheme()); err == nil && gvk.Kind == "ClusterQueue" {
			ours[o.GetName()] = true
		}
	}
	byQueue, err := kueuewl.ClusterQueueFlavors(ctx, c)
	if err != nil {
		return nil, err
	}
	used := map[string]string{}
	for _, cq := range slices.Sorted(maps.Keys(byQueue)) {
		if ours[cq] {
			continue
		}
		for _, f := range byQueue[cq] {
			used[f] = cq
		}
	}
	return used, nil
}
