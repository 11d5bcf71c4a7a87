package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/render/contract"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/cluster"
)

// deadline bounds every wait of the e2e tests; admissions and completions take seconds here.
const deadline = 90 * time.Second

// eventually polls cond until it holds; on timeout the test fails with what and cond's last detail.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var detail string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
		ok, d, err := cond(ctx)
		detail = d
		return ok, err
	})
	if err != nil {
		t.Fatalf("%s: %v (last: %s)", what, err, detail)
	}
}

// setup creates a namespace and its queue objects; the namespace is deleted when the test ends.
func setup(t *testing.T, ns string, objs ...client.Object) {
	t.Helper()
	c := shared.client
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	create(t, nsObj)
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), nsObj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})
	for _, o := range objs {
		create(t, o)
	}
}

func create(t *testing.T, o client.Object) {
	t.Helper()
	if err := shared.client.Create(t.Context(), o); err != nil {
		t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// workloadFor returns the Kueue Workload owned by the object with uid, nil if none yet.
func workloadFor(ctx context.Context, ns string, uid types.UID) (*kueue.Workload, error) {
	var wls kueue.WorkloadList
	if err := shared.client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for i := range wls.Items {
		for _, ref := range wls.Items[i].OwnerReferences {
			if ref.UID == uid {
				return &wls.Items[i], nil
			}
		}
	}
	return nil, nil
}

func condition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// awaitWorkloadCondition waits until the object's Workload has condition typ=True.
func awaitWorkloadCondition(t *testing.T, o client.Object, typ string) *kueue.Workload {
	t.Helper()
	var wl *kueue.Workload
	eventually(t, fmt.Sprintf("%T %s: Workload %s", o, o.GetName(), typ), func(ctx context.Context) (bool, string, error) {
		var err error
		if wl, err = workloadFor(ctx, o.GetNamespace(), o.GetUID()); err != nil || wl == nil {
			return false, "no Workload yet", err
		}
		c := condition(wl.Status.Conditions, typ)
		if c == nil {
			return false, fmt.Sprintf("Workload %s conditions %v", wl.Name, condSummary(wl.Status.Conditions)), nil
		}
		return c.Status == metav1.ConditionTrue, c.Reason + ": " + c.Message, nil
	})
	return wl
}

func condSummary(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

// podsOf lists the pods matching labels in ns.
func podsOf(ctx context.Context, ns string, labels map[string]string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := shared.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// awaitPodsRunning waits until want pods match labels, all Running on KWOK nodes; the pods
// matching selected (all when nil) carry the nodeSelector Kueue injected from the flavor and run
// on nodes of the default GPU family.
func awaitPodsRunning(t *testing.T, ns string, labels map[string]string, want int, selected map[string]string) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%d pods %v Running on GPU nodes", want, labels), func(ctx context.Context) (bool, string, error) {
		var err error
		if pods, err = podsOf(ctx, ns, labels); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == want && len(pods) == want, fmt.Sprintf("%d pods, %d running", len(pods), running), nil
	})
	withSelector := 0
	for _, p := range pods {
		if selected != nil && !labelsMatch(p.Labels, selected) {
			continue
		}
		withSelector++
		if got := p.Spec.NodeSelector[gpuProduct]; got != cluster.GPUProduct {
			t.Errorf("pod %s: nodeSelector %s=%q, want %q (injected by Kueue from the flavor)", p.Name, gpuProduct, got, cluster.GPUProduct)
		}
	}
	if withSelector == 0 {
		t.Errorf("no pod matches %v: nothing checked for the flavor's nodeSelector", selected)
	}
	for _, p := range pods {
		var node corev1.Node
		if err := shared.client.Get(t.Context(), client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			t.Fatalf("pod %s: node %q: %v", p.Name, p.Spec.NodeName, err)
		}
		// A pod outside selected, without the flavor's nodeSelector, may go to any KWOK node, such
		// as the nodes of other tests' specs on the shared cluster.
		onFlavor := selected == nil || labelsMatch(p.Labels, selected)
		if node.Annotations["kwok.x-k8s.io/node"] != "fake" || (onFlavor && node.Labels[gpuProduct] != cluster.GPUProduct) {
			t.Errorf("pod %s runs on %s, not a KWOK %s node", p.Name, node.Name, cluster.GPUProduct)
		}
	}
	return pods
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// complete annotates pods so kueuelab's KWOK stage turns them Succeeded.
func complete(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	for i := range pods {
		p := &pods[i]
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+contract.Complete+`":"true"}}}`))
		if err := shared.client.Patch(t.Context(), p, patch); err != nil {
			t.Fatalf("annotate pod %s: %v", p.Name, err)
		}
	}
}

// get re-reads o.
func get(ctx context.Context, o client.Object) error {
	return shared.client.Get(ctx, client.ObjectKeyFromObject(o), o)
}

// DryRun server-side applies every object with dryRun=All (admission webhooks and CRD schemas
// run, nothing is stored) and returns one error per rejected object.
func DryRun(ctx context.Context, c client.Client, scheme *runtime.Scheme, objs []client.Object) error {
	var errs []error
	for _, o := range objs {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", o.GetName(), err))
			continue
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err))
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(gvk)
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(cluster.FieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}
