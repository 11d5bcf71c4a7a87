package cluster

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

func TestCheckKueue(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kueue-system", Name: kueueDeployment}}
	all := []string{"batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob", "trainer.kubeflow.org/trainjob"}
	for _, tc := range []struct {
		name    string
		k       *RemoteKueue
		want    []string // problems, by substring
		printed string
	}{
		{name: "all enabled", k: &RemoteKueue{Deployment: dep, Image: "registry.k8s.io/kueue/kueue:v0.19.2", Config: &KueueSettings{Frameworks: all}},
			printed: "ok  Kueue v0.19.2 (Deployment kueue-system/kueue-controller-manager)"},
		{name: "another v0.19 patch release", k: &RemoteKueue{Deployment: dep, Image: "registry.k8s.io/kueue/kueue:v0.19.0", Config: &KueueSettings{Frameworks: all}},
			printed: "ok  Kueue v0.19.0"},
		{name: "v0.18 refused with the supported list", k: &RemoteKueue{Deployment: dep, Image: "registry.k8s.io/kueue/kueue:v0.18.3", Config: &KueueSettings{Frameworks: all}},
			want: []string{"Kueue v0.18.3 is running (image registry.k8s.io/kueue/kueue:v0.18.3); kueuelab supports Kueue v0.19.x"}},
		{name: "v0.15 refused", k: &RemoteKueue{Deployment: dep, Image: "registry.k8s.io/kueue/kueue:v0.15.0", Config: &KueueSettings{Frameworks: all}},
			want: []string{"Kueue v0.15.0 is running"}},
		{name: "the settings a replay carries", k: &RemoteKueue{Deployment: dep, Image: "registry.k8s.io/kueue/kueue:v0.19.2", ConfigSource: "ConfigMap kueue-system/c",
			Config: &KueueSettings{APIVersion: "config.kueue.x-k8s.io/v1beta2", Frameworks: all, ClientQPS: 300, ClientBurst: 500,
				WaitForPodsReady: &RemoteWaitForPodsReady{Timeout: 30 * time.Minute, RecoveryTimeout: 30 * time.Minute, BackoffBase: time.Minute, BackoffMax: time.Hour, Default: true}}},
			printed: "ok  Kueue configuration (ConfigMap kueue-system/c, config.kueue.x-k8s.io/v1beta2), carried into every replay: clientConnection qps 300 burst 500; waitForPodsReady timeout 30m0s, recoveryTimeout 30m0s, requeue backoff 1m0s..1h0m0s, blockAdmission false (Kueue's default"},
		{name: "mpijob missing", k: &RemoteKueue{Deployment: dep, Image: "x/kueue:v0.19.1", ConfigSource: "ConfigMap kueue-system/c",
			Config: &KueueSettings{Frameworks: []string{"batch/job", "jobset.x-k8s.io/jobset"}}},
			want:    []string{"Kueue integration kubeflow.org/mpijob is not enabled (ConfigMap kueue-system/c lists [batch/job jobset.x-k8s.io/jobset]), and the default kinds need it: MPIJob (distributed_training)"},
			printed: "--  Kueue integration kubeflow.org/pytorchjob not enabled"},
		{name: "Kueue run as a process", k: &RemoteKueue{}, printed: "integrations not checked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got := checkKueue(tc.k, &out)
			if len(got) != len(tc.want) {
				t.Fatalf("problems %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.want[i]) {
					t.Errorf("problem %q, want %q", got[i], tc.want[i])
				}
			}
			if !strings.Contains(out.String(), tc.printed) {
				t.Errorf("output lacks %q:\n%s", tc.printed, out.String())
			}
		})
	}
}

func TestCheckStagesRefusesStockPodComplete(t *testing.T) {
	stage := func(name, kind, tmpl string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name},
			"spec": map[string]any{"resourceRef": map[string]any{"kind": kind}, "next": map[string]any{"statusTemplate": tmpl}}}}
		return u
	}
	ok := []unstructured.Unstructured{stage("pod-ready", "Pod", "phase: Running"), stage("node-initialize", "Node", "phase: Succeeded"),
		stage("kueuelab-pod-complete", "Pod", "phase: Succeeded")}
	var out bytes.Buffer
	if p := checkStages(ok, &out); len(p) != 0 {
		t.Errorf("problems %v", p)
	}
	// KWOK's own pod-complete stage (kustomize/stage/pod/fast), as `kubectl apply` installs it.
	dir, err := tools.ModuleDir(t.Context(), "", tools.KWOKModule)
	if err != nil {
		t.Fatal(err)
	}
	stock, err := DecodeFiles(filepath.Join(dir, "kustomize/stage/pod/fast/pod-complete.yaml"))
	if err != nil || len(stock) != 1 {
		t.Fatalf("KWOK's pod-complete: %v", err)
	}
	p := checkStages(append(ok, *stock[0]), &out)
	if len(p) != 1 || !strings.Contains(p[0], "kubectl delete stage pod-complete") {
		t.Errorf("problems %v, want pod-complete refused", p)
	}
}

func TestDescribeSchedulers(t *testing.T) {
	pod := func(name string, cmd ...string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kube-scheduler", Image: "registry.k8s.io/kube-scheduler:v1.34.2", Command: cmd}}}}
	}
	tests := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"managed", nil, []string{"no pod labelled component=kube-scheduler", "not visible"}},
		{"kind default", []corev1.Pod{pod("kube-scheduler-kind", "kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true")},
			[]string{"kube-scheduler registry.k8s.io/kube-scheduler:v1.34.2 (pod kube-scheduler-kind)", "no --config: upstream's default profile", "flags --leader-elect=true"}},
		{"config file", []corev1.Pod{pod("kube-scheduler-cp", "kube-scheduler", "--config=/etc/kubernetes/sched.yaml")},
			[]string{"configuration file /etc/kubernetes/sched.yaml on its node"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(describeSchedulers(tc.pods), "\n")
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
		})
	}
}
