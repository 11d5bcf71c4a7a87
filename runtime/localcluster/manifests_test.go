package localcluster

import (
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/cluster"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const kubebuilderHooks = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mjob.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-batch-v1-job}
- name: mpod.kb.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
---
apiVersion: v1
kind: Service
metadata:
  name: webhook-service
`

func TestURLWebhooks(t *testing.T) {
	objs, err := cluster.DecodeYAML(strings.NewReader(kubebuilderHooks), "hooks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := urlWebhooks(objs, urlHooks{prefix: "kueue-", baseURL: "https://127.0.0.1:9443", ca: []byte("CA"),
		keep: func(w map[string]any) bool { return w["name"] != "mpod.kb.io" }})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].GetName() != "kueue-mutating-webhook-configuration" {
		t.Fatalf("got %d objects (%v), want the renamed webhook configuration only", len(out), names(out))
	}
	whs, _, _ := unstructured.NestedSlice(out[0].Object, "webhooks")
	if len(whs) != 1 {
		t.Fatalf("got %d webhooks, want 1 (mpod skipped)", len(whs))
	}
	w := whs[0].(map[string]any)
	tests := []struct {
		field []string
		want  string
	}{
		{[]string{"clientConfig", "url"}, "https://127.0.0.1:9443/mutate-batch-v1-job"},
		{[]string{"clientConfig", "caBundle"}, b64([]byte("CA"))},
	}
	for _, tc := range tests {
		got, _, _ := unstructured.NestedString(w, tc.field...)
		if got != tc.want {
			t.Errorf("%v = %q, want %q", tc.field, got, tc.want)
		}
	}
	if _, found, _ := unstructured.NestedMap(w, "clientConfig", "service"); found {
		t.Errorf("service reference left in clientConfig")
	}
	if _, found, _ := unstructured.NestedMap(w, "namespaceSelector"); !found {
		t.Errorf("no namespaceSelector keeping kube-system out")
	}
}

// TestKueueWebhooksFollowRegistry: Kueue's webhooks for its own objects and the registry's job
// kinds stay; those of integrations kueuelab does not enable go.
func TestKueueWebhooksFollowRegistry(t *testing.T) {
	rule := func(group, resource string) map[string]any {
		return map[string]any{"rules": []any{map[string]any{"apiGroups": []any{group}, "resources": []any{resource}}}}
	}
	tests := []struct {
		hook map[string]any
		want bool
	}{
		{rule("kueue.x-k8s.io", "workloads"), true},
		{rule("kueue.x-k8s.io", "workloads/status"), true},
		{rule("batch", "jobs"), true},
		{rule("ray.io", "rayjobs"), true},
		{rule("trainer.kubeflow.org", "trainjobs"), true},
		{rule("", "pods"), false},
		{rule("apps", "deployments"), false},
		{rule("kubeflow.org", "paddlejobs"), false},
		{map[string]any{}, false},
	}
	for _, tc := range tests {
		if got := kueueWebhookNeeded(tc.hook); got != tc.want {
			t.Errorf("%v: kept %v, want %v", tc.hook, got, tc.want)
		}
	}
}

// TestPortsFollowRegistry: every component has distinct ports inside the block, and the first
// operators keep the offsets they had before the registry (running clusters stay reachable).
func TestPortsFollowRegistry(t *testing.T) {
	const base = 20000
	p := PortsFrom(base)
	seen := map[int]bool{}
	for _, port := range p.all() {
		if seen[port] || port < base || port >= base+NumPorts() {
			t.Errorf("port %d duplicated or outside [%d, %d)", port, base, base+NumPorts())
		}
		seen[port] = true
	}
	if len(seen) != NumPorts() {
		t.Errorf("%d ports, NumPorts says %d", len(seen), NumPorts())
	}
	for op, want := range map[string]map[string]int{
		"jobset":            {"webhook": base + 10, "health": base + 11, "metrics": base + 12},
		"training-operator": {"webhook": base + 13, "health": base + 14, "metrics": base + 15},
		"mpi-operator":      {"health": base + 16},
	} {
		for name, port := range want {
			if got := p.Operators[op][name]; got != port {
				t.Errorf("%s %s port %d, want %d", op, name, got, port)
			}
		}
	}
	for _, name := range Components() {
		if _, infra := map[string]bool{Etcd: true, APIServer: true, ControllerManager: true, Scheduler: true, KWOK: true, Kueue: true}[name]; !infra && len(p.Operators[name]) == 0 {
			t.Errorf("component %s has no ports", name)
		}
	}
}
