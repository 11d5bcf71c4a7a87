package sim

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// noHPO drops the experiments (their trials are not resumed) from a generated trace.
func noHPO(tr *trace.Trace) *trace.Trace {
	out := &trace.Trace{Jobs: map[string][]*trace.Job{}}
	for _, w := range tr.Workloads {
		if w.WorkloadType != trace.HPOExperiment {
			out.Workloads = append(out.Workloads, w)
			out.Jobs[w.WorkloadID] = tr.Jobs[w.WorkloadID]
		}
	}
	return out
}

// tight is three teams on 24 GPUs in a cohort: idle quota is borrowed (never reclaimed) and a
// higher priority preempts within its ClusterQueue; the generated load queues.
const tight = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: tight}
nodePools:
- {name: cpu, gpuFamily: CPU, count: 2, cpu: 64, memory: 256Gi}
- {name: h100, gpuFamily: H100-SXM, count: 3, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
cohorts:
- name: all
clusterQueues:
- name: team-a-cq
  cohort: all
  preemption: &p {withinClusterQueue: LowerPriority}
  quotas:
  - flavor: cpu
    resources: {cpu: 64, memory: 256Gi}
  - flavor: h100-sxm
    resources: {cpu: 288, memory: 3000Gi, nvidia.com/gpu: 12}
- name: team-b-cq
  cohort: all
  preemption: *p
  quotas:
  - flavor: cpu
    resources: {cpu: 32, memory: 128Gi}
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
- name: team-c-cq
  cohort: all
  preemption: *p
  quotas:
  - flavor: cpu
    resources: {cpu: 32, memory: 128Gi}
  - flavor: h100-sxm
    resources: {cpu: 96, memory: 1000Gi, nvidia.com/gpu: 4}
teams:
- {name: team-a, clusterQueue: team-a-cq}
- {name: team-b, clusterQueue: team-b-cq}
- {name: team-c, clusterQueue: team-c-cq}
priorityClasses:
  performance: {value: 1000}
  standard: {value: 100}
  eco: {value: 10}
`

// TestResumeReproducesTheRun: a run stopped at T writes its state; a run resumed from that state
// (the workloads alive at T with their Workloads' status, their pods' progress and nodes, the
// ones Kueue kept aside as inadmissible, and the arrivals after T) is the full run from T on:
// every workload pending at T is admitted when the full run admitted it, every one admitted at T
// finishes when it did, and every event after T is the full run's.
func TestResumeReproducesTheRun(t *testing.T) {
	tr := noHPO(generated(t, 150, 5))
	s := spec(t, tight)
	base := Config{Trace: tr, TraceName: "generated-150-seed-5", Spec: s, Seed: 1, Timing: DefaultTiming, WallClock: fixedWall()}
	want := runToEnd(t, base)
	for _, at := range []float64{1800, 7200, 28800} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			st, dir := stateAt(t, base, at)
			rest, err := trace.LoadWorkloads(context.Background(), filepath.Join(dir, st.Trace), trace.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cs, err := rcluster.Load(filepath.Join(dir, st.Cluster))
			if err != nil {
				t.Fatal(err)
			}
			resumed := base
			resumed.Trace, resumed.Spec, resumed.Resume, resumed.OutDir = rest, cs, st, t.TempDir()
			if _, err := Run(context.Background(), resumed); err != nil {
				t.Fatal(err)
			}
			got, err := results.Load(resumed.OutDir)
			if err != nil {
				t.Fatal(err)
			}
			if e := firstDivergence(want, got, at); e != "" {
				t.Errorf("the resumed run departs from the full run at: %s", e)
			}
			// The API-visible state an hour later is the full run's too: creation times, conditions
			// and requeue state of every Workload, not only the events.
			later := func(c Config) *state.State {
				c.OutDir, c.MaxTraceSec, c.StateOut = t.TempDir(), at+3600, t.TempDir()
				if _, err := Run(context.Background(), c); err == nil {
					t.Fatal("a run stopped at the limit is incomplete, and says so")
				}
				s, err := state.Load(filepath.Join(c.StateOut, state.StateFile))
				if err != nil {
					t.Fatal(err)
				}
				// What the sim draws in the order Workloads are created, which the resumed run
				// creates in another: the UIDs and name suffixes messages give, and the
				// nanoseconds that keep creation timestamps unique.
				for i := range s.Workloads {
					w := &s.Workloads[i]
					w.CreatedSec = math.Round(w.CreatedSec*1e6) / 1e6
					for j := range w.Conditions {
						c := &w.Conditions[j]
						c.Message = uidPattern.ReplaceAllString(c.Message, "UID: -")
						c.Message = nameSuffix.ReplaceAllString(c.Message, "$1-")
					}
				}
				return s
			}
			// Progress is summed over other event boundaries in the resumed run: equal to float
			// rounding.
			if d := gocmp.Diff(later(base).Workloads, later(resumed).Workloads, cmpopts.EquateApprox(0, 1e-6)); d != "" {
				t.Errorf("state at %gs, full run (-) and resumed (+):\n%s", at+3600, d)
			}
			var pending, admitted int
			for _, w := range st.Workloads {
				if w.Phase == state.Admitted {
					admitted++
					fa, fb := recordOf(want, w.ID).Finished, recordOf(got, w.ID).Finished
					if !same(fa, fb) {
						t.Errorf("%s: admitted at T, finished at %s in the full run, %s resumed", w.ID, ptr(fa), ptr(fb))
					}
					continue
				}
				pending++
				a, b := admittedAfter(want, w.ID, at), admittedAfter(got, w.ID, at)
				switch {
				case a == nil || b == nil:
					t.Errorf("%s: admitted at %v in the full run, %v resumed", w.ID, ptr(a), ptr(b))
				case math.Abs(*a-*b) > 1e-6:
					t.Errorf("%s: admitted at %gs in the full run, %gs resumed", w.ID, *a, *b)
				}
			}
			if pending == 0 || admitted == 0 {
				t.Fatalf("at %gs: %d pending and %d admitted: the test needs both", at, pending, admitted)
			}
			t.Logf("at %gs: %d pending, %d admitted, %d still to come", at, pending, admitted, len(rest.Workloads)-pending-admitted)
		})
	}
}

// runToEnd runs c to the end and loads its results.
func runToEnd(t *testing.T, c Config) *results.Dir {
	t.Helper()
	c.OutDir = t.TempDir()
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	d, err := results.Load(c.OutDir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stateAt runs c to trace time at and loads the state it writes there, and its directory.
func stateAt(t *testing.T, c Config, at float64) (*state.State, string) {
	t.Helper()
	c.OutDir, c.MaxTraceSec, c.StateOut = t.TempDir(), at, t.TempDir()
	if _, err := Run(context.Background(), c); err == nil {
		t.Fatal("a run stopped at the limit is incomplete, and says so")
	}
	st, err := state.Load(filepath.Join(c.StateOut, state.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	return st, c.StateOut
}

var (
	uidPattern = regexp.MustCompile(`UID: [0-9a-f-]+`)
	nameSuffix = regexp.MustCompile(`(workload-\d+)-[0-9a-f]{5}\b`)
)

// firstDivergence names the first event after t that the two runs do not share (Kueue's and the
// pods' events; submissions and Workload creations of the resumed workloads differ by design).
func firstDivergence(a, b *results.Dir, t float64) string {
	keep := func(d *results.Dir) []results.Event {
		var out []results.Event
		for _, e := range d.Events {
			// The energy of pods stopped unfinished is booked at the end, and a resumed run
			// knows none from before t.
			if e.T > t && e.Type != results.EvSubmitted && e.Type != results.EvWorkloadCreated && e.Type != results.EvLostEnergy &&
				(!strings.Contains(e.Workload, "-trial-") || e.Type != results.EvAllPodsRunning) {
				out = append(out, e)
			}
		}
		return out
	}
	ea, eb := keep(a), keep(b)
	for i := range min(len(ea), len(eb)) {
		x, y := ea[i], eb[i]
		// A resumed experiment's live trials are workloads of their own ("<id>-trial-<n>").
		if yw, _, ok := strings.Cut(y.Workload, "-trial-"); ok && x.Workload == yw {
			y.Workload = yw
		}
		if math.Abs(x.T-y.T) > 1e-6 || x.Workload != y.Workload || x.Type != y.Type {
			return fmt.Sprintf("event %d: full run %g %s %s %s %s, resumed %g %s %s %s %s", i, x.T, x.Workload, x.Type, x.Object, x.Reason, y.T, y.Workload, y.Type, y.Object, y.Reason)
		}
	}
	if len(ea) != len(eb) {
		return fmt.Sprintf("%d events after %gs in the full run, %d resumed", len(ea), t, len(eb))
	}
	return ""
}

// admittedAfter is the first admission of workload id at or after t.
func admittedAfter(d *results.Dir, id string, t float64) *float64 {
	for _, e := range d.Events {
		if e.Workload == id && e.Type == results.EvAdmitted && e.T >= t {
			return &e.T
		}
	}
	return nil
}

func same(a, b *float64) bool {
	return a == nil && b == nil || a != nil && b != nil && math.Abs(*a-*b) < 1e-6
}

func recordOf(d *results.Dir, id string) results.Record {
	for _, r := range d.Workloads {
		if r.ID == id {
			return r
		}
	}
	return results.Record{}
}

func ptr(p *float64) string {
	if p == nil {
		return "never"
	}
	return fmt.Sprint(*p)
}

// TestResumeOneRoleOfTwoPodSets: a distributed training run written as one role of two pods
// renders as two pod sets (a launcher and a worker) of that role; resumed half way, both pods
// continue on their nodes from where they stood, and it finishes when the full run finished it:
// 2,000 s of work from its admission, not 1,000 s later for a pod that lost its place.
func TestResumeOneRoleOfTwoPodSets(t *testing.T) {
	line := `{"type":"workload","schemaVersion":"v2","workloadId":"dt","submitTimeOffsetSec":0,"namespace":"team-a","workloadType":"distributed_training","durationSec":2000,` +
		`"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":0.5,"memoryIntensity":0.3,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},` +
		`"pods":[{"role":"worker","replicas":2,"requests":{"cpu":"4","memory":"16Gi","nvidia.com/gpu":"8"}}],"intentClass":"standard"}`
	_, tr := testutil.WriteTrace(t, line)
	base := Config{Trace: tr, TraceName: "hand", Spec: spec(t, tight), Seed: 1, Timing: DefaultTiming, WallClock: fixedWall()}
	want := runToEnd(t, base)
	st, _ := stateAt(t, base, 1000)
	if len(st.Workloads) != 1 || len(st.Workloads[0].Progress) != 2 || st.Workloads[0].Progress[0].Role != st.Workloads[0].Progress[1].Role {
		t.Fatalf("state %+v: want one workload with two pod sets of one role", st.Workloads)
	}
	resumed := base
	resumed.Resume, resumed.OutDir = st, t.TempDir()
	if _, err := Run(context.Background(), resumed); err != nil {
		t.Fatal(err)
	}
	got, err := results.Load(resumed.OutDir)
	if err != nil {
		t.Fatal(err)
	}
	fa, fb := recordOf(want, "dt").Finished, recordOf(got, "dt").Finished
	if fa == nil || fb == nil || math.Abs(*fa-*fb) > 1e-6 || math.Abs(*fa-2000) > 1 {
		t.Errorf("finished at %s in the full run, %s resumed: want both at its 2,000 s of work", ptr(fa), ptr(fb))
	}
}

// TestResumeUnderTheControlPlaneModel: the state's Workloads exist at its instant, so Kueue's
// cache holds the admitted ones' quota before its first cycle, with the control-plane model on
// as without: p, pending behind two holders of the whole quota, is admitted when they finish at
// 1,000 s, not at once.
func TestResumeUnderTheControlPlaneModel(t *testing.T) {
	_, tr := testutil.WriteTrace(t, eightGPULine("h1", "team-a", "standard", 0, 1000), eightGPULine("h2", "team-a", "standard", 0, 1000),
		eightGPULine("p", "team-a", "standard", 100, 100))
	adm := func(id string) state.Workload {
		left := 500.0
		return state.Workload{ID: id, Phase: state.Admitted, CreatedSec: 0, AdmittedSec: new(0.0), RemainingSec: &left,
			Admission: &state.Admission{ClusterQueue: "q", PodSets: []state.PodSetFlav{{Name: "main", Count: 1,
				Flavors: map[string]string{"cpu": "h100-sxm", "memory": "h100-sxm", "nvidia.com/gpu": "h100-sxm"}}}}}
	}
	st := &state.State{NowSec: 500, Arrivals: state.ArrivalsNone,
		Workloads: []state.Workload{adm("h1"), adm("h2"), {ID: "p", Phase: state.Pending, CreatedSec: 100}}}
	m, err := controlplane.Resolve(controlplane.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range []*controlplane.Model{nil, m} {
		c := Config{Trace: tr, TraceName: "hand", Spec: spec(t, fragmented), Seed: 1, Timing: DefaultTiming, WallClock: fixedWall(), Resume: st, ControlPlane: cp}
		d := runToEnd(t, c)
		if a := admittedAfter(d, "p", 500); a == nil || *a < 1000 || *a > 1002 {
			t.Errorf("control plane %v: p admitted at %s, want when the holders finish, 1,000 s (and Kueue's requeue batch)", cp != nil, ptr(a))
		}
	}
}

// TestStateOfAWorkloadAdmittedAtOnce: a Workload's creation time is its submission plus a
// nanosecond per Workload created before it (a unique order), and a cycle that ends at that
// instant admits it there: the state writes it admitted no earlier than it was created, so the
// state loads (state.Load validates it).
func TestStateOfAWorkloadAdmittedAtOnce(t *testing.T) {
	const twoQueues = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: two-queues}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 2, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
clusterQueues:
- name: qa
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
- name: qb
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
teams:
- {name: team-a, clusterQueue: qa}
- {name: team-b, clusterQueue: qb}
`
	// v's cycle starts at 100 and ends at 100.01, when w is submitted: w is that cycle's head of qb.
	_, tr := testutil.WriteTrace(t, eightGPULine("v", "team-a", "standard", 100, 1000), eightGPULine("w", "team-b", "standard", 100.01, 1000))
	st, _ := stateAt(t, Config{Trace: tr, TraceName: "hand", Spec: spec(t, twoQueues), Seed: 1, Timing: DefaultTiming, WallClock: fixedWall()}, 500)
	w := st.Index()["w"]
	if w == nil || w.Phase != state.Admitted || *w.AdmittedSec != w.CreatedSec {
		t.Errorf("workload %+v admitted at %s: want w admitted when it was created", w, ptr(w.AdmittedSec))
	}
}
