package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// kueuelabBinary builds the CLI once for the tests that run it as a user does.
func kueuelabBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kueuelab-e2e-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "kueuelab")
		cmd := exec.Command("go", "build", "-ldflags", "-X main.version=0.0.0-e2e", "-o", binPath, "./cmd/kueuelab")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/kueuelab: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// cli runs the kueuelab CLI and returns its combined output.
func cli(t *testing.T, ctx context.Context, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, kueuelabBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	t.Logf("kueuelab %s (%s):\n%s", strings.Join(args, " "), time.Since(t0).Round(100*time.Millisecond), out.String())
	return out.String(), err
}

// TestRunOnAnotherCluster is a user's own cluster: a second local control plane started bare (the
// control plane, KWOK, Kueue and the operators; no stages, nodes or queues, nothing of kueuelab's),
// prepared only through `kueuelab cluster install`, then `kueuelab run --kubeconfig` of the same
// trace as on the shared local cluster. The agent runs in the CLI's process on the trace clock,
// settled by the other cluster's Kueue and kube-scheduler metrics, so every workload's
// time-to-admission and JCT agree with the local run (tolerance per workload: the exact clock's
// max(1 %, 1 trace s)) although that cluster's Job controller takes upstream's 1 s batch period,
// not the local cluster's 10 ms. The trace is one workload of each family from the runner tests'
// trace, each alone on the cluster: where workloads compete, two runs need not agree workload by
// workload (Kueue's asynchronous requeues race its scheduling cycles, and pods created together
// reach kube-scheduler in either order; hack/remote-agreement.sh measures that spread).
func TestRunOnAnotherCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a second control plane and replays a 7-workload trace twice")
	}
	kueuelabBinary(t) // built before the clusters start, outside their timeouts
	tr, tracePath := sparseTrace(t)
	spec := runSpec("remote", 8)
	specPath := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	_, local := replaySpec(t, tr, tracePath, spec)

	root := t.TempDir()
	base, err := freePortBlock(30400, 100)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	log := &testWriter{t: t}
	t.Cleanup(func() {
		if err := localcluster.Down(context.Background(), root, "bare", true, log); err != nil {
			t.Errorf("cluster down: %v", err)
		}
	})
	cl, err := localcluster.Up(ctx, localcluster.Options{Root: root, Name: "bare", BinDir: shared.state.BinDir, PortBase: base, Bare: true,
		Timeout: 3 * time.Minute, Out: log})
	if err != nil {
		t.Fatalf("bare cluster: %v", err)
	}
	kc := cl.State.Kubeconfig()
	// Kueue and kube-scheduler run as processes here, not as the pods of kind: their metrics are
	// given as URLs.
	metrics := []string{"--kueue-metrics", fmt.Sprintf("https://127.0.0.1:%d/metrics", cl.State.Ports.KueueMetrics),
		"--scheduler-metrics", fmt.Sprintf("https://127.0.0.1:%d/metrics", cl.State.Ports.Scheduler)}

	out, err := cli(t, ctx, "", nil, append([]string{"run", "--kubeconfig", kc, "--trace", tracePath, "--cluster", specPath,
		"--out", t.TempDir()}, metrics...)...)
	if err == nil || !strings.Contains(out, "prepare it first with `kueuelab cluster install") {
		t.Fatalf("run on a cluster not prepared: err %v; want a refusal pointing at cluster install", err)
	}
	out, err = cli(t, ctx, "", nil, "cluster", "install", "--kubeconfig", kc, "--cluster", specPath)
	if err == nil || !strings.Contains(out, "no Deployment kueue-controller-manager") || !strings.Contains(out, "give its metrics URL") {
		t.Fatalf("install without a way to Kueue's metrics: err %v; want a refusal naming the metrics", err)
	}
	out, err = cli(t, ctx, "", nil, append([]string{"cluster", "install", "--kubeconfig", kc, "--cluster", specPath}, metrics...)...)
	if err != nil {
		t.Fatalf("cluster install: %v", err)
	}
	// The bare cluster's Configuration (the ConfigMap, as Kueue's manifests hold it) has no
	// waitForPodsReady section: Kueue v0.19 runs its defaults, on wall time.
	for _, want := range []string{"ok  Kueue integration kubeflow.org/mpijob", "ok  Kueue " + tools.KueueVersion + " metrics via https://",
		"ok  Kueue configuration (ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml, config.kueue.x-k8s.io/v1beta2), carried into every replay: clientConnection qps 300 burst 500; waitForPodsReady timeout 30m0s, recoveryTimeout 30m0s",
		"applied 7 KWOK stages (4 of KWOK's, 3 of kueuelab's: pod completion", "KWOK nodes Ready"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q", want)
		}
	}
	dir := filepath.Join(t.TempDir(), "results")
	out, err = cli(t, ctx, "", nil, append([]string{"run", "--kubeconfig", kc, "--trace", tracePath, "--cluster", specPath,
		"--out", dir, "--timeout", "10m", "--stall-timeout", "2m"}, metrics...)...)
	if err != nil {
		t.Fatalf("run --kubeconfig: %v", err)
	}
	if want := "Kueue " + tools.KueueVersion + " (its kueue_build_info)"; !strings.Contains(out, want) {
		t.Errorf("run output lacks %q", want)
	}
	remote, err := results.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k := remote.Summary.Meta.Kueue; k == nil || k.Version != tools.KueueVersion || k.ClientQPS != 300 || k.Clock != results.ClockWall ||
		k.WaitForPodsReady == nil || k.WaitForPodsReady.TimeoutSec != 1800 {
		t.Errorf("summary's kueue section %+v, want the cluster's Kueue with its default waitForPodsReady on wall time", k)
	}
	checkCounts(t, tr, remote)
	if s := remote.Summary.Meta; s.HoldsExpired != 0 || s.LateSteps != 0 {
		t.Errorf("the other cluster's run was not exact: %d holds expired %v (first: %v), %d steps seen late (worst %.3f s)",
			s.HoldsExpired, s.ExpiredByKind, s.FirstExpired, s.LateSteps, s.LateMaxSec)
	}
	compareWorkloads(t, local, remote)
}

// sparseTrace is the first workload of each family of the runner tests' trace (so every kind of
// the default mapping runs), with the submissions spread so that each workload runs alone (as
// TestLoneWorkloadsTakeExactlyTheirWork does), written to a file for the CLI. One per family keeps
// the test's two replays within the e2e budget; hack/remote-agreement.sh replays 100 contended ones.
func sparseTrace(t *testing.T) (*trace.Trace, string) {
	t.Helper()
	full, _ := runTrace(t)
	tr := &trace.Trace{Jobs: map[string][]*trace.Job{}}
	seen := map[trace.Family]bool{}
	for _, w := range full.Workloads {
		if !seen[w.WorkloadType] {
			seen[w.WorkloadType] = true
			tr.Workloads = append(tr.Workloads, w)
			tr.Jobs[w.WorkloadID] = full.Jobs[w.WorkloadID]
		}
	}
	next := 60.0
	for _, w := range tr.Workloads {
		w.SubmitTimeOffsetSec = next
		for _, j := range tr.Jobs[w.WorkloadID] {
			j.SubmitTimeOffsetSec = next
		}
		next += w.DurationSec + 600
	}
	path := filepath.Join(t.TempDir(), "sparse.jsonl")
	fw, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range tr.Workloads {
		if err := fw.WriteWorkload(w); err != nil {
			t.Fatal(err)
		}
		for _, j := range tr.Jobs[w.WorkloadID] {
			if err := fw.WriteJob(j); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	sparse, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return sparse, path
}

// compareWorkloads checks that every workload has the same time-to-admission and JCT in both
// runs, within max(1 %, 1 trace s), and logs the worst differences.
func compareWorkloads(t *testing.T, a, b *results.Dir) {
	t.Helper()
	byID := map[string]*results.Record{}
	for i := range b.Workloads {
		byID[b.Workloads[i].ID] = &b.Workloads[i]
	}
	type diff struct {
		id       string
		tta, jct float64
	}
	var diffs []diff
	for i := range a.Workloads {
		ra := &a.Workloads[i]
		rb := byID[ra.ID]
		if rb == nil {
			t.Errorf("workload %s only in the local run", ra.ID)
			continue
		}
		ttaA, ok1 := ra.TimeToAdmission()
		ttaB, ok2 := rb.TimeToAdmission()
		jctA, ok3 := ra.JCT()
		jctB, ok4 := rb.JCT()
		if !ok1 || !ok2 || !ok3 || !ok4 {
			t.Errorf("workload %s: admission/finish missing (local %v %v, remote %v %v)", ra.ID, ok1, ok3, ok2, ok4)
			continue
		}
		d := diff{ra.ID, ttaB - ttaA, jctB - jctA}
		diffs = append(diffs, d)
		if math.Abs(d.tta) > math.Max(0.01*ttaA, 1) || math.Abs(d.jct) > math.Max(0.01*jctA, 1) {
			t.Errorf("workload %s (%s): time-to-admission %.3f vs %.3f s, JCT %.3f vs %.3f s (local vs other cluster)",
				ra.ID, ra.Family, ttaA, ttaB, jctA, jctB)
		}
	}
	sort.Slice(diffs, func(i, j int) bool {
		return math.Max(math.Abs(diffs[i].tta), math.Abs(diffs[i].jct)) > math.Max(math.Abs(diffs[j].tta), math.Abs(diffs[j].jct))
	})
	var worst []string
	for _, d := range diffs[:min(3, len(diffs))] {
		worst = append(worst, fmt.Sprintf("%s ΔTTA %+.3f s ΔJCT %+.3f s", d.id, d.tta, d.jct))
	}
	exact := 0
	for _, d := range diffs {
		if d.tta == 0 && d.jct == 0 {
			exact++
		}
	}
	t.Logf("per-workload agreement, local vs other cluster: %d of %d identical; largest: %s", exact, len(diffs), strings.Join(worst, "; "))
}
