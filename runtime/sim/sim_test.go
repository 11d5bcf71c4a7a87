package sim

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kubesched"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

var update = flag.Bool("update", false, "rewrite golden files")

// twoTeams is one 8-GPU node per team in a cohort: team-a owns 8 GPUs of nominal quota, team-b
// none, so team-b's work borrows and team-a reclaims by preemption; a CPU pool for CPU work.
const twoTeams = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: two-teams}
nodePools:
- {name: cpu, gpuFamily: CPU, count: 1, cpu: 64, memory: 256Gi}
- {name: h100, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
cohorts:
- name: all
clusterQueues:
- name: team-a-cq
  cohort: all
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  quotas:
  - flavor: cpu
    resources: {cpu: 64, memory: 256Gi}
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
- name: team-b-cq
  cohort: all
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  quotas:
  - flavor: cpu
    resources: {cpu: 0, memory: 0}
  - flavor: h100-sxm
    resources: {cpu: 0, memory: 0, nvidia.com/gpu: 0}
teams:
- {name: team-a, clusterQueue: team-a-cq}
- {name: team-b, clusterQueue: team-b-cq}
priorityClasses:
  performance: {value: 1000}
  standard: {value: 100}
  eco: {value: 10}
`

func spec(t *testing.T, doc string) *rcluster.Spec {
	t.Helper()
	s, err := rcluster.Parse("test.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wl(id, ns string, at float64, f trace.Family, dur float64, gpus, replicas int) *trace.Workload {
	req := trace.Requests{trace.ResourceCPU: "4", trace.ResourceMemory: "16Gi"}
	if gpus > 0 {
		req[trace.ResourceGPU] = fmt.Sprint(gpus)
	}
	role := trace.RoleMain
	if f == trace.HPOExperiment {
		role = trace.RoleTrial
	}
	return &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: id, SubmitTimeOffsetSec: at, Namespace: ns,
		WorkloadType: f, DurationSec: dur, IntentClass: trace.IntentStandard,
		SharedIntensityProfile: trace.Profile{CPUUtilization: 0.3, GPUUtilization: 0.8, MemoryIntensity: 0.5},
		Pods:                   []trace.PodGroup{{Role: role, Replicas: replicas, Requests: req}}}
}

// run replays workloads on doc with a fixed wall clock and returns the results read back.
func run(t *testing.T, doc string, tm Timing, ws ...*trace.Workload) (*results.Dir, error) {
	t.Helper()
	return runWith(t, doc, func(c *Config) { c.Timing = tm }, ws...)
}

// runWith is run with the config set by set.
func runWith(t *testing.T, doc string, set func(*Config), ws ...*trace.Workload) (*results.Dir, error) {
	t.Helper()
	tr := &trace.Trace{Workloads: ws, Jobs: map[string][]*trace.Job{}}
	trace.SortWorkloads(tr.Workloads)
	out := t.TempDir()
	cfg := Config{Trace: tr, TraceName: "t.jsonl", Spec: spec(t, doc), Seed: 1, OutDir: out, WallClock: fixedWall()}
	set(&cfg)
	_, err := Run(context.Background(), cfg)
	d, lerr := results.Load(out)
	if lerr != nil {
		t.Fatal(lerr)
	}
	return d, err
}

// generated is an n-workload trace of the default profile, a workload every 20 s on average.
func generated(t *testing.T, n int, seed uint64) *trace.Trace {
	t.Helper()
	p, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	p.Arrival.MeanInterArrivalSec = 20
	tr, err := trace.LoadWorkloads(context.Background(), testutil.WriteGenerated(t, p, n, seed), trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func fixedWall() func() time.Time {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { return t0 }
}

func record(t *testing.T, d *results.Dir, id string) results.Record {
	t.Helper()
	for _, r := range d.Workloads {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no record %s", id)
	return results.Record{}
}

func events(d *results.Dir, id string) []results.EventType {
	var out []results.EventType
	for _, e := range d.Events {
		if e.Workload == id {
			out = append(out, e.Type)
		}
	}
	return out
}

// TestLoneWorkload: alone on an idle cluster a workload waits one scheduling cycle and its pod
// start, then takes exactly its work's time, with the whole event sequence recorded.
func TestLoneWorkload(t *testing.T) {
	d, err := run(t, twoTeams, Timing{CycleSec: 0.25, PodStartSec: 1}, wl("w", "team-a", 100, trace.SingleGPUTraining, 3600, 2, 1))
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, d, "w")
	tta, _ := r.TimeToAdmission()
	jct, _ := r.JCT()
	if r.State != results.StateSucceeded || math.Abs(tta-0.25) > 1e-9 || math.Abs(jct-(0.25+1+3600)) > 1e-6 {
		t.Fatalf("state %s, TTA %g, JCT %g; want Succeeded, 0.25, 3601.25", r.State, tta, jct)
	}
	if r.GPUSeconds != 2*3600 || !(r.EnergyJ > 0) || r.LostEnergyJ != 0 || r.Flavors["main"] != "h100-sxm" {
		t.Errorf("GPU-seconds %g, energy %g J (lost %g), flavors %v", r.GPUSeconds, r.EnergyJ, r.LostEnergyJ, r.Flavors)
	}
	want := fmt.Sprint([]results.EventType{results.EvSubmitted, results.EvWorkloadCreated, results.EvQuotaReserved, results.EvAdmitted,
		results.EvPodRunning, results.EvAllPodsRunning, results.EvPodFinished, results.EvFinished})
	if got := fmt.Sprint(events(d, "w")); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	if d.Summary.Engine != results.EngineSim || d.Summary.States[results.StateSucceeded] != 1 {
		t.Errorf("summary engine %q, states %v", d.Summary.Engine, d.Summary.States)
	}
	if k := d.Summary.Kueue; k == nil || k.Version != kueuelib.KueueVersion {
		t.Errorf("summary's Kueue %+v, want the linked %s named", k, kueuelib.KueueVersion)
	}
}

// requeueBatchSec is Kueue's inadmissible-requeue batch period (v0.17 on): a workload that did not
// fit goes back to its queue's heap one second after the notification that quota freed.
const requeueBatchSec = 1

// TestReclaimPreemptsBorrower: team-b borrows team-a's idle GPUs; team-a's workload reclaims them
// by preemption: the borrower is evicted and preempted, its pod deleted (its energy lost), it is
// requeued and runs again from the start one requeue batch after team-a's workload is done.
func TestReclaimPreemptsBorrower(t *testing.T) {
	d, err := run(t, twoTeams, Timing{},
		wl("borrower", "team-b", 0, trace.SingleGPUTraining, 1000, 8, 1),
		wl("owner", "team-a", 100, trace.SingleGPUTraining, 500, 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	b, o := record(t, d, "borrower"), record(t, d, "owner")
	if len(b.Preemptions) != 1 || len(b.Evictions) != 1 || b.Requeues != 1 || b.Preemptions[0].T != 100 {
		t.Fatalf("borrower: preemptions %v, evictions %v, requeues %d", b.Preemptions, b.Evictions, b.Requeues)
	}
	if jct, _ := o.JCT(); jct != 500 {
		t.Errorf("owner JCT %g, want 500 (admitted as soon as the borrower released its quota)", jct)
	}
	// The borrower ran 100 s, lost it, waited for the owner (100..600) and the requeue batch, and
	// ran 1000 s again.
	if *b.Finished != 600+requeueBatchSec+1000 || b.GPUSeconds != 8*1100 || !(b.LostEnergyJ > 0) {
		t.Errorf("borrower finished %g, GPU-seconds %g, lost energy %g J", *b.Finished, b.GPUSeconds, b.LostEnergyJ)
	}
}

// TestPreemptedResumesFromCheckpointAfterRestart: the checkpoint and restart costs of a
// workload's checkpointing on the sim engine. The borrower checkpoints every 40 s of progress, each checkpoint a 5 s pause: by its
// preemption at 100 s it has written the checkpoints at 40 and 80 (counted at 45 and 90 s). Its
// replacement starts one requeue batch after 600 s from the checkpoint at 80, pays the 20 s restart
// overhead, then does the 920 s left with 22 more checkpoints (none at the end): it finishes at
// 601+20+920+22·5.
func TestPreemptedResumesFromCheckpointAfterRestart(t *testing.T) {
	b := wl("borrower", "team-b", 0, trace.SingleGPUTraining, 1000, 8, 1)
	b.CheckpointIntervalSec, b.CheckpointCostSec, b.RestartOverheadSec = 40, 5, 20
	d, err := run(t, twoTeams, Timing{}, b, wl("owner", "team-a", 100, trace.SingleGPUTraining, 500, 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, d, "borrower")
	if r.Finished == nil {
		t.Fatalf("borrower did not finish: %s", r.State)
	}
	if want := 600 + requeueBatchSec + 20 + 920 + 22*5.0; len(r.Preemptions) != 1 || math.Abs(*r.Finished-want) > 1e-6 {
		t.Errorf("borrower: preemptions %v, finished at %g; want 1 preemption, finished at %g", r.Preemptions, *r.Finished, want)
	}
}

// TestPreemptedTwiceResumesFromTheLaterCheckpoint: the borrower of the test above is preempted
// again, at 790 s, by a second owner. Its replacement had resumed at 621 from progress 80 and
// written checkpoints at progress 120, 160 and 200 (the one at 240, from 796, was not finished):
// the second replacement starts one requeue batch after 1290, pays the restart overhead and does
// the 800 s left from progress 200, with 19 checkpoints (240 to 960). Keeping the first
// eviction's checkpoint instead would redo 120 s.
func TestPreemptedTwiceResumesFromTheLaterCheckpoint(t *testing.T) {
	b := wl("borrower", "team-b", 0, trace.SingleGPUTraining, 1000, 8, 1)
	b.CheckpointIntervalSec, b.CheckpointCostSec, b.RestartOverheadSec = 40, 5, 20
	d, err := run(t, twoTeams, Timing{}, b, wl("owner", "team-a", 100, trace.SingleGPUTraining, 500, 8, 1),
		wl("owner2", "team-a", 790, trace.SingleGPUTraining, 500, 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, d, "borrower")
	if r.Finished == nil {
		t.Fatalf("borrower did not finish: %s", r.State)
	}
	if want := 1290 + requeueBatchSec + 20 + 800 + 19*5.0; len(r.Preemptions) != 2 || math.Abs(*r.Finished-want) > 1e-6 {
		t.Errorf("borrower: preemptions %v, finished at %g; want 2 preemptions, finished at %g", r.Preemptions, *r.Finished, want)
	}
}

// eightGPULine is a trace line of a one-pod single_gpu_training workload asking 8 GPUs (8 CPUs,
// 64 Gi) in namespace ns, of intent ("": none, standard), submitted at at for d seconds.
func eightGPULine(id, ns, intent string, at, d float64) string {
	in := ""
	if intent != "" {
		in = fmt.Sprintf(`,"intentClass":%q`, intent)
	}
	return fmt.Sprintf(`{"type":"workload","schemaVersion":"v2","workloadId":%q,"submitTimeOffsetSec":%g,"namespace":%q,"workloadType":"single_gpu_training","durationSec":%g%s,`+
		`"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":0.5,"memoryIntensity":0.3,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},`+
		`"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","memory":"64Gi","nvidia.com/gpu":"8"}}]}`, id, at, ns, d, in)
}

// fragmented is two 8-GPU nodes under one 16-GPU queue.
const fragmented = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: fragmented}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 2, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
clusterQueues:
- name: q
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 384, memory: 4000Gi, nvidia.com/gpu: 16}
teams:
- {name: team-a, clusterQueue: q}
`

// TestPodWaitsForANode: two 1-GPU pods spread over both nodes (kube-scheduler's default
// LeastAllocated), so an 8-GPU workload that quota admits waits, admitted, until the first small
// one ends; with MostAllocated weighted on GPUs (the README's placement example), given to the sim or in the
// spec's scheduler section, the small ones share a node and it runs at once.
func TestPodWaitsForANode(t *testing.T) {
	ws := func() []*trace.Workload {
		return []*trace.Workload{wl("s1", "team-a", 0, trace.SingleGPUTraining, 1000, 1, 1),
			wl("s2", "team-a", 1, trace.SingleGPUTraining, 2000, 1, 1),
			wl("big", "team-a", 2, trace.SingleGPUTraining, 100, 8, 1)}
	}
	// The spec's scheduler section, as the README's placement example writes it.
	packed := fragmented + `scheduler:
  scoringStrategy:
    type: MostAllocated
    resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]
`
	for _, tt := range []struct {
		name    string
		spec    string
		scoring string  // Config.Scoring's type ("": the spec's)
		running float64 // when big's pod runs
	}{
		{"default", fragmented, "", 1000},
		{"config MostAllocated", fragmented, "MostAllocated", 2},
		{"spec MostAllocated", packed, "", 2},
	} {
		tr := &trace.Trace{Workloads: ws(), Jobs: map[string][]*trace.Job{}}
		out := t.TempDir()
		cfg := Config{Trace: tr, Spec: spec(t, tt.spec), Seed: 1, OutDir: out, WallClock: fixedWall()}
		cfg.Scoring.Type = tt.scoring
		if tt.scoring != "" {
			cfg.Scoring.Resources = []kubesched.ResourceSpec{{Name: "nvidia.com/gpu", Weight: 5}, {Name: "cpu", Weight: 1}}
		}
		if _, err := Run(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		d, err := results.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		big := record(t, d, "big")
		if *big.Admitted != 2 || *big.FirstPodRunning != tt.running || big.State != results.StateSucceeded {
			t.Errorf("%s: big admitted at %g, running at %g (%s), want admitted at 2, running at %g",
				tt.name, *big.Admitted, *big.FirstPodRunning, big.State, tt.running)
		}
	}
}

// TestKatibTrials: an experiment's trials are created at most parallelTrialCount at a time (the
// rendered Experiment sets it to the trial count) and the experiment finishes with the last.
func TestKatibTrials(t *testing.T) {
	d, err := run(t, twoTeams, Timing{}, wl("hpo", "team-a", 0, trace.HPOExperiment, 600, 1, 12))
	if err != nil {
		t.Fatal(err)
	}
	r := record(t, d, "hpo")
	trials, created := 0, 0
	for _, e := range d.Events {
		switch e.Type {
		case results.EvTrialCreated:
			trials++
		case results.EvWorkloadCreated:
			created++
		}
	}
	// Twelve 1-GPU trials on 8 GPUs: eight run, four wait for quota and the requeue batch after
	// the first eight end at 600; the last ends at 1201.
	if trials != 12 || created != 12 || r.State != results.StateSucceeded || *r.Finished != 600+requeueBatchSec+600 {
		t.Fatalf("trials %d, workloads %d, state %s, finished %v", trials, created, r.State, *r.Finished)
	}
	// Each trial's pod runs the instant its quota is reserved: no quota is held idle (results
	// map a trial's pod to its trial Job by the Job controller's pod naming).
	if ri := d.Summary.ReservedIdle; ri == nil || ri.GPUHours != 0 || len(d.Waits) != 1 || d.Waits[0].LongestSec != 0 {
		t.Errorf("reserved idle %+v, waits %+v: want none", ri, d.Waits)
	}
}

// TestUnplaceableIsRejected: a namespace no team takes cannot be placed: the workload is recorded
// rejected, the others run, and Run says so.
func TestUnplaceableIsRejected(t *testing.T) {
	d, err := run(t, twoTeams, Timing{}, wl("ok", "team-a", 0, trace.CPUPreprocess, 60, 0, 1), wl("lost", "nowhere", 0, trace.CPUPreprocess, 60, 0, 1))
	if !errors.Is(err, replay.ErrRejected) {
		t.Fatalf("error %v, want replay.ErrRejected", err)
	}
	if r := record(t, d, "lost"); r.State != results.StateRejected || r.Error == "" {
		t.Errorf("lost: state %s, error %q", r.State, r.Error)
	}
	if r := record(t, d, "ok"); r.State != results.StateSucceeded {
		t.Errorf("ok: %s", r.State)
	}
}

// TestGoldenAndDeterministic replays a generated trace twice: every results file is
// byte-identical, and summary.json matches the golden file (go test -update rewrites it).
func TestGoldenAndDeterministic(t *testing.T) {
	tr := generated(t, 120, 3)
	specPath := filepath.Join("..", "..", "examples", "clusters", "teams.yaml")
	s, err := rcluster.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for range 2 {
		out := t.TempDir()
		if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "generated-120-seed-3", Spec: s, Seed: 1,
			Timing: DefaultTiming, OutDir: out, WallClock: fixedWall()}); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, out)
	}
	for _, f := range []string{results.EventsFile, results.WorkloadsFile, results.TimeSeriesFile, results.SummaryFile, results.IdleFile} {
		a, _ := os.ReadFile(filepath.Join(dirs[0], f))
		b, _ := os.ReadFile(filepath.Join(dirs[1], f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: runs of one trace and seed differ (%d and %d bytes)", f, len(a), len(b))
		}
	}
	// Quota held idle is written by every engine: the summary's total is idle.csv's rows summed.
	d, err := results.Load(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, w := range d.Waits {
		sum += w.GPUHours
	}
	if ri := d.Summary.ReservedIdle; ri == nil || len(d.Waits) == 0 || math.Abs(ri.GPUHours-sum) > 1e-3*float64(len(d.Waits)) { // idle.csv rounds each row
		t.Errorf("reservedIdle %+v, idle.csv %d rows summing to %g GPU-h", ri, len(d.Waits), sum)
	}
	got, _ := os.ReadFile(filepath.Join(dirs[0], results.SummaryFile))
	golden := filepath.Join("testdata", "teams-120-seed-3.summary.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("summary.json differs from %s (go test -update rewrites it)", golden)
	}
}

// deep is 75 8-GPU nodes under one ClusterQueue: room for 600 one-GPU workloads at once.
const deep = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: deep}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 75, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
clusterQueues:
- name: q
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 14400, memory: 150000Gi, nvidia.com/gpu: 600}
teams:
- {name: team-a, clusterQueue: q}
`

// TestDeepQueue (kubernetes-sigs/kueue#14477): 600 workloads queued at once in one ClusterQueue,
// with quota and nodes for all. Kueue tries one head per ClusterQueue per cycle, so the k-th
// waits k cycles: the wait grows linearly with the queue position, at the cycle's duration.
func TestDeepQueue(t *testing.T) {
	const n, cycle = 600, 0.05
	ws := make([]*trace.Workload, n)
	for i := range ws {
		ws[i] = wl(fmt.Sprintf("w%03d", i), "team-a", 0, trace.SingleGPUTraining, 3600, 1, 1)
	}
	d, err := run(t, deep, Timing{CycleSec: cycle}, ws...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		r := record(t, d, fmt.Sprintf("w%03d", i))
		if tta, _ := r.TimeToAdmission(); math.Abs(tta-float64(i+1)*cycle) > 1e-6 {
			t.Fatalf("%s (position %d) waited %g s, want %g", r.ID, i, tta, float64(i+1)*cycle)
		}
	}
}

// TestDeepQueueRateLimited is TestDeepQueue with Kueue's client limited to 2 writes a second
// (burst 1) by a control-plane model whose other costs are nil but the cycle's. The scheduler's
// admission write is its only write here (the harness's jobs: their writes are the harness's),
// made asynchronously: cycles still run every 50 ms, but the admission of the k-th
// workload is issued at (k+1)·0.05 s, and the bucket, full (one token) when the first takes its
// token at 0.05 s, has its k-th next token 0.05 + k/2 s; a workload is admitted when its write is
// seen, at max((k+1)·0.05, 0.05 + k/2) s.
func TestDeepQueueRateLimited(t *testing.T) {
	const n, cycle, qps = 40, 0.05, 2.0
	ws := make([]*trace.Workload, n)
	for i := range ws {
		ws[i] = wl(fmt.Sprintf("w%03d", i), "team-a", 0, trace.SingleGPUTraining, 3600, 1, 1)
	}
	m := &controlplane.Model{Name: "slow-client", QPS: qps, Burst: 1, CycleBaseSec: cycle, HarnessJobs: true}
	d, err := runWith(t, deep, func(c *Config) { c.ControlPlane = m }, ws...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ws {
		r := record(t, d, fmt.Sprintf("w%03d", i))
		want := math.Max(float64(i+1)*cycle, cycle+float64(i)/qps)
		if tta, _ := r.TimeToAdmission(); math.Abs(tta-want) > 1e-6 {
			t.Fatalf("%s (position %d) waited %g s, want %g", r.ID, i, tta, want)
		}
	}
	if k := d.Summary.Kueue; k == nil || k.ControlPlane == nil || k.ControlPlane.Name != "slow-client" || k.ControlPlane.QPS != qps {
		t.Errorf("the summary does not name the model: %+v", k)
	}
}

// TestHarnessRunnerFinishesOneAtATime: with the harness's jobs (jobWrites: harness) each finish
// is a write of the runner's single worker, 0.5 s each here: the k-th finish, in the order the
// workloads' pods finished, is seen 0.5 s after the later of its pod's end and the finish before
// it. Kueue's own writes cost nothing here (no rate limit, no latency).
func TestHarnessRunnerFinishesOneAtATime(t *testing.T) {
	const n, write = 10, 0.5
	ws := make([]*trace.Workload, n)
	for i := range ws {
		ws[i] = wl(fmt.Sprintf("w%03d", i), "team-a", 0, trace.SingleGPUTraining, 1, 1, 1)
	}
	m := &controlplane.Model{Name: "harness", QPS: -1, CycleBaseSec: 0.05, HarnessJobs: true, HarnessWriteSec: write}
	d, err := runWith(t, deep, func(c *Config) { c.ControlPlane = m }, ws...)
	if err != nil {
		t.Fatal(err)
	}
	podDone := map[string]float64{}
	for _, e := range d.Events {
		if e.Type == results.EvPodFinished {
			podDone[e.Workload] = e.T
		}
	}
	ids := make([]string, 0, n)
	for _, w := range ws {
		ids = append(ids, w.WorkloadID)
	}
	slices.SortStableFunc(ids, func(a, b string) int { return cmp.Compare(podDone[a], podDone[b]) })
	prev := 0.0
	for _, id := range ids {
		want := math.Max(podDone[id], prev) + write
		r := record(t, d, id)
		if r.Finished == nil || math.Abs(*r.Finished-want) > 1e-6 {
			t.Fatalf("%s: pod done at %g, finish seen at %v, want %g", id, podDone[id], r.Finished, want)
		}
		prev = want
	}
	if prev < float64(n)*write {
		t.Errorf("the last finish at %g: the runner's writes were not one at a time", prev)
	}
}

// TestTopologyAwareScheduling: the fragmented cluster with a Topology declared. Kueue's
// topology-aware scheduling (implied for every workload of a topology flavor) assigns each pod a
// node, packing (its BestFit profile): both small pods land on one node, so the 8-GPU workload is
// admitted onto the other and runs at once (without a Topology the kube-scheduler spreads them
// and it waits, TestPodWaitsForANode). A gang prefers one rack (render's podset-preferred-topology);
// no rack (one node each here) holds it, so Kueue spreads it over the block and it runs.
func TestTopologyAwareScheduling(t *testing.T) {
	doc := strings.Replace(fragmented, "nodePools:", "topology: {nodesPerRack: 1, racksPerBlock: 2}\nnodePools:", 1)
	d, err := run(t, doc, Timing{},
		wl("s1", "team-a", 0, trace.SingleGPUTraining, 1000, 1, 1),
		wl("s2", "team-a", 1, trace.SingleGPUTraining, 2000, 1, 1),
		wl("big", "team-a", 2, trace.SingleGPUTraining, 100, 8, 1),
		gang("gang", "team-a", 3000, 100, 8, 2))
	if err != nil {
		t.Fatal(err)
	}
	big := record(t, d, "big")
	if *big.Admitted != 2 || *big.FirstPodRunning != 2 {
		t.Errorf("big admitted at %g, running at %g; want both at 2", *big.Admitted, *big.FirstPodRunning)
	}
	if g := record(t, d, "gang"); g.State != results.StateSucceeded || *g.AllPodsRunning != 3000 {
		t.Errorf("gang %s, all pods running at %v", g.State, g.AllPodsRunning)
	}
}

// gang is an MPI workload: a CPU launcher and replicas workers of gpus GPUs each.
func gang(id, ns string, at, dur float64, gpus, replicas int) *trace.Workload {
	w := wl(id, ns, at, trace.DistributedTraining, dur, gpus, replicas)
	w.Pods[0].Role = trace.RoleWorker
	w.Pods = append([]trace.PodGroup{{Role: trace.RoleLauncher, Replicas: 1,
		Requests: trace.Requests{trace.ResourceCPU: "1", trace.ResourceMemory: "1Gi"}}}, w.Pods...)
	return w
}

// TestMPILauncherGetsItsFlavor: mpi-operator v0.8.2 makes an MPIJob's launcher Job before Kueue
// admits the MPIJob but on resume copies the admitted template's node selector and tolerations
// into it, so the launcher pod, admitted on the CPU flavor (which tolerates the CPU pool's taint),
// runs on the CPU node and the workers on the GPU node.
func TestMPILauncherGetsItsFlavor(t *testing.T) {
	tainted := strings.Replace(twoTeams, "- {name: cpu, gpuFamily: CPU, count: 1, cpu: 64, memory: 256Gi}",
		"- {name: cpu, gpuFamily: CPU, count: 1, cpu: 64, memory: 256Gi, taints: [{key: dedicated, value: cpu, effect: NoSchedule}]}", 1)
	if tainted == twoTeams {
		t.Fatal("the CPU pool line of twoTeams changed")
	}
	d, err := run(t, tainted, Timing{}, gang("mpi", "team-a", 0, 600, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, e := range d.Events {
		if e.Workload == "mpi" && e.Type == results.EvPodRunning {
			ran++
			want := "h100-"
			if strings.Contains(e.Object, "-launcher") {
				want = "cpu-"
			}
			if !strings.HasPrefix(e.Node, want) {
				t.Errorf("%s ran on %q, want a node %s*", e.Object, e.Node, want)
			}
		}
	}
	if ran != 3 {
		t.Errorf("%d pods ran, want the launcher and two workers", ran)
	}
	if r := record(t, d, "mpi"); r.State != results.StateSucceeded {
		t.Errorf("mpi ended %s", r.State)
	}
}
