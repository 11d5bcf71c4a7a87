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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
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
	var stale []client.Object
	keep := func(kind string, o client.Object) {
		if !want[kind+"/"+o.GetNamespace()+"/"+o.GetName()] {
			stale = append(stale, o)
		}
	}
	// Listed unstructured, in the API version render emits: only names and the kind matter here.
	for _, gvk := range kueuewl.QueueKinds {
		var list unstructured.UnstructuredList
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, &list); err != nil {
			return fmt.Errorf("list %ss: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			o.SetGroupVersionKind(gvk)
			keep(gvk.Kind, o)
		}
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.HasLabels{contract.Pool}); err != nil {
		return fmt.Errorf("list Nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		keep("Node", n)
	}
	if len(stale) == 0 {
		return nil
	}
	var names []string
	for _, o := range stale {
		names = append(names, describe(o))
	}
	slices.Sort(names)
	fmt.Fprintf(out, "deleting %d cluster objects of another spec: %s\n", len(stale), strings.Join(names, ", "))
	var errs []error
	for _, o := range stale {
		errs = append(errs, deleteAndWait(ctx, c, o))
	}
	return errors.Join(errs...)
}

// describe names an object by kind and key for messages.
func describe(o client.Object) string {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", o)
	}
	if o.GetNamespace() == "" {
		return kind + " " + o.GetName()
	}
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// deleteAndWait deletes o and waits until it is gone (Kueue's finalizers clear once nothing uses it).
func deleteAndWait(ctx context.Context, c client.Client, o client.Object) error {
	obj := o.DeepCopyObject().(client.Object)
	if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete %s: %w", describe(o), err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("delete %s: still there: %w", describe(o), err)
	}
	return nil
}
