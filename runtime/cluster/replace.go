package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta1"

	"github.com/kueuelab/kueuelab/render/contract"
)

// ReplaceObjects applies the cluster side of a spec. An object whose immutable fields differ from what
// the cluster holds (a LocalQueue pointing at another ClusterQueue) is replaced on kueuelab's own
// cluster (prune) and reported with the command that resets it otherwise. With prune, the queues,
// flavors and kueuelab nodes of other specs are deleted first, so that nothing of an earlier run's
// spec (a node pool, a quota) changes this run's results.
func ReplaceObjects(ctx context.Context, rc *rest.Config, objs []client.Object, prune bool, out io.Writer) error {
	c, err := NewClient(rc)
	if err != nil {
		return err
	}
	if prune {
		if err := pruneOthers(ctx, c, objs, out); err != nil {
			return err
		}
	}
	for _, o := range objs {
		err := ApplyObjects(ctx, rc, []client.Object{o})
		if err == nil || !immutable(err) {
			if err != nil {
				return err
			}
			continue
		}
		gvk, gerr := apiutil.GVKForObject(o, c.Scheme())
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		what := fmt.Sprintf("%s %s", gvk.Kind, client.ObjectKeyFromObject(o))
		if !prune {
			return fmt.Errorf("%w\nthe cluster holds a %s of another spec; delete it (kubectl delete %s %s%s) or run on a fresh cluster",
				err, what, strings.ToLower(gvk.Kind), o.GetName(), nsFlag(o))
		}
		fmt.Fprintf(out, "replacing %s of another spec\n", what)
		if err := deleteAndWait(ctx, c, o); err != nil {
			return err
		}
		if err := ApplyObjects(ctx, rc, []client.Object{o}); err != nil {
			return err
		}
	}
	return nil
}

// NewClient is a client that knows every kind kueuelab applies.
func NewClient(rc *rest.Config) (client.Client, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	return newClient(rc, scheme)
}

func nsFlag(o client.Object) string {
	if o.GetNamespace() == "" {
		return ""
	}
	return " -n " + o.GetNamespace()
}

func immutable(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "immutable")
}

// PruneOthers deletes the Kueue queue objects and kueuelab nodes of the cluster that keep does not
// contain, queues before the flavors they use, each waited for: on kueuelab's own cluster, what an
// earlier run's spec left (another cohort member, a node pool) must not change this run's results.
func PruneOthers(ctx context.Context, rc *rest.Config, keep []client.Object, out io.Writer) error {
	c, err := NewClient(rc)
	if err != nil {
		return err
	}
	return pruneOthers(ctx, c, keep, out)
}

// pruneOthers deletes the Kueue queue objects and kueuelab nodes that objs do not contain.
func pruneOthers(ctx context.Context, c client.Client, objs []client.Object, out io.Writer) error {
	want := map[string]bool{}
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, c.Scheme())
		if err != nil {
			return err
		}
		want[gvk.Kind+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	lists := []struct {
		kind string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"LocalQueue", &kueue.LocalQueueList{}, nil},
		{"ClusterQueue", &kueue.ClusterQueueList{}, nil},
		{"Cohort", &kueue.CohortList{}, nil},
		{"ResourceFlavor", &kueue.ResourceFlavorList{}, nil},
		{"Topology", &kueue.TopologyList{}, nil},
		{"WorkloadPriorityClass", &kueue.WorkloadPriorityClassList{}, nil},
		{"Node", &corev1.NodeList{}, []client.ListOption{client.HasLabels{contract.Pool}}},
	}
	var stale []client.Object
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			return fmt.Errorf("list %ss: %w", l.kind, err)
		}
		items, err := listItems(l.list)
		if err != nil {
			return err
		}
		for _, o := range items {
			if !want[l.kind+"/"+o.GetNamespace()+"/"+o.GetName()] {
				stale = append(stale, o)
			}
		}
	}
	if len(stale) == 0 {
		return nil
	}
	var names []string
	for _, o := range stale {
		names = append(names, fmt.Sprintf("%T %s", o, client.ObjectKeyFromObject(o)))
	}
	slices.Sort(names)
	fmt.Fprintf(out, "deleting %d cluster objects of another spec: %s\n", len(stale), strings.Join(names, ", "))
	var errs []error
	for _, o := range stale {
		errs = append(errs, deleteAndWait(ctx, c, o))
	}
	return errors.Join(errs...)
}

func listItems(l client.ObjectList) ([]client.Object, error) {
	var out []client.Object
	switch l := l.(type) {
	case *kueue.LocalQueueList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *kueue.ClusterQueueList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *kueue.CohortList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *kueue.ResourceFlavorList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *kueue.TopologyList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *kueue.WorkloadPriorityClassList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.NodeList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("list %T: unknown type", l)
	}
	return out, nil
}

// deleteAndWait deletes o and waits until it is gone (Kueue's finalizers clear once nothing uses it).
func deleteAndWait(ctx context.Context, c client.Client, o client.Object) error {
	obj := o.DeepCopyObject().(client.Object)
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %T %s: %w", o, client.ObjectKeyFromObject(o), err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("delete %T %s: still there: %w", o, client.ObjectKeyFromObject(o), err)
	}
	return nil
}
