package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/realnode"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// A bare cluster with a real node is a user's cluster as kind has it: Kueue runs as its
// Deployment and kube-scheduler as a static pod on the real node, not as processes, so
// `cluster install` and `run --kubeconfig` find them as they find them on kind and reach their
// metrics through port-forwards to their pods (the kubelet's streaming API). The images come
// from the tools cache, the same binaries the processes run.

// kindMode reports whether Kueue and kube-scheduler run as pods on the real node.
func (s *State) kindMode() bool { return s.Bare && s.RealNode }

const (
	kueueWebhookService = "kueue-webhook-service"
	kueueWebhookSecret  = "kueue-webhook-server-cert"
	kueueServiceAccount = "kueue-controller-manager"
	// Ports of Kueue in its pod, as its manifests have them.
	kueuePodWebhookPort = 9443
	kueuePodMetricsPort = 8443
	kueuePodHealthPort  = 8081
	// schedulerPodPort is kube-scheduler's secure port in the node's network namespace.
	schedulerPodPort = 10259
	// nodeConfigDir is where the scheduler's static pod mounts its files.
	nodeConfigDir = "/etc/kueuelab"
)

// podKueueConfig is Kueue's Configuration for its pod: the local one with the addresses of its
// manifests (webhook on 9443 with its certificate where its rotator writes it, metrics on :8443,
// health on :8081).
func (s *State) podKueueConfig(extra map[string]any) (map[string]any, error) {
	cfg, err := s.kueueConfig(extra)
	if err != nil {
		return nil, err
	}
	cfg["health"] = map[string]any{"healthProbeBindAddress": ":" + strconv.Itoa(kueuePodHealthPort)}
	cfg["metrics"] = map[string]any{"bindAddress": ":" + strconv.Itoa(kueuePodMetricsPort)}
	cfg["webhook"] = map[string]any{"port": kueuePodWebhookPort}
	return cfg, nil
}

// componentImage writes the image of one tools-cache binary to the node's image dir, again
// only when the binary changed, and returns its archive and reference.
func (s *State) componentImage(name, version, bin string) (string, string, error) {
	sp, err := image.Component(name, version, bin, 1)
	if err != nil {
		return "", "", err
	}
	archive := filepath.Join(s.path("node"), "images", name+".tar")
	return archive, sp.Ref, cachedImage(archive, sp, bin)
}

// cachedImage writes spec to archive unless the archive there was written from the same binary
// (path, size, time) and reference.
func cachedImage(archive string, sp image.Spec, bin string) error {
	st, err := os.Stat(bin)
	if err != nil {
		return err
	}
	source := fmt.Sprintf("%s %d %d %s\n", bin, st.Size(), st.ModTime().UnixNano(), sp.Ref)
	if b, err := os.ReadFile(archive + ".source"); err == nil && string(b) == source {
		if _, err := os.Stat(archive); err == nil {
			return nil
		}
	}
	if _, err := image.Write(archive, sp, image.OCI); err != nil {
		return err
	}
	return os.WriteFile(archive+".source", []byte(source), 0o644)
}

// schedulerStaticPod writes kube-scheduler's static pod and the files it mounts (its
// configuration, a kubeconfig to the API server through the host end of the node's veth, its
// client certificate) and returns the image archive the node loads and the manifests dir.
func (u *upper) schedulerStaticPod(n realnode.Network) (archive, manifests string, err error) {
	s := u.s
	bins, err := tools.Locate(s.BinDir, tools.Pinned())
	if err != nil {
		return "", "", err
	}
	archive, ref, err := s.componentImage("kube-scheduler", tools.KubernetesVersion, bins[Scheduler])
	if err != nil {
		return "", "", err
	}
	dir := s.path("node", "scheduler")
	manifests = s.path("node", "manifests")
	for _, d := range []string{dir, manifests} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", "", err
		}
	}
	pkiDir := s.path("pki")
	for _, f := range []string{"ca.crt", "real-node-kube-scheduler.crt", "real-node-kube-scheduler.key"} {
		b, err := os.ReadFile(filepath.Join(pkiDir, f))
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			return "", "", err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: "https://" + n.HostIP + ":" + strconv.Itoa(s.Ports.APIServer),
		TLSServerName: "kubernetes", CertificateAuthority: nodeConfigDir + "/ca.crt"}
	kc.AuthInfos["scheduler"] = &clientcmdapi.AuthInfo{ClientCertificate: nodeConfigDir + "/real-node-kube-scheduler.crt",
		ClientKey: nodeConfigDir + "/real-node-kube-scheduler.key"}
	kc.Contexts["scheduler"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "scheduler"}
	kc.CurrentContext = "scheduler"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(dir, "kubeconfig")); err != nil {
		return "", "", err
	}
	// The cluster's scheduler configuration, with the pod's kubeconfig.
	b, err := os.ReadFile(s.path("config", schedulerConfigFile))
	if err != nil {
		return "", "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return "", "", fmt.Errorf("%s: %w", schedulerConfigFile, err)
	}
	cc, _ := cfg["clientConnection"].(map[string]any)
	if cc == nil {
		cc = map[string]any{}
	}
	cc["kubeconfig"] = nodeConfigDir + "/kubeconfig"
	cfg["clientConnection"] = cc
	if b, err = yaml.Marshal(cfg); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), b, 0o644); err != nil {
		return "", "", err
	}
	// As kubeadm's: host network, root, in kube-system with component=kube-scheduler.
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"component": "kube-scheduler", "tier": "control-plane"}},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			SecurityContext:   &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0)},
			Containers: []corev1.Container{{
				Name: "kube-scheduler", Image: ref, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/usr/local/bin/kube-scheduler", "--config=" + nodeConfigDir + "/config.yaml",
					"--authentication-kubeconfig=" + nodeConfigDir + "/kubeconfig", "--authorization-kubeconfig=" + nodeConfigDir + "/kubeconfig",
					"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(schedulerPodPort)},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: nodeConfigDir, ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: dir, Type: ptr.To(corev1.HostPathDirectory)}}}},
		},
	}
	if b, err = yaml.Marshal(pod); err != nil {
		return "", "", err
	}
	return archive, manifests, os.WriteFile(filepath.Join(manifests, "kube-scheduler.yaml"), b, 0o644)
}

// kueueDeployment is Kueue as its manifests install it, on the real node: its ServiceAccount
// (bound to cluster-admin: kueuelab carries Kueue's CRDs and webhooks but not its kustomize
// RBAC), webhook Service and Deployment, reading its Configuration from the ConfigMap
// kueue-system/kueue-manager-config.
func kueueDeployment(ref string) []client.Object {
	ns := cluster.KueueNamespace
	labels := map[string]string{"control-plane": "controller-manager", "app.kubernetes.io/name": "kueue"}
	return []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kueueServiceAccount}},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "kueue-controller-manager"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: kueueServiceAccount}}},
		&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kueueWebhookService},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https", Port: 443,
				TargetPort: intstr.FromInt32(kueuePodWebhookPort)}}}},
		&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kueue-controller-manager", Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](1),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						ServiceAccountName: kueueServiceAccount,
						NodeSelector:       map[string]string{realnode.Label: "true"},
						Tolerations:        []corev1.Toleration{{Key: realnode.TaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
						SecurityContext:    &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
						Containers: []corev1.Container{{
							Name: "manager", Image: ref, ImagePullPolicy: corev1.PullNever,
							Command: []string{"/usr/local/bin/kueue", "--config=/controller_manager_config.yaml", "--zap-log-level=2"},
							Ports: []corev1.ContainerPort{{Name: "webhook-server", ContainerPort: kueuePodWebhookPort},
								{Name: "metrics", ContainerPort: kueuePodMetricsPort}, {Name: "health", ContainerPort: kueuePodHealthPort}},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz",
								Port: intstr.FromInt32(kueuePodHealthPort)}}, PeriodSeconds: 2},
							LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
								Port: intstr.FromInt32(kueuePodHealthPort)}}, InitialDelaySeconds: 15},
							VolumeMounts: []corev1.VolumeMount{
								{Name: "manager-config", MountPath: "/controller_manager_config.yaml", SubPath: cluster.KueueConfigKey},
								// The rotator keeps the certificate in the Secret; the webhook server
								// reads it where the Secret is mounted, controller-runtime's default
								// certificate directory.
								{Name: "cert", MountPath: "/tmp/k8s-webhook-server/serving-certs", ReadOnly: true},
							},
						}},
						Volumes: []corev1.Volume{
							{Name: "manager-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
								LocalObjectReference: corev1.LocalObjectReference{Name: "kueue-manager-config"}}}},
							{Name: "cert", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: kueueWebhookSecret}}},
						},
					},
				},
			},
		},
	}
}

// awaitKueuePod waits until Kueue's Deployment has a ready pod with the current template.
func awaitKueuePod(ctx context.Context, c client.Client, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: cluster.KueueNamespace, Name: "kueue-controller-manager"}, &d); err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("%d of 1 ready, %d updated", d.Status.ReadyReplicas, d.Status.UpdatedReplicas)
		return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1 &&
			d.Status.Replicas == 1, nil
	})
	if err != nil {
		return fmt.Errorf("deployment kueue-system/kueue-controller-manager: %s: %w", last, err)
	}
	return nil
}
