package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/history"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// twoVendorSpec is a small cluster with a CPU pool, two 8-GPU H100 nodes and two 8-GPU MI300X
// nodes in one ClusterQueue: nvidia.com/gpu pods can only go to h100-sxm, amd.com/gpu ones to
// mi300x. Two nodes a vendor rather than one keep fewer workloads queued, and so fewer Kueue
// settles to wait for (the test is about where workloads run, not about queueing).
func twoVendorSpec(team string) string {
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
- name: %[1]s-h100
  gpuFamily: H100-SXM
  count: 2
  gpusPerNode: 8
  cpu: 192
  memory: 2000Gi
- name: %[1]s-mi300x
  gpuFamily: MI300X
  count: 2
  gpusPerNode: 8
  cpu: 192
  memory: 2000Gi
clusterQueues:
- name: %[1]s-cq
  quotas:
  - flavor: cpu
    resources: {cpu: 128, memory: 512Gi}
  - flavor: h100-sxm
    resources: {cpu: 384, memory: 4000Gi, nvidia.com/gpu: 16}
  - flavor: mi300x
    resources: {cpu: 384, memory: 4000Gi, amd.com/gpu: 16}
teams:
- name: %[1]s
  clusterQueue: %[1]s-cq
defaultTeam: %[1]s
`, team)
}

// replayKept runs tr on the shared cluster on spec. With rate > 0 (for a test that reads the
// cluster's history afterwards) the submitted objects stay and the clock neither holds nor jumps:
// trace time is then rate x wall time, which is how an import maps timestamps back. With rate 0
// the clock is the runner's default, event-driven one.
func replayKept(t *testing.T, tr *trace.Trace, name, spec string, rate float64) *results.Dir {
	t.Helper()
	specPath := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(specPath, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := rcluster.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cluster.RESTConfig(shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := runner.NewInProcess(t.Context(), runner.InProcess{REST: rc, Local: shared.state, Spec: s, Seed: 1,
		Speedup: results.Speedup(rate), Clock: simclock.Options{Disabled: rate > 0}})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results")
	log := &testWriter{t: t}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cfg.Trace, cfg.TraceName, cfg.Timeout, cfg.StallTimeout, cfg.OutDir, cfg.Out, cfg.Progress = tr, name, 6*time.Minute, time.Minute, out, log, log
	cfg.Keep = rate > 0
	res, err := runner.Run(ctx, cfg)
	if err != nil {
		if errors.Is(err, replay.ErrIncomplete) {
			t.Fatalf("run %s: %v", name, err)
		}
		t.Fatal(err)
	}
	t.Logf("%s: %d workloads submitted, %.0f trace s in %.1fs wall, setup %.1fs", name, res.Submitted, res.Summary.TraceSec, res.Summary.WallSec, res.SetupSec)
	d, err := results.Load(out)
	if err != nil {
		t.Fatalf("results do not parse: %v", err)
	}
	return d
}

// TestJoulieTraceRuns replays a real trace of Joulie's workloadgen (default mode, half its GPU
// workloads on amd.com/gpu: HPO trials with their own requests, distributed runs as repeated
// worker groups, CPU-only workloads without GPU fields, affinity on a label no node has) to
// completion on the event-driven clock, and checks that every AMD workload ran on the MI300X flavor and every NVIDIA one
// on H100.
func TestJoulieTraceRuns(t *testing.T) {
	tr, err := trace.LoadWorkloads(t.Context(), "../../testdata/joulie/amd-40.jsonl", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := replayKept(t, tr, "joulie", twoVendorSpec("joulie"), 0)
	checkCounts(t, tr, d)
	want := map[string]string{}
	for _, w := range tr.Workloads {
		switch w.GPUResource() {
		case trace.ResourceAMDGPU:
			want[w.WorkloadID] = "mi300x"
		case trace.ResourceGPU:
			want[w.WorkloadID] = "h100-sxm"
		}
	}
	admitted := map[string]bool{}
	for _, e := range d.Events {
		if e.Type != results.EvAdmitted || want[e.Workload] == "" {
			continue
		}
		admitted[e.Workload] = true
		for podSet, f := range e.Flavors {
			if f != want[e.Workload] && f != "cpu" { // a CPU-only launcher or controller may take cpu
				t.Errorf("workload %s: pod set %s admitted on %s, want %s", e.Workload, podSet, f, want[e.Workload])
			}
		}
	}
	if len(admitted) != len(want) {
		t.Errorf("%d GPU workloads admitted, the trace has %d", len(admitted), len(want))
	}
}

// roundTripTrace is one workload of each family, one a minute, each running 1 to 2.5 minutes: short
// enough to replay at 20 trace seconds per wall second, spaced widely enough for Kubernetes'
// one-second timestamps.
func roundTripTrace(t *testing.T) *trace.Trace {
	t.Helper()
	path := filepath.Join(t.TempDir(), "roundtrip.jsonl")
	fw, err := trace.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	req := func(cpu string, gpus int) trace.Requests {
		r := trace.Requests{trace.ResourceCPU: cpu, trace.ResourceMemory: "8Gi"}
		if gpus > 0 {
			r[trace.ResourceGPU] = fmt.Sprint(gpus)
		}
		return r
	}
	shapes := map[trace.Family][]trace.PodGroup{
		trace.DebugEval:               {{Role: trace.RoleMain, Replicas: 1, Requests: req("4", 1)}},
		trace.SingleGPUTraining:       {{Role: trace.RoleMain, Replicas: 1, Requests: req("8", 2)}},
		trace.DistributedTraining:     {{Role: trace.RoleLauncher, Replicas: 1, Requests: req("2", 0)}, {Role: trace.RoleWorker, Replicas: 2, Requests: req("8", 1)}},
		trace.ParameterServerTraining: {{Role: trace.RolePS, Replicas: 1, Requests: req("4", 0)}, {Role: trace.RoleWorker, Replicas: 2, Requests: req("8", 1)}},
		trace.HPOExperiment:           {{Role: trace.RoleController, Replicas: 1, Requests: req("1", 0)}, {Role: trace.RoleTrial, Replicas: 2, Requests: req("4", 1)}},
		trace.CPUPreprocess:           {{Role: trace.RoleMain, Replicas: 1, Requests: req("8", 0)}},
		trace.CPUAnalytics:            {{Role: trace.RoleMain, Replicas: 1, Requests: req("4", 0)}},
	}
	for i, f := range trace.Families {
		gang := f == trace.DistributedTraining || f == trace.ParameterServerTraining
		pods := shapes[f]
		for k := range pods {
			pods[k].Gang = gang
		}
		w := &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: fmt.Sprintf("rt-%d", i), SubmitTimeOffsetSec: float64(60 * i),
			Namespace: "roundtrip", WorkloadType: f, Gang: gang, DurationSec: float64(60 + 30*(i%4)),
			SharedIntensityProfile: trace.Profile{CPUUtilization: 0.5, GPUUtilization: 0.6, MemoryIntensity: 0.4}, Pods: pods}
		if err := fw.WriteWorkload(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestImportFromClusterRoundTrip replays a trace T with its objects kept, imports the cluster's
// history back and compares families, requests per role and submit offsets with T.
func TestImportFromClusterRoundTrip(t *testing.T) {
	const speedup = 20
	tr := roundTripTrace(t)
	replayKept(t, tr, "roundtrip", runSpec("roundtrip", 8), speedup)

	items, err := history.Read(t.Context(), shared.client, history.Options{Namespaces: []string{"roundtrip"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := history.Build(items, history.Options{TimeScale: speedup})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.NotRun) > 0 {
		t.Errorf("left out: %s", res.NotRunSummary())
	}
	got := map[string]*trace.Workload{}
	for _, w := range res.Workloads {
		got[w.WorkloadID] = w
	}
	if len(got) != len(tr.Workloads) {
		t.Fatalf("imported %v, want the %d workloads of T", slices.Sorted(maps.Keys(got)), len(tr.Workloads))
	}
	// Offsets are compared from the first submission; a wall second of timestamp resolution and
	// the submission lag are worth speedup trace seconds each.
	tolerance := 3.0 * speedup
	first := got[tr.Workloads[0].WorkloadID]
	for _, w := range tr.Workloads {
		g := got[w.WorkloadID]
		if g == nil {
			t.Errorf("%s was not imported", w.WorkloadID)
			continue
		}
		if g.WorkloadType != w.WorkloadType {
			t.Errorf("%s: family %s, want %s", w.WorkloadID, g.WorkloadType, w.WorkloadType)
		}
		off, want := g.SubmitTimeOffsetSec-first.SubmitTimeOffsetSec, w.SubmitTimeOffsetSec-tr.Workloads[0].SubmitTimeOffsetSec
		if math.Abs(off-want) > tolerance {
			t.Errorf("%s: submit offset %.0f s after the first, want %.0f ± %.0f", w.WorkloadID, off, want, tolerance)
		}
		if want := rolesOf(w, g); rolesOf(g, nil) != want {
			t.Errorf("%s: pods %s, want %s", w.WorkloadID, rolesOf(g, nil), want)
		}
		t.Logf("%s %s: offset %.0f (want %.0f), duration %.0f (trace %.0f), pods %s", w.WorkloadID, g.WorkloadType, off, want, g.DurationSec, w.DurationSec, rolesOf(g, nil))
	}
}

// rolesOf lists a workload's pods as role×count{requests}, sorted; with only set, the roles of w
// that only has (Katib's Experiment renders no controller pod).
func rolesOf(w, only *trace.Workload) string {
	count := map[string]int{}
	for _, p := range w.Pods {
		if only != nil && !slices.ContainsFunc(only.Pods, func(q trace.PodGroup) bool { return q.Role == p.Role }) {
			continue
		}
		var req []string
		for _, n := range p.Requests.Names() {
			v := p.Requests.Value(n)
			req = append(req, fmt.Sprintf("%s=%g", n, v))
		}
		count[p.Role+"{"+strings.Join(req, ",")+"}"] += p.Replicas
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(count)) {
		out = append(out, fmt.Sprintf("%s×%d", k, count[k]))
	}
	return strings.Join(out, " ")
}
