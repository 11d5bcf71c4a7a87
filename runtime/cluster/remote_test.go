package cluster

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/results"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

// kueueInstall is Kueue as its release manifests install it: the Deployment mounting the
// ConfigMap with its Configuration, one running pod.
func kueueInstall(ns, config string, pods ...string) []runtime.Object {
	labels := map[string]string{"control-plane": "controller-manager"}
	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kueueDeployment}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "manager", Image: "registry.k8s.io/kueue/kueue:v0.19.2",
					Args: []string{"--config=/controller_manager_config.yaml", "--zap-log-level=2"}}},
				Volumes: []corev1.Volume{{Name: "manager-config", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "my-kueue-config"}}}}},
			}},
		}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-kueue-config"}, Data: map[string]string{KueueConfigKey: config}},
	}
	for _, p := range pods {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p, Labels: labels},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	return objs
}

const kueueV1beta2 = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
metrics:
  bindAddress: :8999
leaderElection:
  leaderElect: true
  resourceName: my-lease
integrations:
  frameworks: ["batch/job", "jobset.x-k8s.io/jobset"]
waitForPodsReady:
  timeout: 10m
  requeuingStrategy: {backoffBaseSeconds: 30}
`

func TestFindKueuePod(t *testing.T) {
	for _, tc := range []struct {
		name       string
		objs       []runtime.Object
		want       podPort
		wantErr    string
		frameworks []string
	}{
		{name: "manifests, one replica", objs: kueueInstall("kueue-system", kueueV1beta2, "kueue-a"),
			want: podPort{"kueue-system", "kueue-a", 8999}, frameworks: []string{"batch/job", "jobset.x-k8s.io/jobset"}},
		{name: "default port", objs: kueueInstall("kueue", "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n", "k1"),
			want: podPort{"kueue", "k1", 8443}},
		{name: "two replicas: the lease holder", objs: append(kueueInstall("kueue-system", kueueV1beta2, "kueue-a", "kueue-b"),
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kueue-system", Name: "my-lease"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kueue-b_1234")}}),
			want: podPort{"kueue-system", "kueue-b", 8999}},
		{name: "no deployment", wantErr: "no Deployment kueue-controller-manager"},
		{name: "no running pod", objs: kueueInstall("kueue-system", kueueV1beta2), wantErr: "no running pod"},
		{name: "bad bind address", objs: kueueInstall("kueue-system", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nmetrics: {bindAddress: nope}\n", "k"),
			wantErr: `metrics.bindAddress "nope"`},
		{name: "not a configuration", objs: kueueInstall("kueue-system", "kind: Pod\n", "k"), wantErr: "want config.kueue.x-k8s.io Configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			got, err := findKueuePod(t.Context(), cs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.frameworks != nil {
				k, err := InspectKueue(t.Context(), cs)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Join(k.Config.Frameworks, ",") != strings.Join(tc.frameworks, ",") || k.Version() != "v0.19.2" {
					t.Errorf("frameworks %v version %q", k.Config.Frameworks, k.Version())
				}
				if !strings.Contains(k.ConfigSource, "my-kueue-config") {
					t.Errorf("config source %q", k.ConfigSource)
				}
			}
		})
	}
}

// TestParseKueueConfig: the Configuration as Kueue v0.19.2 runs it: waitForPodsReady on by
// default in v1beta2 (off with the DisableWaitForPodsReady gate, from the file or the manager's
// flag), recoveryTimeout = timeout, v0.19's client rate, and a v1beta1 file converted as Kueue does.
func TestParseKueueConfig(t *testing.T) {
	for _, tc := range []struct {
		name, doc  string
		gates      map[string]bool
		want       *RemoteWaitForPodsReady
		qps, burst float64
	}{
		{"v1beta2 block", kueueV1beta2, nil,
			&RemoteWaitForPodsReady{Timeout: 10 * time.Minute, RecoveryTimeout: 10 * time.Minute, BackoffBase: 30 * time.Second, BackoffMax: time.Hour}, 300, 500},
		{"v1beta2 without the block: Kueue v0.19's default", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n", nil,
			&RemoteWaitForPodsReady{Timeout: 30 * time.Minute, RecoveryTimeout: 30 * time.Minute, BackoffBase: time.Minute, BackoffMax: time.Hour, Default: true}, 300, 500},
		{"turned off by the file's gate", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfeatureGates: {DisableWaitForPodsReady: true}\nclientConnection: {qps: 50, burst: 100}\n", nil,
			nil, 50, 100},
		{"turned off by the manager's flag", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n", map[string]bool{"DisableWaitForPodsReady": true},
			nil, 300, 500},
		{"recovery off", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady: {timeout: 5m, recoveryTimeout: 0s, blockAdmission: true}\n", nil,
			&RemoteWaitForPodsReady{Timeout: 5 * time.Minute, BackoffBase: time.Minute, BackoffMax: time.Hour, BlockAdmission: true}, 300, 500},
		{"v1beta1 without enable", "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady: {timeout: 1m}\n", nil, nil, 300, 500},
		{"v1beta1 enabled, its defaults", "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady: {enable: true, recoveryTimeout: 3m}\n", nil,
			&RemoteWaitForPodsReady{Timeout: 5 * time.Minute, RecoveryTimeout: 3 * time.Minute, BackoffBase: time.Minute, BackoffMax: time.Hour, BlockAdmission: true}, 300, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseKueueConfig([]byte(tc.doc), tc.gates)
			if err != nil {
				t.Fatal(err)
			}
			if (s.WaitForPodsReady == nil) != (tc.want == nil) || (tc.want != nil && *s.WaitForPodsReady != *tc.want) {
				t.Errorf("got %+v, want %+v", s.WaitForPodsReady, tc.want)
			}
			if float64(s.ClientQPS) != tc.qps || float64(s.ClientBurst) != tc.burst {
				t.Errorf("clientConnection %g/%d, want %g/%g", s.ClientQPS, s.ClientBurst, tc.qps, tc.burst)
			}
		})
	}
}

// TestInspectKueueFlagGates: the manager's --feature-gates count, over the file's.
func TestInspectKueueFlagGates(t *testing.T) {
	objs := kueueInstall("kueue-system", "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n", "k")
	d := objs[0].(*appsv1.Deployment)
	d.Spec.Template.Spec.Containers[0].Args = append(d.Spec.Template.Spec.Containers[0].Args, "--feature-gates=DisableWaitForPodsReady=true,TopologyAwareScheduling=false")
	k, err := InspectKueue(t.Context(), fake.NewClientset(objs...))
	if err != nil {
		t.Fatal(err)
	}
	if k.Config.WaitForPodsReady != nil || !strings.Contains(k.Config.Describe(), "waitForPodsReady off (feature gate DisableWaitForPodsReady)") {
		t.Errorf("settings %s", k.Config.Describe())
	}
	d.Spec.Template.Spec.Containers[0].Args = []string{"--feature-gates=DisableWaitForPodsReady"}
	if _, err := InspectKueue(t.Context(), fake.NewClientset(objs...)); err == nil || !strings.Contains(err.Error(), "want Name=true") {
		t.Errorf("malformed gates: %v", err)
	}
}

// TestReplayMeta: what a replay on the cluster records of its Kueue.
func TestReplayMeta(t *testing.T) {
	k, err := InspectKueue(t.Context(), fake.NewClientset(kueueInstall("kueue-system", kueueV1beta2, "k")...))
	if err != nil {
		t.Fatal(err)
	}
	m := k.ReplayMeta("v0.19.2")
	if m.Version != "v0.19.2" || m.ClientQPS != 300 || m.ClientBurst != 500 || m.Clock != results.ClockWall || !strings.Contains(m.Source, "my-kueue-config") {
		t.Errorf("meta %+v", m)
	}
	if w := m.WaitForPodsReady; w == nil || w.TimeoutSec != 600 || w.RecoveryTimeoutSec != 600 || w.BackoffBaseSec != 30 || w.BackoffMaxSec != 3600 {
		t.Errorf("waitForPodsReady %+v", w)
	}
	if m := (&RemoteKueue{}).ReplayMeta(""); m.WaitForPodsReady != nil || m.Source != "" {
		t.Errorf("no configuration: %+v", m)
	}
}

func TestKueueVersionProblem(t *testing.T) {
	for v, ok := range map[string]bool{"v0.19.2": true, "v0.19.0": true, "v0.19.3-rc.1": true, "v0.18.3": false, "v0.15.0": false, "v0.20.0": false, "main": false, "": false} {
		p := KueueVersionProblem(v, "its kueue_build_info")
		if (p == "") != ok {
			t.Errorf("%q: problem %q", v, p)
		}
		if !ok && !strings.Contains(p, "kueuelab supports Kueue v0.19.x") {
			t.Errorf("%q: %q does not name the supported versions", v, p)
		}
	}
}

func TestFindSchedulerPod(t *testing.T) {
	sched := func(name, node string, args ...string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Labels: map[string]string{"component": "kube-scheduler"}},
			Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "kube-scheduler", Command: append([]string{"kube-scheduler"}, args...)}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		want    podPort
		wantErr string
	}{
		{name: "kind", objs: []runtime.Object{sched("kube-scheduler-kind-control-plane", "kind-control-plane", "--bind-address=127.0.0.1")},
			want: podPort{"kube-system", "kube-scheduler-kind-control-plane", 10259}},
		{name: "secure port", objs: []runtime.Object{sched("s", "n", "--secure-port=11259")}, want: podPort{"kube-system", "s", 11259}},
		{name: "HA: the lease holder's node", objs: []runtime.Object{sched("s1", "cp1"), sched("s2", "cp2"),
			&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("cp2_5e0b")}}},
			want: podPort{"kube-system", "s2", 10259}},
		{name: "managed control plane", wantErr: "give its metrics URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findSchedulerPod(t.Context(), fake.NewClientset(tc.objs...))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v (%v), want %+v", got, err, tc.want)
			}
		})
	}
}

// TestBearerReader: the reader sends the token, renews it once on 401, and reconnects once when
// the server cannot be reached.
func TestBearerReader(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "kueue_build_info{git_version=\"v0.15.0\"} 1\n")
	}))
	defer srv.Close()
	toks := []string{"stale", "fresh"}
	ts := &tokenSource{fetch: func(context.Context) (string, error) { tok := toks[0]; toks = toks[1:]; return tok, nil }}
	dead := "https://127.0.0.1:1/metrics"
	u := dead
	reconnects := 0
	read := bearerReader(ts, metricsHTTPClient(), func(context.Context) (string, error) { return u, nil },
		func(context.Context) error { reconnects++; u = srv.URL + "/metrics"; return nil })
	v, err := buildVersion(t.Context(), read, "kueue_build_info", "git_version")
	if err != nil || v != "v0.15.0" {
		t.Fatalf("version %q, %v", v, err)
	}
	if reconnects != 1 || calls.Load() != 2 {
		t.Errorf("%d reconnects, %d calls; want 1 reconnect, a 401 then a success", reconnects, calls.Load())
	}
	if _, err := buildVersion(t.Context(), read, "kubernetes_build_info", "git_version"); err == nil || !strings.Contains(err.Error(), "not the component expected") {
		t.Errorf("wrong component: %v", err)
	}
}
