package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
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
	// The reference: the same trace with the agent in the test's process, on the trace clock.
	_, exact := replaySpec(t, tr, tracePath, spec)
	specPath := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	agentImage := filepath.Join(t.TempDir(), "agent.tar")
	const tag = "e2e-node"
	// Trace seconds per wall second of the in-cluster replay: its 25 trace hours in 90 s.
	const speedup = 1000
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
		"--set", "image.tag="+tag, "--set", fmt.Sprintf("speedup=%d", speedup),
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

	nodeCrashRestarts(t, ctx, cl.State.Dir, c)

	dir := filepath.Join(t.TempDir(), "results")
	t1 := time.Now()
	if _, err := cli(t, ctx, "", nil, "run", "--kubeconfig", kc, "--agent", "in-cluster", "--speedup", strconv.Itoa(speedup), "--trace", tracePath,
		"--cluster", specPath, "--out", dir, "--timeout", "10m", "--stall-timeout", "3m"); err != nil {
		t.Fatalf("run --agent in-cluster: %v%s", err, agentLogs(t, kc))
	}
	t.Logf("in-cluster replay of %d workloads in %s", len(tr.Workloads), time.Since(t1).Round(100*time.Millisecond))
	res, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, tr, res)
	lat := writeWatchLatency(t, ctx, cl.Config, 40)
	compareInCluster(t, exact, res, speedup, lat)
	if err := exec.CommandContext(ctx, helm, "uninstall", "agent", "--kubeconfig", kc, "--namespace", "kueuelab-system", "--wait").Run(); err != nil {
		t.Errorf("helm uninstall: %v", err)
	}
	runnerIndexInPod(t, ctx, root, name, kc, static, tag)

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
	for _, h := range []string{"memory", "pids", "cpu", "systemd", "."} {
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

// controlPlaneHops is how many API writes a lone workload's life passes through, each seen by its
// next actor through a watch, between its Job's creation and the runner seeing it finished:
// the Job, Kueue's Workload, the admission, the unsuspended Job, the pods (one more hop where an
// operator makes them from its own kind), their bindings, the agent's start and completion
// writes, the Job's completion, the Workload's. The in-process agent holds the trace clock
// through each; the in-cluster agent runs on wall time, so each costs up to speedup × (write +
// watch latency) of trace time.
const controlPlaneHops = 11

// writeWatchLatency measures n API writes, each from its request to its watch event, and returns
// the p95.
func writeWatchLatency(t *testing.T, ctx context.Context, cfg *rest.Config, n int) time.Duration {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "kueuelab.io/latency-probe=1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var lat []time.Duration
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("latency-probe-%d", i), Namespace: ns,
			Labels: map[string]string{"kueuelab.io/latency-probe": "1"}}}
		t0 := time.Now()
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added && o.Name == cm.Name {
				break
			}
		}
		lat = append(lat, time.Since(t0))
		_ = cs.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{})
	}
	slices.Sort(lat)
	p95 := lat[len(lat)*95/100]
	t.Logf("API write + watch latency over %d writes: p50 %s, p95 %s, max %s", n, lat[len(lat)/2], p95, lat[len(lat)-1])
	return p95
}

// compareInCluster reports each workload's JCT and time to admission in the in-cluster replay
// against the exact one, and the spread against the bound controlPlaneHops × speedup × lat.
func compareInCluster(t *testing.T, exact, inCluster *results.Dir, speedup int, lat time.Duration) {
	t.Helper()
	byID := map[string]*results.Record{}
	for i := range inCluster.Workloads {
		byID[inCluster.Workloads[i].ID] = &inCluster.Workloads[i]
	}
	bound := float64(controlPlaneHops*speedup) * lat.Seconds()
	var djct []float64
	for i := range exact.Workloads {
		a := &exact.Workloads[i]
		b := byID[a.ID]
		if b == nil {
			t.Errorf("workload %s missing from the in-cluster replay", a.ID)
			continue
		}
		jctA, ok1 := a.JCT()
		jctB, ok2 := b.JCT()
		ttaA, _ := a.TimeToAdmission()
		ttaB, _ := b.TimeToAdmission()
		if !ok1 || !ok2 {
			t.Errorf("workload %s: JCT missing (exact %v, in-cluster %v)", a.ID, ok1, ok2)
			continue
		}
		d := jctB - jctA
		djct = append(djct, math.Abs(d))
		t.Logf("%-14s %-26s JCT exact %8.1f s, in-cluster %8.1f s (%+7.1f s = %+5.0f ms wall); TTA %5.1f s vs %6.1f s",
			a.ID, a.Family, jctA, jctB, d, d/float64(speedup)*1000, ttaA, ttaB)
		// Every hop costs the in-cluster replay trace time and the exact one none, so it can only
		// be later; by more than 3 s of wall time per workload it lost or invented work.
		if d < -0.05*float64(speedup) || d > 3*float64(speedup) {
			t.Errorf("workload %s: in-cluster JCT %.1f s against %.1f s exact: want 0 to 3 s of wall time later", a.ID, jctB, jctA)
		}
	}
	if len(djct) == 0 {
		return
	}
	slices.Sort(djct)
	over := 0
	for _, d := range djct {
		if d > bound {
			over++
		}
	}
	t.Logf("|ΔJCT| p50 %.1f s, p95 %.1f s, max %.1f s; bound %d hops × speedup %d × p95 latency %s = %.1f s; %d of %d over it",
		djct[len(djct)/2], djct[(len(djct)*95+99)/100-1], djct[len(djct)-1], controlPlaneHops, speedup, lat, bound, over, len(djct))
}

// nodeSweep is a one-variant experiment: its Indexed Job has one completion, run below as a
// real pod of the runner image.
const nodeSweep = `apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: e2e-node-sweep}
generator: {jobs: 8, seed: 3}
cluster: spec.yaml
speedup: max
timeout: 8m
variants:
- name: quota-8
`

// runnerIndexInPod builds the runner image, loads it into the real node (`cluster load-image`'s
// path), renders the experiment as an Indexed Job with its results on a hostPath, and runs it:
// the pod starts a local cluster of its own and replays the variant. The results it writes are
// merged and reported as `experiment merge` prints.
func runnerIndexInPod(t *testing.T, ctx context.Context, root, name, kc, static, tag string) {
	t.Helper()
	mods, err := image.ManifestModuleDirs(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	rsp, err := image.Runner(image.RunnerOptions{Options: image.Options{Binary: static, Tag: tag, CompressionLevel: 1},
		Set: tools.Pinned(), BinDir: shared.state.BinDir, ModuleDirs: mods})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "runner.tar")
	t0 := time.Now()
	if _, err := image.Write(archive, rsp, image.OCI); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	log := &testWriter{t: t}
	if err := localcluster.LoadImages(ctx, root, name, []string{archive}, log); err != nil {
		t.Fatal(err)
	}
	t.Logf("runner image written in %s, loaded into the node in %s", t1.Sub(t0).Round(100*time.Millisecond), time.Since(t1).Round(100*time.Millisecond))

	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "spec.yaml"), []byte(runSpec("job", 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	expFile := filepath.Join(src, "sweep.yaml")
	if err := os.WriteFile(expFile, []byte(nodeSweep), 0o644); err != nil {
		t.Fatal(err)
	}
	// The node's pods see the host's /tmp (the node replaces /var/lib, /var/log and /run only).
	resultsDir, err := os.MkdirTemp("", "kueuelab-node-results-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(resultsDir) })
	if err := os.Chown(resultsDir, image.UID, image.GID); err != nil {
		t.Fatal(err)
	}
	rendered := filepath.Join(src, "job.yaml")
	if _, err := cli(t, ctx, "", nil, "experiment", "render-job", expFile, "--results", "hostpath:"+resultsDir, "--namespace", "e2e-runner",
		"--image", image.RunnerRepository+":"+tag, "--cpu", "500m", "--memory", "1Gi",
		"--node-selector", realnode.Label+"=true", "--toleration", realnode.TaintKey+":NoSchedule", "--out", rendered); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"create", "namespace", "e2e-runner"}, {"apply", "-f", rendered}} {
		if out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", kc}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	c, err := cluster.NewClient(mustREST(t, kc))
	if err != nil {
		t.Fatal(err)
	}
	// The pod's peak memory is its cgroup's high-water mark, read while it runs (the kubelet
	// removes the cgroup with the pod).
	var peak int64
	var pod corev1.Pod
	t2 := time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("e2e-runner")); err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		pod = pods.Items[0]
		if m, err := filepath.Glob("/sys/fs/cgroup/memory/kueuelab-" + name + "/kubepods/*/pod" + string(pod.UID) + "/memory.max_usage_in_bytes"); err == nil && len(m) == 1 {
			if b, err := os.ReadFile(m[0]); err == nil {
				if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > peak {
					peak = v
				}
			}
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil || pod.Status.Phase != corev1.PodSucceeded {
		out, _ := exec.Command("kubectl", "--kubeconfig", kc, "-n", "e2e-runner", "logs", "job/e2e-node-sweep", "--tail", "60").CombinedOutput()
		t.Fatalf("runner pod %s: phase %s (%v)\n%s", pod.Name, pod.Status.Phase, err, out)
	}
	wall := time.Since(t2)
	if cs := pod.Status.ContainerStatuses; len(cs) == 1 && cs[0].State.Terminated != nil {
		wall = cs[0].State.Terminated.FinishedAt.Sub(cs[0].State.Terminated.StartedAt.Time)
	}
	t.Logf("runner pod %s on %s: ran %s, peak memory %.0f MiB (0: not measured)", pod.Name, pod.Spec.NodeName, wall.Round(time.Second), float64(peak)/(1<<20))
	if pod.Spec.NodeName != localcluster.RealNodeName {
		t.Errorf("runner pod ran on %q", pod.Spec.NodeName)
	}
	out := filepath.Join(resultsDir, "e2e-node-sweep")
	if m, ok := experiment.ReadDone(filepath.Join(out, "quota-8", "r0")); !ok || m.Variant != "quota-8" {
		t.Fatalf("the pod's results: done marker %+v, want variant quota-8's", m)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if _, err := cli(t, ctx, "", nil, "experiment", "merge", out, "--out", merged); err != nil {
		t.Fatalf("merge: %v", err)
	}
	d, err := results.Load(filepath.Join(merged, "quota-8", "r0"))
	if err != nil {
		t.Fatal(err)
	}
	if all := d.Summary.Groups[0]; all.Workloads != 8 || all.Succeeded+all.Failed != 8 {
		t.Errorf("the pod's replay: %d workloads, %d finished, want 8", all.Workloads, all.Succeeded+all.Failed)
	}
}

func mustREST(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := cluster.RESTConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// nodeCrashRestarts kills the node's process as a crash would (SIGKILL, no chance to stop
// anything): its init gets SIGTERM from the kernel and stops the node, the supervisor starts a
// new process, which waits for the old node's lock, and the node comes back Ready with the agent
// pod running again, as a rebooted kubelet node brings its pods back.
func nodeCrashRestarts(t *testing.T, ctx context.Context, stateDir string, c client.Client) {
	t.Helper()
	h, err := localcluster.ReadHealth(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := h.Component(localcluster.RealNode)
	if before.PID == 0 {
		t.Fatalf("no %s process in the status: %+v", localcluster.RealNode, before)
	}
	killed := time.Now()
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the node (pid %d): %v", before.PID, err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		h, err := localcluster.ReadHealth(stateDir)
		if err != nil {
			return false, nil
		}
		now, _ := h.Component(localcluster.RealNode)
		last = fmt.Sprintf("%s pid %d restarts %d: %s", now.State, now.PID, now.Restarts, now.Message)
		if now.PID == before.PID || now.Restarts <= before.Restarts || now.State != localcluster.StateReady {
			return false, nil
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace("kueuelab-system")); err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		p := pods.Items[0]
		last = fmt.Sprintf("node ready; agent pod %s", podSummary(pods.Items))
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && cond.LastTransitionTime.After(killed.Add(-time.Second)) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("after the node's SIGKILL: %s: %v", last, err)
	}
	h, _ = localcluster.ReadHealth(stateDir)
	now, _ := h.Component(localcluster.RealNode)
	if now.Restarts != before.Restarts+1 {
		t.Errorf("node restarts %d, want %d (one crash, one restart)", now.Restarts, before.Restarts+1)
	}
	t.Logf("node SIGKILLed → restarted (pid %d → %d, last exit %s) → Ready with the agent pod Ready again %s after the kill",
		before.PID, now.PID, now.LastExit, time.Since(killed).Round(100*time.Millisecond))
}

// TestRealNodeAsKind is a user's cluster as kind has it, on this machine: a bare local cluster
// with a real node, where Kueue runs as its Deployment and kube-scheduler as a static pod on
// that node. `cluster install` and `run --kubeconfig` are given no metrics URLs: they find both
// pods and read their metrics through port-forwards (the kubelet's streaming API), the path the
// README's "Your own cluster" section sends users down. The replay of one workload of each
// family must give every workload the time to admission and JCT of the exact local replay.
func TestRealNodeAsKind(t *testing.T) {
	if os.Getenv(realNodeEnv) != "1" {
		t.Skipf("a real kubelet node changes the host's network and needs root: run it with `make e2e-node` (%s=1)", realNodeEnv)
	}
	kueuelabBinary(t)
	static := staticKueuelab(t)
	tr, tracePath := sparseTrace(t)
	spec := runSpec("kind", 8)
	specPath := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	_, exact := replaySpec(t, tr, tracePath, spec)

	root := t.TempDir()
	base, err := freePortBlock(32400, 100)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	log := &testWriter{t: t}
	const name = "kind"
	t.Cleanup(func() {
		if err := localcluster.Down(context.Background(), root, name, false, log); err != nil {
			t.Errorf("cluster down: %v", err)
		}
	})
	t0 := time.Now()
	cl, err := localcluster.Up(ctx, localcluster.Options{Root: root, Name: name, BinDir: shared.state.BinDir, PortBase: base, Bare: true,
		Timeout: 3 * time.Minute, Out: log, RealNode: &localcluster.RealNodeOptions{ImageBinary: static}})
	if err != nil {
		t.Fatalf("cluster up --bare --real-node: %v", err)
	}
	t.Logf("bare cluster with Kueue and kube-scheduler as pods of its real node up in %s", time.Since(t0).Round(100*time.Millisecond))
	kc := cl.State.Kubeconfig()
	c, err := cluster.NewClient(cl.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"kueue-system", "kube-system"} {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != localcluster.RealNodeName || pods.Items[0].Status.Phase != corev1.PodRunning {
			t.Fatalf("pods in %s: %s, want one Running on %s", ns, podSummary(pods.Items), localcluster.RealNodeName)
		}
	}
	out, err := cli(t, ctx, "", nil, "cluster", "install", "--kubeconfig", kc, "--cluster", specPath)
	if err != nil {
		t.Fatalf("cluster install: %v", err)
	}
	for _, want := range []string{"ok  Kueue " + tools.KueueVersion + " metrics via port-forward to pod kueue-system/kueue-controller-manager-",
		"ok  kube-scheduler", "via port-forward to pod kube-system/kube-scheduler-" + localcluster.RealNodeName} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q", want)
		}
	}
	dir := filepath.Join(t.TempDir(), "results")
	if _, err := cli(t, ctx, "", nil, "run", "--kubeconfig", kc, "--trace", tracePath, "--cluster", specPath,
		"--out", dir, "--timeout", "10m", "--stall-timeout", "2m"); err != nil {
		t.Fatalf("run --kubeconfig: %v", err)
	}
	res, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, tr, res)
	compareWorkloads(t, exact, res)
}
