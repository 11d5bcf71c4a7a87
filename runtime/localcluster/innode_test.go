package localcluster

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// What kind mode installs is what `cluster install --kubeconfig` reads on a user's cluster:
// InspectKueue finds the Deployment, reads its version from the image tag and the Configuration
// from the ConfigMap it mounts, with the metrics port its pod serves on.
func TestKindModeKueueIsWhatInstallReads(t *testing.T) {
	s := &State{Name: "kind", Dir: t.TempDir(), Ports: PortsFrom(20400), Bare: true, RealNode: true}
	cfg, err := s.podKueueConfig(map[string]any{"waitForPodsReady": map[string]any{"enable": false}})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := kueueConfigMap(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{cm}
	for _, o := range kueueDeployment(image.ComponentRegistry + "/kueue:" + tools.KueueVersion) {
		objs = append(objs, o)
	}
	k, err := cluster.InspectKueue(t.Context(), fake.NewClientset(objs...))
	if err != nil {
		t.Fatal(err)
	}
	if k.Deployment == nil || k.Version() != tools.KueueVersion {
		t.Fatalf("Deployment %v, version %q; want Kueue's Deployment at %s", k.Deployment != nil, k.Version(), tools.KueueVersion)
	}
	if k.Config == nil || k.Config.MetricsBindAddress != ":8443" || !strings.Contains(k.ConfigSource, "kueue-manager-config") {
		t.Fatalf("configuration %+v from %q, want metrics on :8443 from kueue-manager-config", k.Config, k.ConfigSource)
	}
	// The pod serves what its Configuration says, where the Service and probes look.
	d := k.Deployment.Spec.Template.Spec
	ports := map[int32]bool{}
	for _, p := range d.Containers[0].Ports {
		ports[p.ContainerPort] = true
	}
	if !ports[kueuePodWebhookPort] || !ports[kueuePodMetricsPort] || !ports[kueuePodHealthPort] {
		t.Errorf("container ports %v", d.Containers[0].Ports)
	}
	if hook := cfg["webhook"].(map[string]any)["port"]; hook != kueuePodWebhookPort {
		t.Errorf("webhook port %v", hook)
	}
	if len(d.Tolerations) != 1 || d.NodeSelector == nil || d.Containers[0].ImagePullPolicy != corev1.PullNever {
		t.Errorf("pod placement %v %v, pull policy %s", d.NodeSelector, d.Tolerations, d.Containers[0].ImagePullPolicy)
	}
}
