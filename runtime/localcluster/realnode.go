package localcluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/runtime/hostpkg"
	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/realnode"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// A local cluster can have one real node beside its KWOK nodes (Options.RealNode): a kubelet
// with containerd in namespaces of their own (runtime/realnode), run by the supervisor as one
// component that starts last and stops first. It runs what a KWOK node cannot: the agent's and
// the runner's images as pods.
const (
	// RealNode is the node's component name.
	RealNode = "real-node"
	// RealNodeName is its Node's name.
	RealNodeName = "real-node"
)

// realNodeLivenessDelay is how long a started node has to register and renew its lease before
// its liveness probe counts (it is Ready 2–3 s after its start on an idle machine).
const realNodeLivenessDelay = time.Minute

func (s *State) realNodeConfigPath() string { return s.path("config", "real-node.json") }

// realNodeMatcher is what a node process's command line holds (see process.bin).
func (s *State) realNodeMatcher() string { return realnode.Arg + "\x00" + s.realNodeConfigPath() }

// realNodeNetwork is the cluster's node addressing, derived from its port block.
func (s *State) realNodeNetwork() (realnode.Network, error) {
	return realnode.NetworkFor(realnode.IndexFor(s.PortBase))
}

// realNodeSpec runs the node as this executable (realnode.RunIfNode, called by RunStandIn).
func (s *State) realNodeSpec(exe string) spec {
	argv, env := realnode.Command(exe, s.realNodeConfigPath())
	kube := lazyClient(s.Kubeconfig())
	started := func() time.Time {
		cfg, err := realnode.ReadConfig(s.realNodeConfigPath())
		if err != nil {
			return time.Time{}
		}
		return realnode.StartedAt(cfg)
	}
	return spec{
		process:   process{name: RealNode, bin: s.realNodeMatcher(), argv: argv, env: env},
		health:    nodeReady(kube, RealNodeName, started),
		live:      nodeLeaseFresh(kube, RealNodeName),
		liveDelay: realNodeLivenessDelay,
	}
}

// nodeReady is the node's readiness: its Node is Ready as reported since the node's process last
// started (a Node keeps the last run's Ready condition until the node controller sees its lease
// expire).
func nodeReady(kube func() (client.Client, error), name string, started func() time.Time) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := kube()
		if err != nil {
			return err
		}
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				// The API keeps whole seconds.
				if cond.Status == corev1.ConditionTrue && !cond.LastHeartbeatTime.Time.Before(started().Truncate(time.Second)) {
					return nil
				}
				if cond.Status == corev1.ConditionTrue {
					return fmt.Errorf("node %s: Ready only as of %s, before its process started", name, cond.LastHeartbeatTime.Format(time.RFC3339))
				}
				return fmt.Errorf("node %s not Ready: %s", name, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", name)
	}
}

// nodeLeaseFresh is the node's liveness: the kubelet renews its lease every 10 s; a lease older
// than its duration (40 s) is a kubelet that no longer works while its process lives. It passes
// when the API server cannot be asked, which is not the node's fault.
func nodeLeaseFresh(kube func() (client.Client, error), name string) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := kube()
		if err != nil {
			return nil
		}
		var l coordinationv1.Lease
		if err := c.Get(ctx, client.ObjectKey{Namespace: corev1.NamespaceNodeLease, Name: name}, &l); err != nil {
			return nil
		}
		if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			return fmt.Errorf("node %s: lease never renewed", name)
		}
		if age := time.Since(l.Spec.RenewTime.Time); age > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			return fmt.Errorf("node %s: lease renewed %s ago", name, age.Round(time.Second))
		}
		return nil
	}
}

// realNodeAPIServerFlags are the API server's flags for a cluster with a real node. It
// advertises the host end of the node's veth, so the `kubernetes` Service gets an endpoint the
// node's pods can reach (loopback is invalid there; the host NATs it to the loopback server);
// it reaches the kubelet (logs, exec, port-forward) by the node's InternalIP, as the admin, whose
// client certificate the kubelet verifies; and it dials webhook and aggregated Services by their
// endpoints, which the host routes to the node, rather than by ClusterIPs only the node
// translates.
func (s *State) realNodeAPIServerFlags() ([]string, error) {
	n, err := s.realNodeNetwork()
	if err != nil {
		return nil, err
	}
	pkiDir := s.path("pki")
	return []string{"--advertise-address=" + n.HostIP,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-client-certificate=" + pkiDir + "/admin.crt", "--kubelet-client-key=" + pkiDir + "/admin.key",
		"--enable-aggregator-routing=true"}, nil
}

// nodeCerts creates (once) the kubelet's and kube-proxy's client certificates.
func nodeCerts(dir string, p *pki) error {
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, c := range []struct {
		base string
		spec certSpec
	}{
		{"real-node-kubelet", certSpec{cn: "system:node:" + RealNodeName, org: []string{"system:nodes"}, parent: p.CA, valid: tenYears, usages: client}},
		{"real-node-kube-proxy", certSpec{cn: "system:kube-proxy", parent: p.CA, valid: tenYears, usages: client}},
		// kube-scheduler's static pod (kind mode), bound to its role by the default RBAC.
		{"real-node-kube-scheduler", certSpec{cn: "system:kube-scheduler", parent: p.CA, valid: tenYears, usages: client}},
	} {
		if _, err := loadKeyPair(dir, c.base); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("pki %s: %w", c.base, err)
		}
		kp, err := newKeyPair(c.spec)
		if err == nil {
			err = kp.write(dir, c.base)
		}
		if err != nil {
			return fmt.Errorf("pki %s: %w", c.base, err)
		}
	}
	return nil
}

// RealNodeOptions are the inputs of a cluster's real node.
type RealNodeOptions struct {
	// ImageBinary is a static kueuelab binary the pause image is built from (the node's pod
	// sandboxes run it); empty: see imageBinary.
	ImageBinary string
	// Images are image archives (`make image`) loaded into the node at every start.
	Images []string
}

// realNode prepares and starts the cluster's real node: the host's packages, the kubelet and
// kube-proxy binaries, the node's certificates and pause image, its config, then the component.
func (u *upper) realNode(ctx context.Context, o *RealNodeOptions, p *pki) error {
	s := u.s
	if err := u.step("real node: host packages", func() error {
		if err := hostpkg.Ensure(ctx, hostpkg.RealNode, u.out); err != nil {
			return err
		}
		return realnode.CheckNamespaces(ctx)
	}); err != nil {
		return err
	}
	var bins map[string]string
	if err := u.step("real node: kubelet and kube-proxy", func() error {
		cache, err := tools.CacheDir()
		if err != nil {
			return err
		}
		bins, err = tools.EnsureNodeBinaries(ctx, tools.Installer{CacheDir: cache, BinDir: s.BinDir, Out: u.out})
		return err
	}); err != nil {
		return err
	}
	dir := s.path("node")
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		return err
	}
	pkiDir := s.path("pki")
	if err := nodeCerts(pkiDir, p); err != nil {
		return err
	}
	bin, err := imageBinary(o.ImageBinary)
	if err != nil {
		return err
	}
	var sandbox string
	pause := filepath.Join(dir, "images", "pause.tar")
	if err := u.step("real node: pause image", func() error {
		if err := image.CheckStatic(bin); err != nil {
			return fmt.Errorf("the node's pause image is built from a static kueuelab (`make image` makes bin/static/kueuelab; or --image-binary): %w", err)
		}
		sp, err := image.Pause(image.Options{Binary: bin, Tag: "pause", CompressionLevel: 1})
		if err != nil {
			return err
		}
		sandbox = sp.Ref
		// Built again only for another binary: a 130 MB layer takes seconds to write.
		return cachedImage(pause, sp, bin)
	}); err != nil {
		return err
	}
	// The archives loaded before (this option's, `cluster load-image`'s) stay loaded.
	images := []string{pause}
	var added []string
	if old, err := realnode.ReadConfig(s.realNodeConfigPath()); err == nil {
		for _, img := range old.Images {
			if img != pause {
				images = append(images, img)
			}
		}
	}
	for _, img := range o.Images {
		abs, err := filepath.Abs(img)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		if !slices.Contains(images, abs) {
			images = append(images, abs)
		}
		added = append(added, abs)
	}
	n, err := s.realNodeNetwork()
	if err != nil {
		return err
	}
	staticPods := ""
	if s.kindMode() {
		if err := u.step("real node: kube-scheduler and Kueue images", func() error {
			archive, manifests, err := u.schedulerStaticPod(n)
			if err != nil {
				return err
			}
			staticPods = manifests
			bins, err := tools.Locate(s.BinDir, tools.Pinned())
			if err != nil {
				return err
			}
			kueue, _, err := s.componentImage("kueue", tools.KueueVersion, bins[Kueue])
			if err != nil {
				return err
			}
			for _, a := range []string{archive, kueue} {
				if !slices.Contains(images, a) {
					images = append(images, a)
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	cfg := &realnode.Config{
		Name: RealNodeName, Dir: dir, LogDir: s.path("logs"), LogPrefix: RealNode + "-",
		Kubelet: bins["kubelet"], KubeProxy: bins["kube-proxy"],
		Containerd: hostpkg.Containerd, Ctr: hostpkg.Ctr, CNIBinDir: hostpkg.CNIDir(),
		APIServerPort: s.Ports.APIServer, CACert: filepath.Join(pkiDir, "ca.crt"),
		NodeCert: filepath.Join(pkiDir, "real-node-kubelet.crt"), NodeKey: filepath.Join(pkiDir, "real-node-kubelet.key"),
		ProxyCert: filepath.Join(pkiDir, "real-node-kube-proxy.crt"), ProxyKey: filepath.Join(pkiDir, "real-node-kube-proxy.key"),
		SandboxImage: sandbox, Images: images, CgroupRoot: "kueuelab-" + s.Name, Network: n, StaticPodPath: staticPods,
	}
	if err := realnode.WriteConfig(s.realNodeConfigPath(), cfg); err != nil {
		return err
	}
	_, wasRunning := s.running(RealNode, s.realNodeMatcher())
	if err := u.ensure(ctx, RealNode); err != nil {
		return err
	}
	// A node that was running loaded its images when it started: the new ones go in now.
	if wasRunning && len(added) > 0 {
		return u.step(fmt.Sprintf("real node: %d image archives", len(added)), func() error { return cfg.Import(ctx, added) })
	}
	return nil
}

// imageBinary is the static kueuelab the pause image is built from: the one given, else this
// executable when it is static, else the static/kueuelab beside it (`make image` builds
// bin/static/kueuelab next to bin/kueuelab, which links libc).
func imageBinary(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	exe, err := selfExecutable()
	if err != nil {
		return "", err
	}
	if image.CheckStatic(exe) == nil {
		return exe, nil
	}
	if beside := filepath.Join(filepath.Dir(exe), "static", "kueuelab"); image.CheckStatic(beside) == nil {
		return beside, nil
	}
	return exe, nil // CheckStatic's error says what to do
}

// realNodeUp starts the cluster's real node if it has one: prepared anew when o asks for it,
// else as the last Up prepared it.
func (u *upper) realNodeUp(ctx context.Context, o *RealNodeOptions, p *pki) error {
	if !u.s.RealNode {
		return nil
	}
	if o == nil {
		if _, err := os.Stat(u.s.realNodeConfigPath()); err == nil {
			return u.ensure(ctx, RealNode)
		}
		o = &RealNodeOptions{}
	}
	return u.realNode(ctx, o, p)
}

// cleanupRealNode removes what a node that was killed may have left on the host.
func (s *State) cleanupRealNode(ctx context.Context) error {
	cfg, err := realnode.ReadConfig(s.realNodeConfigPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return realnode.CleanupHost(ctx, cfg)
}

// LoadImages imports image archives into the real node of cluster name (now, if it runs) and
// adds them to those it loads at every start.
func LoadImages(ctx context.Context, root, name string, archives []string, out io.Writer) error {
	s, ok, err := Load(root, name)
	if err != nil {
		return err
	}
	if !ok || !s.RealNode {
		return fmt.Errorf("cluster %s has no real node (`kueuelab cluster up --name %s --real-node`)", name, name)
	}
	cfg, err := realnode.ReadConfig(s.realNodeConfigPath())
	if err != nil {
		return err
	}
	var abs []string
	for _, a := range archives {
		p, err := filepath.Abs(a)
		if err != nil {
			return err
		}
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("image archive: %w", err)
		}
		abs = append(abs, p)
		if !slices.Contains(cfg.Images, p) {
			cfg.Images = append(cfg.Images, p)
		}
	}
	if err := realnode.WriteConfig(s.realNodeConfigPath(), cfg); err != nil {
		return err
	}
	if _, running := s.running(RealNode, s.realNodeMatcher()); !running {
		fmt.Fprintf(out, "node %s is not running: the images load when it starts\n", RealNodeName)
		return nil
	}
	t0 := time.Now()
	if err := cfg.Import(ctx, abs); err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded %d image archives into node %s in %s\n", len(abs), RealNodeName, time.Since(t0).Round(10*time.Millisecond))
	return nil
}

// checkNodeIndex refuses a node whose addresses another cluster's node under root has: both
// would take the same veth, route and NAT chain.
func (s *State) checkNodeIndex(root string) error {
	mine := realnode.IndexFor(s.PortBase)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil // no other cluster yet
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == s.Name {
			continue
		}
		other, ok, err := Load(root, e.Name())
		if err != nil || !ok || !other.RealNode {
			continue
		}
		if realnode.IndexFor(other.PortBase) == mine {
			return fmt.Errorf("cluster %s's real node would share addresses with cluster %s's (ports from %d and %d): give this cluster another --port-base, a multiple of 100 apart",
				s.Name, other.Name, s.PortBase, other.PortBase)
		}
	}
	return nil
}
