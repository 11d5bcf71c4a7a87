package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	componentbasev1alpha1 "k8s.io/component-base/config/v1alpha1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The files the node's components read, all under Dir, rewritten at every start.

// apiServerName is the name the node's clients verify the API server's certificate against:
// they dial the host end of the veth, an address the certificate does not carry.
const apiServerName = "kubernetes"

// containerdConfig is containerd 1.6's configuration (version 2). Everything it writes stays
// under Dir; restrict_oom_score_adj because a sandbox's oom_score_adj below the runtime's own
// needs CAP_SYS_RESOURCE, which a container host may lack.
func (c *Config) containerdConfig() string {
	q := strconv.Quote
	return strings.Join([]string{
		`version = 2`,
		`root = ` + q(c.path("containerd", "root")),
		`state = ` + q(c.path("containerd", "state")),
		`[grpc]`,
		`  address = ` + q(c.socket()),
		`[ttrpc]`,
		`  address = ` + q(c.socket()+".ttrpc"),
		`[debug]`,
		`  address = ""`,
		`[metrics]`,
		`  address = ""`,
		`[plugins."io.containerd.grpc.v1.cri"]`,
		`  sandbox_image = ` + q(c.SandboxImage),
		`  restrict_oom_score_adj = true`,
		`  netns_mounts_under_state_dir = true`,
		`  enable_selinux = false`,
		`  [plugins."io.containerd.grpc.v1.cri".containerd]`,
		`    snapshotter = "overlayfs"`,
		`    default_runtime_name = "runc"`,
		`    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]`,
		`      runtime_type = "io.containerd.runc.v2"`,
		`      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]`,
		`        SystemdCgroup = false`,
		`  [plugins."io.containerd.grpc.v1.cri".cni]`,
		`    bin_dir = ` + q(c.CNIBinDir),
		`    conf_dir = ` + q(c.path("cni", "conf")),
		``,
	}, "\n")
}

// cniConfig is the pod network: a bridge with host-local addresses from PodCIDR, gateway on the
// bridge. No masquerade: pods talk to the node and, through it, to the host.
func (c *Config) cniConfig() ([]byte, error) {
	conf := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "kueuelab",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  []any{[]any{map[string]any{"subnet": c.Network.PodCIDR, "gateway": c.Network.Gateway}}},
					"routes":  []any{map[string]any{"dst": "0.0.0.0/0"}},
					"dataDir": c.path("cni", "ipam"),
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the kubelet's configuration. cgroupfs on cgroup v1 (failCgroupV1 false: the
// 1.35+ default refuses v1 hosts), kernel defaults protected rather than written (the node's
// namespace shows the kubelet the values it checks, see mountSysctls), images never collected
// (they were imported, there is no registry to pull them again).
func (c *Config) kubeletConfig() *kubeletv1beta1.KubeletConfiguration {
	return &kubeletv1beta1.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: kubeletv1beta1.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		FailCgroupV1:             ptr.To(false),
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               "/" + c.CgroupRoot,
		ContainerRuntimeEndpoint: "unix://" + c.socket(),
		ProtectKernelDefaults:    true,
		FailSwapOn:               ptr.To(false),
		Address:                  c.Network.NodeIP,
		Port:                     KubeletPort,
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		HealthzPort:              ptr.To[int32](kubeletHealthzPort),
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: c.CACert},
		},
		Authorization:               kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		ClusterDomain:               "cluster.local",
		RegisterWithTaints:          []corev1.Taint{{Key: TaintKey, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		SerializeImagePulls:         ptr.To(false),
		EvictionHard:                map[string]string{"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
		ImageGCHighThresholdPercent: ptr.To[int32](100),
		ImageGCLowThresholdPercent:  ptr.To[int32](99),
		MaxPods:                     50,
		ResolverConfig:              ptr.To(""),
		NodeStatusReportFrequency:   metav1.Duration{Duration: time.Minute},
		StaticPodPath:               c.StaticPodPath,
	}
}

// kubeProxyConfig is kube-proxy's: iptables mode in the node's namespace, no host-wide sysctl
// touched (no localhost node ports, conntrack sizes left alone).
func (c *Config) kubeProxyConfig() *kubeproxyv1alpha1.KubeProxyConfiguration {
	return &kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: kubeproxyv1alpha1.SchemeGroupVersion.String(), Kind: "KubeProxyConfiguration"},
		ClientConnection:   componentbasev1alpha1.ClientConnectionConfiguration{Kubeconfig: c.path("kube-proxy", "kubeconfig")},
		Mode:               "iptables",
		HostnameOverride:   c.Name,
		ClusterCIDR:        c.Network.PodCIDR,
		BindAddress:        c.Network.NodeIP,
		HealthzBindAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(proxyHealthzPort)),
		MetricsBindAddress: net.JoinHostPort("127.0.0.1", strconv.Itoa(proxyMetricsPort)),
		NodePortAddresses:  []string{c.Network.NodeIP + "/32"},
		IPTables: kubeproxyv1alpha1.KubeProxyIPTablesConfiguration{
			LocalhostNodePorts: ptr.To(false),
			MasqueradeAll:      false,
			SyncPeriod:         metav1.Duration{Duration: 30 * time.Second},
			MinSyncPeriod:      metav1.Duration{Duration: time.Second},
		},
		Conntrack: kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore:            ptr.To[int32](0),
			Min:                   ptr.To[int32](0),
			TCPEstablishedTimeout: &metav1.Duration{},
			TCPCloseWaitTimeout:   &metav1.Duration{},
		},
	}
}

// kubeconfig is a client configuration for the node's components: the API server through the
// host end of the veth, verified as apiServerName.
func (c *Config) kubeconfig(cert, key string) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{
		Server:               "https://" + net.JoinHostPort(c.Network.HostIP, strconv.Itoa(c.APIServerPort)),
		TLSServerName:        apiServerName,
		CertificateAuthority: c.CACert,
	}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	return cfg
}

// writeFiles writes every configuration file under Dir.
func (c *Config) writeFiles() error {
	for _, d := range []string{c.path("cni", "conf"), c.path("kubelet"), c.path("kube-proxy"), c.path("containerd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(c.path("containerd", "config.toml"), []byte(c.containerdConfig()), 0o644); err != nil {
		return err
	}
	cni, err := c.cniConfig()
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path("cni", "conf", "10-kueuelab.conflist"), cni, 0o644); err != nil {
		return err
	}
	for path, v := range map[string]any{c.path("kubelet", "config.yaml"): c.kubeletConfig(), c.path("kube-proxy", "config.yaml"): c.kubeProxyConfig()} {
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	if err := clientcmd.WriteToFile(*c.kubeconfig(c.NodeCert, c.NodeKey), c.path("kubelet", "kubeconfig")); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*c.kubeconfig(c.ProxyCert, c.ProxyKey), c.path("kube-proxy", "kubeconfig"))
}

// kubeletArgs is the kubelet's command line.
func (c *Config) kubeletArgs() []string {
	return []string{c.Kubelet, "--config=" + c.path("kubelet", "config.yaml"), "--kubeconfig=" + c.path("kubelet", "kubeconfig"),
		"--hostname-override=" + c.Name, "--node-ip=" + c.Network.NodeIP, "--node-labels=" + Label + "=true",
		"--root-dir=" + c.path("kubelet", "root"), "--cert-dir=" + c.path("kubelet", "pki"), "--v=1"}
}

func (c *Config) kubeProxyArgs() []string {
	return []string{c.KubeProxy, "--config=" + c.path("kube-proxy", "config.yaml"), "--v=1"}
}

func (c *Config) containerdArgs() []string {
	return []string{c.Containerd, "--config=" + c.path("containerd", "config.toml")}
}
