package localcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestKWOKStalled(t *testing.T) {
	const (
		start   = "\n--- 2026-11-28T02:51:31Z kueuelab: start: /bin/kwok --kubeconfig=k\n"
		watch   = `{"level":"INFO","msg":"Watch nodes","annotation":"kwok.x-k8s.io/node=fake"}` + "\n"
		serving = `{"level":"INFO","msg":"Starting HTTP server"}` + "\n"
		stage   = `{"level":"INFO","msg":"Start stage controller","resourceRef":{"apiGroup":"v1","kind":"Node"}}` + "\n"
	)
	for _, tc := range []struct {
		name, log string
		want      bool
	}{
		{"stalled after start", start + watch + serving, true},
		{"stage controllers started", start + watch + serving + stage, false},
		{"not started yet", start, false},
		{"stalled after a restart, fine before", start + watch + stage + start + watch + serving, true},
		{"fine after a restart", start + watch + serving + start + watch + stage, false},
	} {
		if got := kwokStalled(tc.log); got != tc.want {
			t.Errorf("%s: stalled %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAnyNodeReady(t *testing.T) {
	node := func(name string, conds ...corev1.NodeCondition) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: conds}}
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	notReady := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse}
	for _, tc := range []struct {
		name  string
		nodes []client.Object
		want  bool
	}{
		{"none", nil, false},
		{"no Ready condition", []client.Object{node("a"), node("b")}, false},
		{"not ready", []client.Object{node("a", notReady)}, false},
		{"one ready", []client.Object{node("a"), node("b", ready)}, true},
	} {
		c := fake.NewClientBuilder().WithObjects(tc.nodes...).Build()
		if got := anyNodeReady(t.Context(), c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
