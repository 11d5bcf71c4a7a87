package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
)

// runSpec is a one-queue cluster: a CPU pool and one 8-GPU H100 node, with gpuQuota GPUs of
// quota. Team is the namespace every trace workload lands in, so two runs do not share names.
func runSpec(team string, gpuQuota int) string {
	return familySpec(team, "H100-SXM", gpuQuota)
}

// familySpec is runSpec with the GPU node of the given catalog family. A flavor selects its
// nodes by the family's product label alone, so two specs of one family applied at once share
// each other's nodes: a pod of one run may go to the other's node, whose pods only the other
// run's agent drives.
func familySpec(team, family string, gpuQuota int) string {
	return fmt.Sprintf(`apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata:
  name: %[1]s
nodePools:
- name: %[1]s-cpu
  gpuFamily: CPU
  count: 2
  cpu: 64
  memory: 256Gi
- name: %[1]s-gpu
  gpuFamily: %[3]s
  count: 1
  gpusPerNode: 8
  cpu: 192
  memory: 2000Gi
clusterQueues:
- name: %[1]s-cq
  preemption:
    withinClusterQueue: LowerPriority
  quotas:
  - flavor: cpu
    resources:
      cpu: 128
      memory: 512Gi
  - flavor: %[4]s
    resources:
      cpu: 192
      memory: 2000Gi
      nvidia.com/gpu: %[2]d
teams:
- name: %[1]s
  clusterQueue: %[1]s-cq
defaultTeam: %[1]s
`, team, gpuQuota, family, strings.ToLower(family))
}

// runTrace generates the 50-workload trace of the runner tests: seed 1 has every family and no
// workload above 4 GPUs, so it fits half the quota too.
func runTrace(t *testing.T) (*trace.Trace, string) {
	t.Helper()
	p, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	fw, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gen.Write(t.Context(), fw.Writer, gen.New(p, 1), gen.Options{Workloads: 50, EmitWorkloadRecords: true}); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fams := map[trace.Family]int{}
	for _, w := range tr.Workloads {
		fams[w.WorkloadType]++
		if w.TotalGPUs() > 4 {
			t.Fatalf("workload %s wants %d GPUs, more than the half quota", w.WorkloadID, w.TotalGPUs())
		}
	}
	for _, f := range trace.Families {
		if fams[f] == 0 {
			t.Fatalf("the trace has no %s workload", f)
		}
	}
	return tr, path
}

// replay runs tr on the shared cluster with the in-process agent, on an event-driven trace clock
// settled by the cluster's own Kueue and kube-scheduler metrics, and returns the results dir.
func replayTrace(t *testing.T, tr *trace.Trace, tracePath, team string, gpuQuota int) (*runner.Result, *results.Dir) {
	t.Helper()
	return replaySpec(t, tr, tracePath, runSpec(team, gpuQuota))
}

func replaySpec(t *testing.T, tr *trace.Trace, tracePath, specText string) (*runner.Result, *results.Dir) {
	t.Helper()
	specPath := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, []byte(specText), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := rcluster.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	res, out, err := runInProcess(t, tr, tracePath, spec, 6*time.Minute)
	if err != nil {
		if errors.Is(err, replay.ErrIncomplete) {
			t.Fatalf("run on %s: %v", spec.Metadata.Name, err)
		}
		t.Fatal(err)
	}
	s := res.Summary
	t.Logf("%s: %d workloads submitted, %.0f trace s in %.1fs wall (held %.1fs, %d holds, %d expired), setup %.1fs",
		spec.Metadata.Name, res.Submitted, s.TraceSec, s.WallSec, s.HeldWallSec, s.Holds, s.HoldsExpired, res.SetupSec)
	if s.HoldsExpired != 0 || s.LateSteps != 0 {
		t.Errorf("the clock moved while the control plane owed a step: %d holds expired %v (first: %v), %d steps seen late (worst %.3f s)",
			s.HoldsExpired, s.ExpiredByKind, s.FirstExpired, s.LateSteps, s.LateMaxSec)
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatalf("results do not parse: %v", err)
	}
	return res, d
}

// runInProcess runs tr on spec on the shared cluster with the in-process agent, on an
// event-driven trace clock settled by the cluster's own Kueue and kube-scheduler metrics, within
// timeout (the test's own deadline is two minutes later), and returns the run's result, its
// results dir and its error. set, if given, changes the runner's configuration last.
func runInProcess(t *testing.T, tr *trace.Trace, tracePath string, spec *rcluster.Spec, timeout time.Duration, set ...func(*runner.Config)) (*runner.Result, string, error) {
	t.Helper()
	rc, err := cluster.RESTConfig(shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keepRun(t, dir)
	cfg, err := runner.NewInProcess(t.Context(), runner.InProcess{REST: rc, Local: shared.state, Spec: spec, Seed: 1,
		ClockTrace: filepath.Join(dir, "clock.trace"), Timers: shared.timers})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "results")
	log := &testWriter{t: t}
	ctx, cancel := context.WithTimeout(t.Context(), timeout+2*time.Minute)
	defer cancel()
	cfg.Trace, cfg.TraceName, cfg.Timeout, cfg.StallTimeout, cfg.OutDir, cfg.Out, cfg.Progress = tr, tracePath, timeout, time.Minute, out, log, log
	for _, f := range set {
		f(&cfg)
	}
	res, err := runner.Run(ctx, cfg)
	return res, out, err
}

// keepRun copies a run's directory (results, the trace clock's hold log) into the shared
// cluster's state dir when the test fails, or always with KUEUELAB_E2E_KEEP=1: the e2e keeps that
// dir then, next to every component's log, and a flaky run's clock trace is the evidence of which
// step the holds missed.
func keepRun(t *testing.T, dir string) {
	t.Helper()
	// Registered after t.TempDir's own cleanup, so it runs before the directory is removed.
	t.Cleanup(func() {
		if !t.Failed() && os.Getenv("KUEUELAB_E2E_KEEP") != "1" {
			return
		}
		name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
		kept := filepath.Join(shared.state.Dir, "failed-runs", fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
		if err := os.CopyFS(kept, os.DirFS(dir)); err != nil {
			t.Logf("keep the run's results: %v", err)
			return
		}
		t.Logf("the run's results and clock trace kept in %s", kept)
	})
}

// testWriter logs what the runner prints one whole line at a time: the summary table arrives in
// fragments from tabwriter, and a log line per fragment is unreadable.
type testWriter struct {
	t   *testing.T
	buf []byte
}

func (w *testWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

func TestRunReplaysTraceToCompletion(t *testing.T) {
	tr, path := runTrace(t)
	_, full := replayTrace(t, tr, path, "run-full", 8)
	checkCounts(t, tr, full)
	// The full-quota run queues (TTA p50 ~50 min) and preempts (14); the half-quota one more.
	t.Run("SimEngineAgrees", func(t *testing.T) { checkSimAgrees(t, tr, path, "run-full", 8, full, true, fullQuotaSpread) })
	_, half := replayTrace(t, tr, path, "run-half", 4)
	checkCounts(t, tr, half)
	t.Run("SimEngineAgreesHalfQuota", func(t *testing.T) { checkSimAgrees(t, tr, path, "run-half", 4, half, false, nil) })

	ttaFull, ttaHalf := full.Summary.Groups[0].TimeToAdmissionSec, half.Summary.Groups[0].TimeToAdmissionSec
	t.Logf("time-to-admission p50/p95: %.0f/%.0f s with 8 GPUs, %.0f/%.0f s with 4",
		*ttaFull.P50, *ttaFull.P95, *ttaHalf.P50, *ttaHalf.P95)
	if meanTTA(half) <= meanTTA(full) {
		t.Errorf("mean time-to-admission %.0f s with half the GPU quota, not longer than %.0f s with all of it", meanTTA(half), meanTTA(full))
	}
}

// checkCounts checks that every workload appears once, terminal, with the trace's families.
func checkCounts(t *testing.T, tr *trace.Trace, d *results.Dir) {
	t.Helper()
	all := d.Summary.Groups[0]
	if all.Workloads != len(tr.Workloads) || all.Succeeded+all.Failed != len(tr.Workloads) || all.Unfinished != 0 {
		t.Errorf("summary: %d workloads, %d succeeded, %d failed, %d unfinished; the trace has %d",
			all.Workloads, all.Succeeded, all.Failed, all.Unfinished, len(tr.Workloads))
	}
	want := map[string]int{}
	for _, w := range tr.Workloads {
		want[string(w.WorkloadType)]++
	}
	for _, g := range d.Summary.Groups {
		if g.Scope == "family" && g.Workloads != want[g.Name] {
			t.Errorf("family %s: %d workloads in the summary, %d in the trace", g.Name, g.Workloads, want[g.Name])
		}
	}
	seen := map[string]bool{}
	for _, r := range d.Workloads {
		if seen[r.ID] {
			t.Errorf("workload %s appears twice in workloads.csv", r.ID)
		}
		seen[r.ID] = true
		if r.Admitted == nil || r.Finished == nil || r.FirstPodRunning == nil {
			t.Errorf("workload %s: admitted %v running %v finished %v", r.ID, r.Admitted, r.FirstPodRunning, r.Finished)
		}
	}
	if len(seen) != len(tr.Workloads) {
		t.Errorf("workloads.csv has %d workloads, the trace %d", len(seen), len(tr.Workloads))
	}
	if len(d.Events) == 0 || len(d.Series) == 0 {
		t.Errorf("%d events, %d time series rows", len(d.Events), len(d.Series))
	}
}

func meanTTA(d *results.Dir) float64 {
	var sum float64
	n := 0
	for _, r := range d.Workloads {
		if v, ok := r.TimeToAdmission(); ok {
			sum += v
			n++
		}
	}
	return sum / float64(n)
}
