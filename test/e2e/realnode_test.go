package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/realnode"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// realNodeEnv runs TestRealNode (`make e2e-node`): it needs root, the host's containerd, runc and
// CNI packages (installed with apt-get when missing) and changes the host's network while it runs.
const realNodeEnv = "KUEUELAB_E2E_NODE"

// TestRealNode is the in-cluster path on a real kubelet: a local cluster with a real node,
// the agent image built without Docker and loaded into it, the agent chart installed with helm
// (its Deployment scheduled onto the real node by the chart's nodeSelector and tolerations
// alone), then `kueuelab run --kubeconfig --agent in-cluster` of one workload of each family,
// every one of which must finish, driven by the agent pod through the kubernetes Service. Then
// `cluster down` must leave nothing of the node on the host.
func TestRealNode(t *testing.T) {
	if os.Getenv(realNodeEnv) != "1" {
		t.Skipf("a real kubelet node changes the host's network and needs root: run it with `make e2e-node` (%s=1)", realNodeEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatal("a real node needs root (mount and network namespaces, cgroups, iptables)")
	}
	helm := testutil.Helm(t, tools.GoBuildFlags()...)
	kueuelabBinary(t)
	static := staticKueuelab(t)
	tr, tracePath := sparseTrace(t)
	spec := runSpec("node", 8)
	specPath := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	agentImage := filepath.Join(t.TempDir(), "agent.tar")
	const tag = "e2e-node"
	sp, err := image.Agent(image.Options{Binary: static, Tag: tag})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.Write(agentImage, sp, image.OCI); err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	base, err := freePortBlock(31400, 100)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	log := &testWriter{t: t}
	const name = "node"
	var nodeDir string
	var netw realnode.Network
	downed := false
	down := func() {
		if downed {
			return
		}
		downed = true
		t0 := time.Now()
		if err := localcluster.Down(context.Background(), root, name, false, log); err != nil {
			t.Errorf("cluster down: %v", err)
		}
		t.Logf("cluster down in %s", time.Since(t0).Round(100*time.Millisecond))
	}
	t.Cleanup(down)
	t0 := time.Now()
	cl, err := localcluster.Up(ctx, localcluster.Options{Root: root, Name: name, BinDir: shared.state.BinDir, PortBase: base,
		Timeout: 3 * time.Minute, Out: log, RealNode: &localcluster.RealNodeOptions{ImageBinary: static, Images: []string{agentImage}}})
	if err != nil {
		t.Fatalf("cluster up --real-node: %v", err)
	}
	t.Logf("cluster with a real node up in %s", time.Since(t0).Round(100*time.Millisecond))
	cfg, err := realnode.ReadConfig(filepath.Join(cl.State.Dir, "config", "real-node.json"))
	if err != nil {
		t.Fatal(err)
	}
	nodeDir, netw = cfg.Dir, cfg.Network
	c, err := cluster.NewClient(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: localcluster.RealNodeName}, &node); err != nil {
		t.Fatal(err)
	}
	if node.Labels[realnode.Label] != "true" || !slices.ContainsFunc(node.Spec.Taints, func(tn corev1.Taint) bool {
		return tn.Key == realnode.TaintKey && tn.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("node %s: labels %v taints %v, want label and taint %s", node.Name, node.Labels, node.Spec.Taints, realnode.Label)
	}
	if v := node.Status.NodeInfo.KubeletVersion; v != "v1.36.2" {
		t.Errorf("kubelet version %q", v)
	}

	// The chart, as a user installs it on a cluster with a real node for the agent.
	kc := cl.State.Kubeconfig()
	out, err := exec.CommandContext(ctx, helm, "install", "agent", "../../charts/kueuelab-agent", "--kubeconfig", kc,
		"--namespace", "kueuelab-system", "--create-namespace", "--wait", "--timeout", "3m",
		"--set", "image.tag="+tag, "--set", "speedup=1000",
		"--set-string", `nodeSelector.kueuelab\.io/real-node=true`,
		"--set", "tolerations[0].key="+realnode.TaintKey, "--set", "tolerations[0].operator=Exists",
		"--set", "tolerations[0].effect=NoSchedule").CombinedOutput()
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("kueuelab-system")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != localcluster.RealNodeName || pods.Items[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("agent pods %s, want one Running on %s", podSummary(pods.Items), localcluster.RealNodeName)
	}

	dir := filepath.Join(t.TempDir(), "results")
	t1 := time.Now()
	if _, err := cli(t, ctx, "", nil, "run", "--kubeconfig", kc, "--agent", "in-cluster", "--speedup", "1000", "--trace", tracePath,
		"--cluster", specPath, "--out", dir, "--timeout", "10m", "--stall-timeout", "3m"); err != nil {
		t.Fatalf("run --agent in-cluster: %v%s", err, agentLogs(t, kc))
	}
	t.Logf("in-cluster replay of %d workloads in %s", len(tr.Workloads), time.Since(t1).Round(100*time.Millisecond))
	res, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, tr, res)

	down()
	checkHostClean(t, nodeDir, netw, "kueuelab-"+name)
}

// staticKueuelab builds the CLI without cgo, as `make image` does: the images run it on an empty base.
func staticKueuelab(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kueuelab")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=0.0.0-e2e", "-o", bin, "./cmd/kueuelab")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("static build: %v\n%s", err, out)
	}
	return bin
}

func podSummary(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "[%s on %q: %s] ", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
	return b.String()
}

// agentLogs is the agent pod's log, read through the API server from the kubelet.
func agentLogs(t *testing.T, kubeconfig string) string {
	t.Helper()
	out, _ := exec.Command("kubectl", "--kubeconfig", kubeconfig, "-n", "kueuelab-system", "logs", "deploy/agent-kueuelab-agent", "--tail", "40").CombinedOutput()
	return "\nagent log:\n" + string(out)
}

// checkHostClean fails unless nothing of the node is left: no process running from the node's
// files, no mount under them, no veth, NAT chain or route, no cgroup.
func checkHostClean(t *testing.T, nodeDir string, n realnode.Network, cgroupRoot string) {
	t.Helper()
	// The node's processes are all gone by the time Down returns; its namespaces with them.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(processesUsing(nodeDir)) == 0, nil
	})
	if err != nil {
		t.Errorf("processes left running from %s: %v", nodeDir, processesUsing(nodeDir))
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if bytes.Contains(mounts, []byte(nodeDir)) {
		t.Errorf("mounts left under %s", nodeDir)
	}
	if _, err := os.Stat("/sys/class/net/" + n.HostIf); err == nil {
		t.Errorf("veth %s left", n.HostIf)
	}
	if exec.Command("iptables", "-w", "-t", "nat", "-L", n.Chain, "-n").Run() == nil {
		t.Errorf("NAT chain %s left", n.Chain)
	}
	if out, _ := exec.Command("ip", "route", "show", n.PodCIDR).Output(); len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("route left: %s", out)
	}
	for _, h := range []string{"memory", "pids", "cpu", "systemd"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, cgroupRoot)); err == nil {
			t.Errorf("cgroup %s/%s left", h, cgroupRoot)
		}
	}
}

// processesUsing lists the processes whose command line or working directory names dir.
func processesUsing(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if bytes.Contains(cl, []byte(dir)) || strings.HasPrefix(cwd, dir) {
			if syscall.Kill(pid, 0) == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
