package agent

import (
	"bytes"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

const chartDir = "../../charts/kueuelab-agent"

func helm(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes()
}

// docs splits a rendered manifest stream into kind -> raw documents.
func docs(t *testing.T, out []byte) map[string][][]byte {
	t.Helper()
	m := map[string][][]byte{}
	for _, d := range strings.Split(string(out), "\n---") {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal([]byte(d), &meta); err != nil {
			t.Fatalf("rendered chart: %v\n%s", err, d)
		}
		if meta.Kind != "" {
			m[meta.Kind] = append(m[meta.Kind], []byte(d))
		}
	}
	return m
}

func TestHelmChart(t *testing.T) {
	bin := testutil.Helm(t, tools.GoBuildFlags()...)
	helm(t, bin, "lint", "--strict", chartDir)
	pods := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "patch"}}
	status := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}}
	nodes := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}
	events := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}
	for _, tc := range []struct {
		name  string
		set   []string
		rules []rbacv1.PolicyRule
		args  []string
		kinds []string
	}{
		{
			name: "defaults", rules: []rbacv1.PolicyRule{pods, status, nodes, events},
			args:  []string{"--speedup=60", "--complete-via=status", "--node-selector=type=kwok", "--metrics-addr=:9090"},
			kinds: []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "ServiceAccount"},
		},
		{
			name: "stage completion needs no pods/status", set: []string{"completeVia=stage", "speedup=600"},
			rules: []rbacv1.PolicyRule{pods, nodes, events},
			args:  []string{"--speedup=600", "--complete-via=stage"},
			kinds: []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "ServiceAccount"},
		},
		{
			name: "catalog and metrics service", set: []string{"catalog=gpus: []", "metrics.service.enabled=true", "metrics.port=9191"},
			rules: []rbacv1.PolicyRule{pods, status, nodes, events},
			args:  []string{"--catalog=/etc/kueuelab/catalog.yaml", "--metrics-addr=:9191"},
			kinds: []string{"ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "Service", "ServiceAccount"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "rel", chartDir, "--namespace", "kueuelab-system"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			m := docs(t, helm(t, bin, args...))
			var kinds []string
			for k := range m {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			if !reflect.DeepEqual(kinds, tc.kinds) {
				t.Errorf("kinds %v, want %v", kinds, tc.kinds)
			}
			var role rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(m["ClusterRole"][0], &role); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(role.Rules, tc.rules) {
				t.Errorf("ClusterRole rules (least privilege)\n got %+v\nwant %+v", role.Rules, tc.rules)
			}
			for _, r := range role.Rules {
				for _, v := range append(r.Verbs, r.Resources...) {
					if strings.Contains(v, "*") {
						t.Errorf("wildcard %q in %+v", v, r)
					}
				}
			}
			var dep appsv1.Deployment
			if err := yaml.UnmarshalStrict(m["Deployment"][0], &dep); err != nil {
				t.Fatal(err)
			}
			c := dep.Spec.Template.Spec.Containers[0]
			for _, a := range tc.args {
				if !slices.Contains(c.Args, a) {
					t.Errorf("container args %v lack %s", c.Args, a)
				}
			}
			if dep.Spec.Template.Spec.ServiceAccountName != "rel-kueuelab-agent" || *dep.Spec.Replicas != 1 {
				t.Errorf("deployment: service account %q, replicas %d", dep.Spec.Template.Spec.ServiceAccountName, *dep.Spec.Replicas)
			}
		})
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "template", "rel", chartDir, "--set", "completeVia=kubelet")
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || !strings.Contains(stderr.String(), "completeVia") {
		t.Errorf("completeVia=kubelet: err %v, stderr %s; want a failure naming completeVia", err, stderr.String())
	}
}
