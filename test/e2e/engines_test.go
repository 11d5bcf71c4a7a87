package e2e

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// enginesSpec is two 8-GPU L40S nodes (a family no other test's nodes have) and 24 GPUs of quota:
// more quota than GPUs, so Kueue may admit a gang the nodes cannot hold yet.
const enginesSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: engines}
nodePools:
- {name: engines-cpu, gpuFamily: CPU, count: 1, cpu: 64, memory: 256Gi}
- {name: engines-l40s, gpuFamily: L40S, count: 2, gpusPerNode: 8, cpu: 64, memory: 512Gi}
clusterQueues:
- name: engines-cq
  preemption: {withinClusterQueue: LowerPriority}
  quotas:
  - flavor: cpu
    resources: {cpu: 64, memory: 256Gi}
  - flavor: l40s
    resources: {cpu: 192, memory: 1536Gi, nvidia.com/gpu: 24}
teams:
- {name: engines, clusterQueue: engines-cq}
defaultTeam: engines
priorityClasses:
  standard: {value: 100}
  eco: {value: 10}
`

// enginesTrace: two eco 8-GPU workloads (e1 at 0 s and e2 at 10 s, 1 h each) fill a node each; at
// 60 s a standard two-pod gang g (2 × 8 GPUs, 30 min) needs 8 GPUs of quota more than is free,
// so Kueue preempts the newer eco workload, e2, which is requeued. g's quota is reserved at once,
// but one of its pods waits for a node until e1 ends at 3,600 s. With Kueue v0.19's defaults
// (waitForPodsReady on: 30 min timeout, backoff 60 s doubling; inadmissible workloads return in
// 1 s batches) that makes, step by step:
//   - 1,860 s: g's pods were not ready 30 min after its admission: evicted (PodsReadyTimeout);
//     requeued when its 60 s backoff ends, at 1,920 s.
//   - 1,861 s (the requeue batch after g released its quota): e2 gets quota and runs on the node
//     g's first pod left.
//   - 1,920 s: g, back, preempts e2 (the 8 GPUs it lacks) and is admitted; its first pod runs,
//     the second waits for e1's node until 3,600 s: ready before its second timeout (3,720 s),
//     so g ends at 5,400 s.
//   - 3,601 s (the batch after e1 ended): e2 gets quota back and waits for a node until g ends at
//     5,400 s (its own timeout would be 5,401 s); it starts over and ends at 9,000 s.
//   - A Katib experiment k (two 1-GPU trials of 10 min, eco) submitted at 3,700 s waits for
//     quota; at 5,401 s (the batch after g ended) its trials get it and run on the node g left; k
//     ends at 6,001 s.
//
// No two workloads get quota at the same instant while they compete for one node: which of their
// pods kube-scheduler places first is then the order their operators create them in, a race on
// a real cluster as on the cluster engine (the sim places them in admission order).
func enginesTrace() *trace.Trace {
	profile := trace.Profile{CPUUtilization: 0.2, GPUUtilization: 0.8}
	group := func(role string, n, gpus int) trace.PodGroup {
		return trace.PodGroup{Role: role, Replicas: n, Requests: trace.Requests{
			trace.ResourceCPU: "8", trace.ResourceMemory: "64Gi", trace.ResourceGPU: fmt.Sprint(gpus)}}
	}
	mk := func(id string, submit, dur float64, fam trace.Family, intent string, pods ...trace.PodGroup) *trace.Workload {
		return &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: id, SubmitTimeOffsetSec: submit, Namespace: "engines",
			WorkloadType: fam, DurationSec: dur, IntentClass: intent, WorkloadClass: trace.Class{CPU: "low", GPU: "high"},
			SharedIntensityProfile: profile, Pods: pods}
	}
	g := mk("g", 60, 1800, trace.DistributedTraining, trace.IntentStandard, group("worker", 2, 8))
	g.Gang = true
	return &trace.Trace{Jobs: map[string][]*trace.Job{}, Workloads: []*trace.Workload{
		mk("e1", 0, 3600, trace.SingleGPUTraining, trace.IntentEco, group("main", 1, 8)),
		mk("e2", 10, 3600, trace.SingleGPUTraining, trace.IntentEco, group("main", 1, 8)),
		g,
		mk("k", 3700, 600, trace.HPOExperiment, trace.IntentEco, group("trial", 1, 1), group("trial", 1, 1)),
	}}
}

// step is one workload-level event of a run: its type, reason and trace time.
type step struct {
	Type   results.EventType
	Reason string
	T      float64
}

func (s step) String() string { return fmt.Sprintf("%.0f %s %s", s.T, s.Type, s.Reason) }

// workloadSteps are a run's workload-level events by workload, in trace order; events of one
// instant in a fixed order of their types (the engines may record one instant's events in either
// order). Pod events are left out: how many pod events a workload has is the kind's (a Katib
// trial Job, a JobSet's pods), which the engines share; their times are checked in runsOf.
func workloadSteps(d *results.Dir) map[string][]step {
	rank := map[results.EventType]int{}
	for i, t := range []results.EventType{results.EvSubmitted, results.EvTrialCreated, results.EvWorkloadCreated,
		results.EvEvicted, results.EvPreempted, results.EvRequeued, results.EvQuotaReserved, results.EvAdmitted,
		results.EvAllPodsRunning, results.EvFinished} {
		rank[t] = i + 1
	}
	out := map[string][]step{}
	for _, e := range d.Events {
		if rank[e.Type] == 0 {
			continue
		}
		out[e.Workload] = append(out[e.Workload], step{Type: e.Type, Reason: e.Reason, T: toMs(e.T)})
	}
	for _, s := range out {
		slices.SortStableFunc(s, func(a, b step) int {
			return cmp.Or(cmp.Compare(a.T, b.T), rank[a.Type]-rank[b.Type])
		})
	}
	return out
}

// toMs rounds a trace time to the millisecond: the engines' times are compared to that.
func toMs(t float64) float64 { return math.Round(t*1000) / 1000 }

// runsOf are the trace times (to the millisecond) at which a workload's pods started running,
// sorted, leaving out runs that ended within a millisecond of their start: such a run did no work
// and held its node for no trace time, and whether a pod its operator creates in the instant of
// its workload's eviction starts before the eviction deletes it is a race on a cluster that the
// sim, applying the eviction first, never runs.
func runsOf(d *results.Dir, id string) []float64 {
	started := map[string][]float64{} // by pod, runs not yet ended
	var out []float64
	for _, e := range d.Events {
		if e.Workload != id {
			continue
		}
		switch e.Type {
		case results.EvPodRunning:
			started[e.Object] = append(started[e.Object], e.T)
		case results.EvPodFinished:
			if runs := started[e.Object]; len(runs) > 0 {
				if e.T-runs[0] >= 1e-3 {
					out = append(out, toMs(runs[0]))
				}
				started[e.Object] = runs[1:]
			}
		}
	}
	for _, runs := range started {
		for _, r := range runs {
			out = append(out, toMs(r))
		}
	}
	slices.Sort(out)
	return out
}

// TestEnginesAgreeStepByStep replays one small trace with a preemption, an eviction and requeue,
// a Katib experiment and a gang that waits for nodes on both engines, through the shared replay
// core, and requires the same workload-level event sequence, at the same trace times, per
// workload. The expected times are derived by hand from Kueue's documented behaviour (see
// enginesTrace), so a drift that both engines share fails too.
func TestEnginesAgreeStepByStep(t *testing.T) {
	spec, err := rcluster.Parse("engines.yaml", []byte(enginesSpec))
	if err != nil {
		t.Fatal(err)
	}
	tr := enginesTrace()
	engines := []struct {
		name string
		run  func(t *testing.T) *results.Dir
	}{
		{"cluster", func(t *testing.T) *results.Dir {
			_, d := replaySpec(t, tr, "engines", enginesSpec)
			return d
		}},
		{"sim", func(t *testing.T) *results.Dir {
			// No modelled control-plane time: the cluster engine's clock holds through every step
			// the control plane owes, so its decisions take no trace time either.
			out := filepath.Join(t.TempDir(), "sim")
			if _, err := sim.Run(t.Context(), sim.Config{Trace: tr, TraceName: "engines", Spec: spec, Seed: 1,
				Timing: sim.Timing{}, OutDir: out, Out: &testWriter{t: t}}); err != nil {
				t.Fatal(err)
			}
			d, err := results.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}},
	}
	runs := map[string]*results.Dir{}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t0 := time.Now()
			d := e.run(t)
			t.Logf("%s engine: %.0f trace s in %s", e.name, d.Summary.TraceSec, time.Since(t0).Round(time.Millisecond))
			checkEnginesExpectations(t, d)
			runs[e.name] = d
		})
	}
	c, s := runs["cluster"], runs["sim"]
	if c == nil || s == nil {
		t.Fatal("an engine's run failed: nothing to compare")
	}
	cs, ss := workloadSteps(c), workloadSteps(s)
	for _, w := range tr.Workloads {
		id := w.WorkloadID
		if !slices.Equal(cs[id], ss[id]) {
			t.Errorf("%s: the engines' steps differ\ncluster: %v\nsim:     %v", id, cs[id], ss[id])
		}
		if cr, sr := runsOf(c, id), runsOf(s, id); !slices.Equal(cr, sr) {
			t.Errorf("%s: pods started at %v on the cluster, at %v in the sim (steps: %v)", id, cr, sr, cs[id])
		}
	}
}

// checkEnginesExpectations checks one engine's run against the times worked out in enginesTrace.
func checkEnginesExpectations(t *testing.T, d *results.Dir) {
	t.Helper()
	steps := workloadSteps(d)
	at := func(id string, typ results.EventType, n int) float64 {
		for _, s := range steps[id] {
			if s.Type == typ {
				if n == 0 {
					return s.T
				}
				n--
			}
		}
		return -1
	}
	for _, c := range []struct {
		id   string
		typ  results.EventType
		n    int // which occurrence
		want float64
	}{
		{"e1", results.EvQuotaReserved, 0, 0},
		{"e1", results.EvFinished, 0, 3600},
		{"e2", results.EvQuotaReserved, 0, 10},
		{"e2", results.EvEvicted, 0, 60},
		{"e2", results.EvPreempted, 0, 60},
		{"e2", results.EvRequeued, 0, 60},
		{"e2", results.EvQuotaReserved, 1, 1861},
		{"e2", results.EvAllPodsRunning, 1, 1861},
		{"e2", results.EvPreempted, 1, 1920},
		{"e2", results.EvQuotaReserved, 2, 3601},
		{"e2", results.EvAllPodsRunning, 2, 5400},
		{"e2", results.EvFinished, 0, 9000},
		{"g", results.EvQuotaReserved, 0, 60},
		{"g", results.EvEvicted, 0, 1860},
		{"g", results.EvRequeued, 0, 1920},
		{"g", results.EvQuotaReserved, 1, 1920},
		{"g", results.EvAllPodsRunning, 0, 3600},
		{"g", results.EvFinished, 0, 5400},
		{"k", results.EvQuotaReserved, 0, 5401},
		{"k", results.EvFinished, 0, 6001},
	} {
		if got := at(c.id, c.typ, c.n); math.Abs(got-c.want) > 0.001 {
			t.Errorf("%s: %s #%d at %.3f s, want %.0f s (steps: %v)", c.id, c.typ, c.n+1, got, c.want, steps[c.id])
		}
	}
	for _, r := range d.Workloads {
		if r.State != results.StateSucceeded {
			t.Errorf("%s ended %s, want succeeded", r.ID, r.State)
		}
	}
	// g's second pod waited for e1's node; kube-scheduler said why.
	var reasons []string
	for _, e := range d.Events {
		if e.Workload == "g" && e.Type == results.EvPodUnschedulable {
			reasons = append(reasons, e.Message)
		}
	}
	if len(reasons) == 0 || !strings.Contains(reasons[0], "nvidia.com/gpu") {
		t.Errorf("g: unschedulable verdicts %q, want one naming nvidia.com/gpu", reasons)
	}
}
