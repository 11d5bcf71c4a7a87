package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/render/cluster"
	rtcluster "github.com/kueuelab/kueuelab/runtime/cluster"
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
// finalizers on queues and flavors can clear) and waits until every one is gone.
func reset(ctx context.Context, rc *rest.Config, objs []client.Object, log io.Writer) error {
	scheme, err := rtcluster.Scheme()
	if err != nil {
		return err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	var namespaces, rest []client.Object
	for _, o := range objs {
		if _, ok := o.(*corev1.Namespace); ok {
			namespaces = append(namespaces, o)
		} else {
			rest = append(rest, o)
		}
	}
	t0 := time.Now()
	deleted := 0
	for _, group := range [][]client.Object{namespaces, rest} {
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
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, resetTimeout, true, func(ctx context.Context) (bool, error) {
		for _, o := range objs {
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
