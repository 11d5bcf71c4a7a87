package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// TestLoneWorkloadsTakeExactlyTheirWork replays one workload of each shape of the runner tests'
// trace (loneShapes: every family, pod structure, GPU count, checkpointing and intent class the
// trace has) with the submissions spread so that each workload runs alone on an idle cluster: each
// must be admitted at once and take exactly its work's time (tolerance: |JCT − ideal| ≤ max(1 %,
// 1 trace second), time-to-admission < 1 trace second), whatever the control plane's latency.
func TestLoneWorkloadsTakeExactlyTheirWork(t *testing.T) {
	tr, _ := runTrace(t)
	tr = loneShapes(tr)
	t.Logf("%d workloads, one of each shape", len(tr.Workloads))
	next := 60.0
	for _, w := range tr.Workloads {
		w.SubmitTimeOffsetSec = next
		for _, j := range tr.Jobs[w.WorkloadID] {
			j.SubmitTimeOffsetSec = next
		}
		next += w.DurationSec + 600 // ten trace minutes of idle cluster between workloads
	}
	sort.SliceStable(tr.Workloads, func(i, j int) bool { return tr.Workloads[i].SubmitTimeOffsetSec < tr.Workloads[j].SubmitTimeOffsetSec })
	_, d := replayTrace(t, tr, "sparse", "exact-lone", 8)
	checkCounts(t, tr, d)
	worst := map[trace.Family]float64{}
	for _, r := range d.Workloads {
		tta, ok1 := r.TimeToAdmission()
		jct, ok2 := r.JCT()
		if !ok1 || !ok2 {
			t.Errorf("%s (%s): no time-to-admission or JCT", r.ID, r.Family)
			continue
		}
		if tta >= 1 {
			t.Errorf("%s (%s) alone on an idle cluster waited %.3f trace s for admission", r.ID, r.Family, tta)
		}
		excess := jct - r.IdealSec
		if math.Abs(excess) > math.Max(0.01*r.IdealSec, 1) {
			t.Errorf("%s (%s) alone took %.3f trace s for %.3f s of work (%+.3f)", r.ID, r.Family, jct, r.IdealSec, excess)
		}
		worst[r.Family] = math.Max(worst[r.Family], math.Abs(excess))
	}
	var parts []string
	for _, f := range trace.Families {
		parts = append(parts, fmt.Sprintf("%s %.3f s", f, worst[f]))
	}
	t.Logf("worst |JCT − ideal| per family: %s", strings.Join(parts, ", "))
}

// loneShapes keeps the first workload of each shape of tr: family, gang, pod sets (role,
// replicas, GPUs per pod), checkpointing on or off, intent class. Alone on an idle cluster a
// workload's time-to-admission and JCT depend on its shape, not on its duration or its intensity:
// the trace clock jumps over the time it runs. The runner tests' 50 workloads have 21 shapes (21
// of the 50 are one-GPU debug_eval runs that differ only in duration).
func loneShapes(tr *trace.Trace) *trace.Trace {
	out := *tr
	out.Workloads, out.Jobs = nil, map[string][]*trace.Job{}
	seen := map[string]bool{}
	for _, w := range tr.Workloads {
		key := fmt.Sprintf("%s gang=%v checkpoint=%v intent=%q", w.WorkloadType, w.Gang, w.CheckpointIntervalSec > 0, w.IntentClass)
		for _, p := range w.Pods {
			key += fmt.Sprintf(" %s×%d gpu=%g", p.Role, p.Replicas, p.Requests.Value(w.GPUResource()))
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out.Workloads = append(out.Workloads, w)
		out.Jobs[w.WorkloadID] = tr.Jobs[w.WorkloadID]
	}
	return &out
}

// coincident is a trace in which three things happen at trace second 500: a standard workload
// finishes, a performance workload asks for the whole node, and Kueue preempts the eco workload
// that holds the rest. The event-driven clock must stop at 500 and settle all of it there.
const coincident = `{"type":"workload","schemaVersion":"v2","workloadId":"eco","submitTimeOffsetSec":0,"namespace":"%[1]s","workloadType":"single_gpu_training","durationSec":1000,"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"sharedIntensityProfile":{"cpuUtilization":0.5,"gpuUtilization":0.5,"memoryIntensity":0.5,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.3},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","nvidia.com/gpu":"4"}}],"intentClass":"eco"}
{"type":"workload","schemaVersion":"v2","workloadId":"std","submitTimeOffsetSec":0,"namespace":"%[1]s","workloadType":"single_gpu_training","durationSec":500,"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"sharedIntensityProfile":{"cpuUtilization":0.5,"gpuUtilization":0.5,"memoryIntensity":0.5,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.3},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","nvidia.com/gpu":"4"}}],"intentClass":"standard"}
{"type":"workload","schemaVersion":"v2","workloadId":"perf","submitTimeOffsetSec":500,"namespace":"%[1]s","workloadType":"single_gpu_training","durationSec":300,"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"sharedIntensityProfile":{"cpuUtilization":0.5,"gpuUtilization":0.5,"memoryIntensity":0.5,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.3},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","nvidia.com/gpu":"8"}}],"intentClass":"performance"}
`

// TestCoincidentEventsAreNotSkipped: at trace second 500 std finishes, perf is submitted and eco
// is preempted for it. Nothing may be skipped or moved: std ends at 500, perf is admitted at 500
// and ends at 800, eco is evicted at 500, readmitted at 801 (Kueue v0.19 returns inadmissible
// workloads in a requeue batch one second after perf freed the quota) and (no checkpoint) runs
// its 1000 s again, ending at 1801.
func TestCoincidentEventsAreNotSkipped(t *testing.T) {
	const team = "exact-coincident"
	path := filepath.Join(t.TempDir(), "coincident.jsonl")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(coincident, team)), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, d := replayTrace(t, tr, path, team, 8)
	by := map[string]results.Record{}
	for _, r := range d.Workloads {
		by[r.ID] = r
	}
	at := func(id, what string, p *float64, want float64) {
		t.Helper()
		if p == nil {
			t.Errorf("%s: %s never happened, want at %g", id, what, want)
		} else if math.Abs(*p-want) > 1e-3 {
			t.Errorf("%s: %s at trace %.3f s, want %g", id, what, *p, want)
		}
	}
	at("std", "finished", by["std"].Finished, 500)
	at("perf", "submitted", by["perf"].Submitted, 500)
	at("perf", "admitted", by["perf"].Admitted, 500)
	at("perf", "finished", by["perf"].Finished, 800)
	at("eco", "finished", by["eco"].Finished, 1801)
	if ev := by["eco"].Evictions; len(ev) != 1 || math.Abs(ev[0].T-500) > 1e-3 {
		t.Errorf("eco evictions %v, want one at 500", ev)
	}
	for _, id := range []string{"eco", "std", "perf"} {
		if by[id].State != results.StateSucceeded {
			t.Errorf("%s: state %s", id, by[id].State)
		}
	}
}
