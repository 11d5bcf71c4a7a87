// Package realnode runs one real Kubernetes node beside a local control plane: containerd, runc
// and the CNI plugins from the host's packages, a kubelet and kube-proxy, all in a mount and a
// network namespace of their own, so that everything they mount, every iptables rule they write
// and every sysctl of the network they set lives and dies with the node. The host keeps one
// veth, one route to the node's pods and one NAT rule that brings the node's API traffic to the
// loopback API server.
//
// The node is one process to its supervisor (Run): it sets up the host side, starts itself again
// inside the namespaces (the node's init, a child subreaper), and on SIGTERM stops the kubelet,
// kube-proxy, every container and containerd, then removes what it put on the host. A component
// that exits takes the node down with it, as a reboot would; the supervisor starts it again.
package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Label and taint of the node: only pods that tolerate the taint run there, so pods rendered for
// KWOK nodes never land on it and the node runs what is meant for a real kubelet.
const (
	Label    = "kueuelab.io/real-node"
	TaintKey = "kueuelab.io/real-node"
)

// Ports the node serves in its own network namespace (upstream's defaults: nothing else listens
// there).
const (
	KubeletPort        = 10250
	kubeletHealthzPort = 10248
	proxyHealthzPort   = 10256
	proxyMetricsPort   = 10249
)

// Config is everything the node needs, written by the cluster as JSON and read by the node's
// process (Run) on every start.
type Config struct {
	// Name is the Node's name.
	Name string `json:"name"`
	// Dir holds the node's files: configs, containerd's root and state, the kubelet's root, the
	// directories mounted over the host's /var/log, /var/lib and /run inside the node.
	Dir string `json:"dir"`
	// LogDir receives containerd.log, kubelet.log and kube-proxy.log, prefixed LogPrefix.
	LogDir    string `json:"logDir"`
	LogPrefix string `json:"logPrefix"`
	// Kubelet and KubeProxy are the binaries (tools.NodeSet).
	Kubelet   string `json:"kubelet"`
	KubeProxy string `json:"kubeProxy"`
	// Containerd and Ctr are the host's containerd; CNIBinDir holds the bridge, host-local and
	// loopback plugins.
	Containerd string `json:"containerd"`
	Ctr        string `json:"ctr"`
	CNIBinDir  string `json:"cniBinDir"`
	// APIServerPort is the local API server's port on 127.0.0.1; the node reaches it as
	// Network.HostIP:APIServerPort, NATed to loopback by the host.
	APIServerPort int `json:"apiServerPort"`
	// CACert is the cluster CA (the API server's serving certificate and every client's).
	CACert string `json:"caCert"`
	// NodeCert/NodeKey are the kubelet's client credentials (CN system:node:<Name>, O
	// system:nodes); ProxyCert/ProxyKey kube-proxy's (CN system:kube-proxy).
	NodeCert  string `json:"nodeCert"`
	NodeKey   string `json:"nodeKey"`
	ProxyCert string `json:"proxyCert"`
	ProxyKey  string `json:"proxyKey"`
	// SandboxImage is the pause image's reference; Images are the image archives imported into
	// containerd's k8s.io namespace at every start (the pause image's among them).
	SandboxImage string   `json:"sandboxImage"`
	Images       []string `json:"images"`
	// StaticPodPath, when set, is the directory of static pod manifests the kubelet runs (a
	// kube-scheduler, as kind's control-plane node runs one).
	StaticPodPath string `json:"staticPodPath,omitempty"`
	// CgroupRoot is the cgroup (in every hierarchy) the kubelet puts its pods under.
	CgroupRoot string `json:"cgroupRoot"`
	// Network is the node's addressing on the host.
	Network Network `json:"network"`
}

// Network is one node's addresses: a /30 between the host and the node's namespace, a /24 for
// its pods behind the node's bridge, and the names of what the host side creates.
type Network struct {
	Index   int    `json:"index"`
	HostIP  string `json:"hostIP"`
	NodeIP  string `json:"nodeIP"`
	PodCIDR string `json:"podCIDR"`
	// Gateway is the bridge's address in PodCIDR.
	Gateway string `json:"gateway"`
	// HostIf and NodeIf are the two ends of the veth; Chain is the host's NAT chain.
	HostIf string `json:"hostIf"`
	NodeIf string `json:"nodeIf"`
	Chain  string `json:"chain"`
}

// NetworkFor lays out node index (0..254): 10.87.<i>.0/30 between host and node, 10.88.<i>.0/24
// for the pods. Neither range meets the local cluster's service range (10.0.0.0/24) or KWOK's
// fake pod range (10.244.0.0/16), and different indexes never overlap, so two clusters can each
// have a node.
func NetworkFor(index int) (Network, error) {
	if index < 0 || index > 254 {
		return Network{}, fmt.Errorf("real node index %d: want 0..254", index)
	}
	i := strconv.Itoa(index)
	return Network{
		Index:   index,
		HostIP:  "10.87." + i + ".1",
		NodeIP:  "10.87." + i + ".2",
		PodCIDR: "10.88." + i + ".0/24",
		Gateway: "10.88." + i + ".1",
		HostIf:  "klab" + i + "-host",
		NodeIf:  "klab" + i + "-node",
		Chain:   "KUEUELAB-NODE-" + i,
	}, nil
}

// IndexFor is the node index of a cluster whose loopback port block starts at portBase: the
// blocks are 100 ports apart, so clusters that can run side by side get different indexes.
func IndexFor(portBase int) int { return (portBase / 100) % 250 }

// linkPrefix is the veth's prefix length.
const linkPrefix = 30

func (c *Config) validate() error {
	for _, f := range []struct{ name, v string }{{"name", c.Name}, {"dir", c.Dir}, {"kubelet", c.Kubelet}, {"kubeProxy", c.KubeProxy},
		{"containerd", c.Containerd}, {"ctr", c.Ctr}, {"cniBinDir", c.CNIBinDir}, {"caCert", c.CACert}, {"nodeCert", c.NodeCert},
		{"nodeKey", c.NodeKey}, {"proxyCert", c.ProxyCert}, {"proxyKey", c.ProxyKey}, {"sandboxImage", c.SandboxImage}, {"cgroupRoot", c.CgroupRoot}} {
		if f.v == "" {
			return fmt.Errorf("real node config: %s is empty", f.name)
		}
	}
	if c.APIServerPort <= 0 || c.APIServerPort > 65535 {
		return fmt.Errorf("real node config: apiServerPort %d", c.APIServerPort)
	}
	for _, ip := range []string{c.Network.HostIP, c.Network.NodeIP, c.Network.Gateway} {
		if net.ParseIP(ip) == nil {
			return fmt.Errorf("real node config: network address %q", ip)
		}
	}
	if _, _, err := net.ParseCIDR(c.Network.PodCIDR); err != nil {
		return fmt.Errorf("real node config: podCIDR: %w", err)
	}
	// Cleanup kills every process in the cgroup and removes it: it must be the node's own.
	if !cgroupName.MatchString(c.CgroupRoot) {
		return fmt.Errorf("real node config: cgroupRoot %q: want kueuelab-<name>", c.CgroupRoot)
	}
	if !strings.HasPrefix(c.Network.Chain, "KUEUELAB-NODE-") {
		return fmt.Errorf("real node config: chain %q: want KUEUELAB-NODE-<index>", c.Network.Chain)
	}
	for _, ifc := range []string{c.Network.HostIf, c.Network.NodeIf} {
		if ifc == "" || len(ifc) > 15 {
			return fmt.Errorf("real node config: interface name %q: want 1 to 15 bytes", ifc)
		}
	}
	// Inside the node these are other directories (mountNodeFS): the node would not find files
	// kept there.
	for _, f := range []struct{ name, v string }{{"dir", c.Dir}, {"logDir", c.LogDir}, {"kubelet", c.Kubelet}, {"kubeProxy", c.KubeProxy},
		{"caCert", c.CACert}, {"nodeCert", c.NodeCert}, {"nodeKey", c.NodeKey}, {"proxyCert", c.ProxyCert}, {"proxyKey", c.ProxyKey}} {
		if !filepath.IsAbs(f.v) {
			return fmt.Errorf("real node config: %s %q is not an absolute path", f.name, f.v)
		}
		for _, hidden := range nodePrivateDirs {
			if f.v == hidden || strings.HasPrefix(f.v, hidden+"/") {
				return fmt.Errorf("real node config: %s %s is under %s, which the node replaces with a directory of its own: keep the cluster's state and the tools elsewhere (XDG_STATE_HOME, XDG_CACHE_HOME)", f.name, f.v, hidden)
			}
		}
	}
	if c.StaticPodPath != "" && !filepath.IsAbs(c.StaticPodPath) {
		return fmt.Errorf("real node config: staticPodPath %q is not an absolute path", c.StaticPodPath)
	}
	for _, img := range c.Images {
		if !filepath.IsAbs(img) {
			return fmt.Errorf("real node config: image %q is not an absolute path", img)
		}
	}
	return nil
}

// nodePrivateDirs are the host directories the node sees as its own (mountNodeFS).
var nodePrivateDirs = []string{"/var/log", "/var/lib", "/run"}

var cgroupName = regexp.MustCompile(`^kueuelab-[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// WriteConfig writes c as JSON to path.
func WriteConfig(path string, c *Config) error {
	if err := c.validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadConfig reads a Config WriteConfig wrote.
func ReadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("real node config: %w", err)
	}
	c := &Config{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("real node config %s: %w", path, err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Paths inside Dir.
func (c *Config) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func (c *Config) socket() string      { return c.path("containerd", "containerd.sock") }
func (c *Config) startedFile() string { return c.path("started") }
func (c *Config) logFile(n string) string {
	return filepath.Join(c.LogDir, c.LogPrefix+n+".log")
}
