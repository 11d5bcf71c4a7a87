package localcluster

import (
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestKWOKLeasesFresh(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	node := func(name string, fake bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if fake {
			n.Annotations = map[string]string{cluster.KWOKNodeAnnotation: "fake"}
		}
		return n
	}
	lease := func(name string, renewedAgo time.Duration) coordinationv1.Lease {
		return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To[int32](40), RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewedAgo)))}}
	}
	for _, tc := range []struct {
		name    string
		nodes   []corev1.Node
		leases  []coordinationv1.Lease
		wantErr string
	}{
		{name: "no nodes", nodes: nil},
		{name: "only nodes KWOK does not manage", nodes: []corev1.Node{node("real", false)}},
		{name: "one fresh lease of two nodes", nodes: []corev1.Node{node("a", true), node("b", true)},
			leases: []coordinationv1.Lease{lease("a", 39*time.Second)}},
		{name: "no lease at all", nodes: []corev1.Node{node("a", true), node("b", true)},
			wantErr: "none of the 2 nodes KWOK manages"},
		{name: "every lease expired", nodes: []corev1.Node{node("a", true)},
			leases: []coordinationv1.Lease{lease("a", 40*time.Second)}, wantErr: "none of the 1 nodes"},
		{name: "a fresh lease of a node KWOK does not manage", nodes: []corev1.Node{node("a", true), node("real", false)},
			leases: []coordinationv1.Lease{lease("real", time.Second)}, wantErr: "none of the 1 nodes"},
		{name: "a lease without renew time", nodes: []corev1.Node{node("a", true)},
			leases: []coordinationv1.Lease{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, wantErr: "none of the 1 nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := kwokLeasesFresh(tc.nodes, tc.leases, now)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
