package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

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

// TestWaitNodesReadySaysWhy: a wait that times out names a node that is not ready and what keeps
// it so, and counts the ready ones; Ready nodes free of the node controller's taints end it.
func TestWaitNodesReadySaysWhy(t *testing.T) {
	kwok := map[string]string{KWOKNodeAnnotation: "fake"}
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		want  string // "" when the wait ends with every node ready
	}{
		{"all ready", []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: kwok}, Status: corev1.NodeStatus{Conditions: ready}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: kwok}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}}, Status: corev1.NodeStatus{Conditions: ready}},
		}, ""},
		{"no KWOK node", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "real"}, Status: corev1.NodeStatus{Conditions: ready}}}, "(0 of 0 are)"},
		{"not-ready taint", []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: kwok}, Status: corev1.NodeStatus{Conditions: ready}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Annotations: kwok}, Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}}}, Status: corev1.NodeStatus{Conditions: ready}},
		}, "(1 of 2 are; b: taint node.kubernetes.io/not-ready:NoSchedule)"},
		{"Ready Unknown", []corev1.Node{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: kwok}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown"}}}},
		}, "(0 of 1 are; a: Ready=Unknown (NodeStatusUnknown))"},
		{"no conditions", []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a", Annotations: kwok}}}, "(0 of 1 are; a: no Ready condition)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			for i := range tc.nodes {
				b = b.WithObjects(&tc.nodes[i])
			}
			n, err := WaitNodesReady(context.Background(), b.Build(), 50*time.Millisecond)
			if tc.want == "" {
				if err != nil || n != len(tc.nodes) {
					t.Fatalf("WaitNodesReady = %d, %v; want %d ready", n, err, len(tc.nodes))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("WaitNodesReady error %v, want it to say %q", err, tc.want)
			}
		})
	}
}
