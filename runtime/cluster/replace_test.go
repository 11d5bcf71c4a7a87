package cluster

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/render/contract"
)

// TestPruneOthers deletes what another spec left (a ClusterQueue, its LocalQueue, a kueuelab
// node) and keeps what this spec has and what is not kueuelab's (a node without a pool label).
func TestPruneOthers(t *testing.T) {
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	cq := func(name string) *kueue.ClusterQueue {
		return &kueue.ClusterQueue{TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "ClusterQueue"},
			ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	ours := []client.Object{
		cq("team-a"),
		&kueue.ResourceFlavor{TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "ResourceFlavor"}, ObjectMeta: metav1.ObjectMeta{Name: "cpu"}},
		node("cpu-0", map[string]string{contract.Pool: "cpu"}),
	}
	theirs := []client.Object{
		cq("old"),
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "old-lq", Namespace: "old"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "old"}},
		node("gpu-0", map[string]string{contract.Pool: "gpu"}),
	}
	foreign := node("real-0", nil)
	var all []client.Object
	for _, group := range [][]client.Object{ours, theirs, {foreign}} {
		for _, o := range group {
			all = append(all, o.DeepCopyObject().(client.Object))
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(all...).Build()
	var out bytes.Buffer
	if err := pruneOthers(context.Background(), c, ours, &out); err != nil {
		t.Fatal(err)
	}
	if want := "deleting 3 cluster objects of another spec: ClusterQueue old, LocalQueue old/old-lq, Node gpu-0\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	for _, o := range theirs {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s %s: not deleted (%v)", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	for _, o := range append(ours, foreign) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); err != nil {
			t.Errorf("%s: %v", describe(o), err)
		}
	}
}
