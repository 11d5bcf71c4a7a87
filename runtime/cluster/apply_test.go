package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestLocalClusterNodesAreUntainted: on a cluster marked local, Nodes lose KWOK's taint (and keep
// their pools' own); elsewhere they keep it.
func TestLocalClusterNodesAreUntainted(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		{Key: kwokTaintKey, Value: "fake", Effect: corev1.TaintEffectNoSchedule},
		{Key: "amd.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule},
	}}}
	objs := []client.Object{node}
	for _, tc := range []struct {
		name   string
		marked bool
	}{{"local", true}, {"any other cluster", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if tc.marked {
				b = b.WithObjects(LocalMarker())
			}
			got, err := allNodesFake(context.Background(), b.Build(), objs)
			if err != nil || got != tc.marked {
				t.Fatalf("allNodesFake = %v, %v; want %v", got, err, tc.marked)
			}
		})
	}
	if ok, err := allNodesFake(context.Background(), fake.NewClientBuilder().WithObjects(LocalMarker()).Build(), []client.Object{LocalMarker()}); ok || err != nil {
		t.Errorf("without Nodes to apply: %v, %v", ok, err)
	}
	n := withoutKWOKTaint(node)
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "amd.com/gpu" || len(node.Spec.Taints) != 2 {
		t.Errorf("taints %v (the original's %v), want the pool's only, the original untouched", n.Spec.Taints, node.Spec.Taints)
	}
}
