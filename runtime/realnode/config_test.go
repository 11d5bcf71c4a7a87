package realnode

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"
)

func testConfig(t *testing.T) *Config {
	t.Helper()
	n, err := NetworkFor(164)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &Config{Name: "real-node", Dir: dir, LogDir: dir, LogPrefix: "real-node-", Kubelet: "/bin/kubelet", KubeProxy: "/bin/kube-proxy",
		Containerd: "/usr/bin/containerd", Ctr: "/usr/bin/ctr", CNIBinDir: "/usr/lib/cni", APIServerPort: 16403, CACert: "/pki/ca.crt",
		NodeCert: "/pki/n.crt", NodeKey: "/pki/n.key", ProxyCert: "/pki/p.crt", ProxyKey: "/pki/p.key",
		SandboxImage: "ghcr.io/kueuelab/kueuelab:pause", Images: []string{"/i/pause.tar"}, CgroupRoot: "kueuelab-default", Network: n}
}

func TestNetworkFor(t *testing.T) {
	for _, tc := range []struct {
		index   int
		wantErr bool
	}{{0, false}, {164, false}, {254, false}, {-1, true}, {255, true}} {
		n, err := NetworkFor(tc.index)
		if (err != nil) != tc.wantErr {
			t.Fatalf("NetworkFor(%d): err %v, want error %v", tc.index, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		_, link, _ := net.ParseCIDR(n.HostIP + "/30")
		if !link.Contains(net.ParseIP(n.NodeIP)) || n.HostIP == n.NodeIP {
			t.Errorf("index %d: host %s and node %s not two ends of one /30", tc.index, n.HostIP, n.NodeIP)
		}
		_, pods, err := net.ParseCIDR(n.PodCIDR)
		if err != nil || !pods.Contains(net.ParseIP(n.Gateway)) {
			t.Errorf("index %d: gateway %s outside pods %s (%v)", tc.index, n.Gateway, n.PodCIDR, err)
		}
		// Neither the local cluster's service range nor KWOK's fake pod addresses.
		for _, other := range []string{"10.0.0.0/24", "10.244.0.0/16"} {
			_, o, _ := net.ParseCIDR(other)
			if o.Contains(pods.IP) || pods.Contains(o.IP) || o.Contains(net.ParseIP(n.HostIP)) {
				t.Errorf("index %d: %s or %s overlaps %s", tc.index, n.PodCIDR, n.HostIP, other)
			}
		}
		// Linux interface names have at most 15 bytes.
		for _, ifc := range []string{n.HostIf, n.NodeIf} {
			if len(ifc) > 15 {
				t.Errorf("interface name %q longer than 15", ifc)
			}
		}
	}
}

// Every port block a cluster can get by name (localcluster.PortBaseFor: 16400 + 100·k, k = 0..90)
// has its own node index.
func TestIndexForDistinctBlocks(t *testing.T) {
	seen := map[int]int{}
	for k := 0; k <= 90; k++ {
		base := 16400 + 100*k
		i := IndexFor(base)
		if _, err := NetworkFor(i); err != nil {
			t.Fatalf("base %d: %v", base, err)
		}
		if other, ok := seen[i]; ok {
			t.Fatalf("bases %d and %d share node index %d", other, base, i)
		}
		seen[i] = base
	}
}

func TestConfigRoundTripAndValidation(t *testing.T) {
	c := testConfig(t)
	p := filepath.Join(t.TempDir(), "node.json")
	if err := WriteConfig(p, c); err != nil {
		t.Fatal(err)
	}
	got, err := ReadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no kubelet", func(c *Config) { c.Kubelet = "" }, "kubelet is empty"},
		{"bad port", func(c *Config) { c.APIServerPort = 0 }, "apiServerPort"},
		{"bad pod range", func(c *Config) { c.Network.PodCIDR = "10.88.1.0" }, "podCIDR"},
		{"bad address", func(c *Config) { c.Network.NodeIP = "node" }, "network address"},
		// Cleanup kills and removes the cgroup: never one that is not the node's.
		{"host cgroup", func(c *Config) { c.CgroupRoot = "/" }, "cgroupRoot"},
		{"state under /var/lib", func(c *Config) { c.Dir = "/var/lib/jenkins/.local/state/kueuelab/default/node" }, "under /var/lib"},
		{"relative image", func(c *Config) { c.Images = []string{"agent.tar"} }, "not an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			tc.mutate(c)
			err := WriteConfig(filepath.Join(t.TempDir(), "x.json"), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// The files decode strictly as the upstream types the kubelet and kube-proxy read, and say what
// keeps the node off the host's settings.
func TestNodeFiles(t *testing.T) {
	c := testConfig(t)
	if err := c.writeFiles(); err != nil {
		t.Fatal(err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	b, err := os.ReadFile(c.path("kubelet", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &kc); err != nil {
		t.Fatalf("kubelet config: %v", err)
	}
	if kc.FailCgroupV1 == nil || *kc.FailCgroupV1 || !kc.ProtectKernelDefaults || kc.CgroupRoot != "/kueuelab-default" ||
		kc.Address != c.Network.NodeIP || len(kc.RegisterWithTaints) != 1 || kc.RegisterWithTaints[0].Key != TaintKey ||
		kc.ImageGCHighThresholdPercent == nil || *kc.ImageGCHighThresholdPercent != 100 {
		t.Errorf("kubelet config: %s", b)
	}
	var pc kubeproxyv1alpha1.KubeProxyConfiguration
	b, err = os.ReadFile(c.path("kube-proxy", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &pc); err != nil {
		t.Fatalf("kube-proxy config: %v", err)
	}
	if pc.IPTables.LocalhostNodePorts == nil || *pc.IPTables.LocalhostNodePorts || pc.Conntrack.MaxPerCore == nil || *pc.Conntrack.MaxPerCore != 0 ||
		pc.ClusterCIDR != c.Network.PodCIDR || pc.HostnameOverride != c.Name {
		t.Errorf("kube-proxy config: %s", b)
	}
	kcfg, err := clientcmd.LoadFromFile(c.path("kubelet", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cl := kcfg.Clusters[kcfg.Contexts[kcfg.CurrentContext].Cluster]
	if cl.Server != "https://10.87.164.1:16403" || cl.TLSServerName != "kubernetes" {
		t.Errorf("kubelet kubeconfig server %s name %s", cl.Server, cl.TLSServerName)
	}
	var cni map[string]any
	b, err = os.ReadFile(c.path("cni", "conf", "10-kueuelab.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cni); err != nil || !strings.Contains(string(b), `"10.88.164.0/24"`) {
		t.Errorf("CNI config (%v): %s", err, b)
	}
	toml, err := os.ReadFile(c.path("containerd", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`sandbox_image = "ghcr.io/kueuelab/kueuelab:pause"`, `restrict_oom_score_adj = true`,
		`address = "` + c.socket() + `"`, `conf_dir = "` + c.path("cni", "conf") + `"`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("containerd config lacks %s:\n%s", want, toml)
		}
	}
}

func TestChildrenOfParsesStat(t *testing.T) {
	// This process's parent has this process among its children.
	kids := childrenOf(os.Getppid())
	found := false
	for _, k := range kids {
		found = found || k == os.Getpid()
	}
	if !found {
		t.Fatalf("childrenOf(%d) = %v, lacks %d", os.Getppid(), kids, os.Getpid())
	}
}
