package experiment

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/model/trace"

	"github.com/kueuelab/kueuelab/render/contract"

	"k8s.io/client-go/rest"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

const teams = "../../examples/clusters/teams.yaml"

// header is an experiment file up to its variants, on the teams cluster.
func header(extra string) string {
	return `apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: t}
generator: {jobs: 10, seed: 1}
cluster: ` + teams + "\n" + extra
}

func TestExamplesLoadAndPatch(t *testing.T) {
	files, err := filepath.Glob("../../examples/experiments/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, f := range files {
		e, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := range e.Variants {
			if _, _, err := e.Spec(&e.Variants[i]); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

// gpuQuota returns the nominal quota and limits of q's h100-sxm GPUs as rendered.
func gpuQuota(t *testing.T, s *cluster.Spec, q string) kueue.ResourceQuota {
	t.Helper()
	objs, err := s.Objects(cluster.Options{OmitNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		cq, ok := o.(*kueue.ClusterQueue)
		if !ok || cq.Name != q {
			continue
		}
		for _, rg := range cq.Spec.ResourceGroups {
			for _, fq := range rg.Flavors {
				for _, r := range fq.Resources {
					if fq.Name == "h100-sxm" && r.Name == "nvidia.com/gpu" {
						return r
					}
				}
			}
		}
	}
	t.Fatalf("no GPU quota for %s", q)
	return kueue.ResourceQuota{}
}

func TestPatchOperations(t *testing.T) {
	e, err := Parse("exp.yaml", []byte(header(`variants:
- name: v
  patch:
  - set: {queue: team-a, flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 64, borrowingLimit: 0, lendingLimit: unlimited}
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, borrowingLimit: 8}
  - cohort: {queue: team-c-cq, cohort: other}
  - fairSharingWeight: {queue: team-b, weight: "2"}
  - priority: {class: eco, value: 5}
  - powerCap: {pool: h100, value: "50%"}
  - nodes: {pool: h100, count: 14}
  - preemption: {queue: team-a, withinClusterQueue: Never}
  - flavorFungibility: {queue: team-b, whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}
`)))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := e.Spec(&e.Variants[0])
	if err != nil {
		t.Fatal(err)
	}
	a := gpuQuota(t, s, "team-a-cq")
	if a.NominalQuota.Value() != 64 || a.LendingLimit != nil || a.BorrowingLimit == nil || a.BorrowingLimit.Value() != 8 {
		t.Errorf("team-a quota %+v: want nominal 64, borrowing 8 (the later op), no lending limit", a)
	}
	if b := gpuQuota(t, s, "team-b-cq"); b.BorrowingLimit == nil || b.BorrowingLimit.Value() != 8 || b.NominalQuota.Value() != 32 {
		t.Errorf("team-b quota %+v", b)
	}
	if s.ClusterQueues[2].Cohort != "other" || len(s.Cohorts) != 2 {
		t.Errorf("cohort op: queue cohort %q, cohorts %+v", s.ClusterQueues[2].Cohort, s.Cohorts)
	}
	if fs := s.ClusterQueues[1].FairSharing; fs == nil || fs.Weight != "2" {
		t.Errorf("weight: %+v", fs)
	}
	if v := s.PriorityClasses.Eco.Value; v == nil || *v != 5 {
		t.Errorf("eco priority %v", v)
	}
	// 50% of an H100 SXM's 700 W, as watts because a label value cannot hold '%'.
	if got := s.NodePools[1].Labels[contract.PowerCap]; got != "350W" {
		t.Errorf("power cap label %q, want 350W", got)
	}
	if s.NodePools[1].Count != 14 {
		t.Errorf("node count %d", s.NodePools[1].Count)
	}
	if p := s.ClusterQueues[0].Preemption; p.WithinClusterQueue != "Never" || p.ReclaimWithinCohort != "Any" {
		t.Errorf("preemption %+v: want withinClusterQueue changed, the rest kept", p)
	}
	if ff := s.ClusterQueues[1].FlavorFungibility; ff == nil || ff.Preference != "PreemptionOverBorrowing" || ff.WhenCanBorrow != "TryNextFlavor" {
		t.Errorf("flavorFungibility %+v", ff)
	}
}

func TestClusterPatch(t *testing.T) {
	e, err := Parse("exp.yaml", []byte(header(`variants:
- name: v
  clusterPatch:
    metadata: {name: patched}
    defaultTeam: team-b
`)))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := e.Spec(&e.Variants[0])
	if err != nil {
		t.Fatal(err)
	}
	if s.Metadata.Name != "patched" || s.DefaultTeam != "team-b" {
		t.Errorf("merge patch not applied: %q %q", s.Metadata.Name, s.DefaultTeam)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"unknown top field", header("speedUp: 3\nvariants: [{name: a}]\n"), []string{"exp.yaml:6: speedUp: unknown field"}},
		{"unknown op", header("variants:\n- name: a\n  patch:\n  - bogus: {}\n"), []string{"exp.yaml:9: variants[0].patch[0].bogus: unknown field"}},
		{"unknown op field", header("variants:\n- name: a\n  patch:\n  - set: {queue: a, flavor: f, resource: r, nominal: 3}\n"),
			[]string{"variants[0].patch[0].set.nominal: unknown field"}},
		{"two ops in one", header("variants:\n- name: a\n  patch:\n  - {priority: {class: eco, value: 1}, nodes: {pool: p, count: 1}}\n"),
			[]string{"exp.yaml:9: variants[0].patch[0]: an operation has exactly one of"}},
		{"bad quantity", header("variants:\n- name: a\n  patch:\n  - set: {queue: a, flavor: f, resource: r, nominalQuota: lots}\n"),
			[]string{"exp.yaml:9: variants[0].patch[0]: set.nominalQuota: \"lots\" is not a non-negative quantity"}},
		{"set of a queue and a cohort", header("variants:\n- name: a\n  patch:\n  - set: {queue: a, cohort: c, flavor: f, resource: r, nominalQuota: 1}\n"),
			[]string{"exp.yaml:9: variants[0].patch[0]: set: give exactly one of queue and cohort"}},
		{"cohort with queue and parent", header("variants:\n- name: a\n  patch:\n  - cohort: {queue: a, cohort: c, parent: p}\n"),
			[]string{"exp.yaml:9: variants[0].patch[0]: cohort: give queue"}},
		{"cohort its own parent", header("variants:\n- name: a\n  patch:\n  - cohort: {cohort: c, parent: c}\n"),
			[]string{`exp.yaml:9: variants[0].patch[0]: cohort.parent: cohort "c" cannot be its own parent`}},
		{"booster on the cluster engine", header("variants:\n- name: a\n  kueueConfig: {featureGates: {PriorityBoost: true}, priorityBooster: {timeSharing: {interval: 1h}}}\n"),
			[]string{"exp.yaml:8: variants[0].kueueConfig.priorityBooster: the sim engine runs Kueue's kueue-priority-booster"}},
		{"booster without its gate", header("engine: sim\nvariants:\n- name: a\n  kueueConfig: {priorityBooster: {timeSharing: {interval: 1h}}}\n"),
			[]string{"variants[0].kueueConfig: kueue config: priorityBooster: Kueue ignores the booster's kueue.x-k8s.io/priority-boost annotation unless its PriorityBoost feature gate is on"}},
		{"booster field", header("engine: sim\nvariants:\n- name: a\n  kueueConfig: {featureGates: {PriorityBoost: true}, priorityBooster: {timeSharing: {every: 1h}}}\n"),
			[]string{`variants[0].kueueConfig: kueue config: priorityBooster: json: unknown field "every"`}},
		{"fungibility of no queue", header("variants:\n- name: a\n  patch:\n  - flavorFungibility: {whenCanBorrow: TryNextFlavor}\n"),
			[]string{"exp.yaml:9: variants[0].patch[0]: flavorFungibility.queue: required"}},
		{"no variants", header(""), []string{"variants: at least one variant is required"}},
		{"duplicate variant", header("variants: [{name: a}, {name: a}]\n"), []string{"variants[1].name: duplicate variant \"a\""}},
		{"bad variant name", header("variants: [{name: A/B}]\n"), []string{"variants[0].name: \"A/B\""}},
		{"unknown baseline", header("baseline: x\nvariants: [{name: a}]\n"), []string{"exp.yaml:6: baseline: no variant named \"x\""}},
		{"trace and generator", header("trace: t.jsonl\nvariants: [{name: a}]\n"), []string{"generator: trace and generator are exclusive"}},
		{"bad timeout", header("timeout: soon\nvariants: [{name: a}]\n"), []string{"exp.yaml:6: timeout: want a positive Go duration"}},
		{"bad strategy", header("variants:\n- name: a\n  kueueConfig: {fairSharing: {enable: true, preemptionStrategies: [X]}}\n"),
			[]string{"exp.yaml:8: variants[0].kueueConfig: fairSharing.preemptionStrategies"}},
		{"wait without timeout", header("variants:\n- name: a\n  kueueConfig: {waitForPodsReady: {enable: true}}\n"),
			[]string{"waitForPodsReady.timeout: want a positive trace-time duration"}},
		{"fault without node or workload", header("faults:\n  events:\n  - {at: 1h}\nvariants: [{name: a}]\n"),
			[]string{"exp.yaml:8: faults.events[0]: give node"}},
		{"bad fault duration", header("faults:\n  events:\n  - {at: soon, node: h100-000}\nvariants: [{name: a}]\n"),
			[]string{"exp.yaml:8", "duration \"soon\""}},
		{"variant fault field", header("variants:\n- name: a\n  faults: {random: {scale: -2}}\n"),
			[]string{"exp.yaml:8: variants[0].faults.random.scale: must be a finite number >= 0"}},
		{"workload overrides", header("variants:\n- name: a\n  workloads: {families: [training], maxRestarts: -1}\n"),
			[]string{"variants[0].workloads.families[0]: unknown family \"training\"", "variants[0].workloads.maxRestarts: must be >= 0"}},
		{"wrong kind", strings.Replace(header("variants: [{name: a}]\n"), "kind: Experiment", "kind: Exp", 1), []string{"exp.yaml:2: kind: must be \"Experiment\""}},
		{"unknown engine", header("engine: fast\nvariants: [{name: a}]\n"), []string{`exp.yaml:6: engine: engine "fast": want cluster or sim`}},
		{"sim timing without sim", header("sim: {cycle: 1s}\nvariants: [{name: a}]\n"), []string{"exp.yaml:6: sim: sim timing needs engine: sim"}},
		{"bad sim timing", header("engine: sim\nsim: {cycle: soon}\nvariants: [{name: a}]\n"), []string{"sim: cycle: want a duration"}},
		{"control plane needs sim", header("controlPlane: kueue\nvariants: [{name: a}]\n"),
			[]string{"exp.yaml:6: controlPlane: a control-plane model needs engine: sim"}},
		{"control plane file missing", header("engine: sim\nvariants: [{name: a}, {name: b, controlPlane: nowhere.yaml}]\n"),
			[]string{"exp.yaml:7: variants[1].controlPlane: control plane: open", "nowhere.yaml"}},
		{"unsupported Kueue release", header("engine: sim\nkueueVersion: v0.16.0\nvariants: [{name: a}]\n"),
			[]string{`exp.yaml:7: kueueVersion: kueue version "v0.16.0" is not supported (supported: v0.15.0, v0.17.1, v0.18.3, v0.19.2)`}},
		{"older Kueue on the cluster engine", header("variants:\n- name: a\n  kueueVersion: v0.18\n"),
			[]string{"exp.yaml:8: variants[0].kueueVersion: Kueue v0.18.3: the cluster engine runs Kueue v0.19.2; engine: sim runs v0.15.0, v0.17.1, v0.18.3, v0.19.2"}},
		{"sim refuses faults", header("engine: sim\nfaults:\n  events:\n  - {at: 1h, node: h100-000}\nvariants: [{name: a}]\n"),
			[]string{"exp.yaml:8: faults: the sim engine does not model faults: use the cluster engine"}},
		{"sim refuses a variant's faults", header("engine: sim\nvariants:\n- name: a\n  faults: {events: [{at: 1h, node: h100-000}]}\n"),
			[]string{"exp.yaml:9: variants[0].faults: the sim engine does not model faults: use the cluster engine"}},
		{"sim refuses waitForPodsReady's blockAdmission", header("engine: sim\nvariants:\n- name: a\n  kueueConfig: {waitForPodsReady: {enable: true, timeout: 5m, blockAdmission: true}}\n"),
			[]string{"variants[0].kueueConfig: kueue config: waitForPodsReady.blockAdmission: the sim engine does not model it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("exp.yaml", []byte(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
			// Every problem is a fielderr.Error naming the file; nothing is printed outside them.
			all := fielderr.All(err)
			parts := make([]string, len(all))
			for i, e := range all {
				if e.File != "exp.yaml" {
					t.Errorf("%v: File = %q, want exp.yaml", e, e.File)
				}
				parts[i] = e.Error()
			}
			if got := strings.Join(parts, "\n"); got != err.Error() {
				t.Errorf("error %q\nis not only fielderr.Errors (they print %q)", err, got)
			}
		})
	}
}

func TestSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		name, op string
		want     string
	}{
		{"unknown queue", `set: {queue: team-z, flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 1}`,
			`exp.yaml:9: variant v: patch[0].set.queue: unknown queue "team-z" (ClusterQueues: team-a-cq, team-b-cq, team-c-cq; teams: team-a, team-b, team-c`},
		{"unknown flavor", `set: {queue: team-a, flavor: a100, resource: nvidia.com/gpu, nominalQuota: 1}`,
			`exp.yaml:9: variant v: patch[0].set.flavor: unknown flavor "a100" (flavors: cpu, h100-sxm)`},
		{"limit on a missing resource", `set: {queue: team-a, flavor: cpu, resource: nvidia.com/gpu, borrowingLimit: 1}`,
			`patch[0].set.resource: queue team-a-cq has no nvidia.com/gpu quota on flavor cpu`},
		{"unknown pool", `powerCap: {pool: a100, value: eco}`, `patch[0].powerCap.pool: unknown pool "a100" (pools: cpu, h100`},
		{"cap on a CPU pool", `powerCap: {pool: cpu, value: eco}`, `patch[0].powerCap.pool: pool cpu has no GPUs`},
		{"cap out of range", `powerCap: {pool: h100, value: 5000W}`, `patch[0].powerCap.value: pool h100: power cap "5000W"`},
		{"unknown cohort", `fairSharingWeight: {cohort: nope, weight: "1"}`, `patch[0].fairSharingWeight.cohort: unknown cohort "nope" (cohorts: research)`},
		{"invalid result", `preemption: {queue: team-a, withinClusterQueue: Sometimes}`, `the patched cluster spec is invalid`},
		{"preference while the search stops", `flavorFungibility: {queue: team-a, preference: PreemptionOverBorrowing}`,
			`clusterQueues[0].flavorFungibility.preference: can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse("exp.yaml", []byte(header("variants:\n- name: v\n  patch:\n  - "+tc.op+"\n")))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = e.Spec(&e.Variants[0])
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestKueueConfigFields(t *testing.T) {
	yes := true
	k := &KueueConfig{FairSharing: &KueueFairSharing{Enable: true},
		WaitForPodsReady: &WaitForPodsReady{Enable: true, Timeout: "100m", BlockAdmission: &yes}}
	if err := k.check(); err != nil {
		t.Fatal(err)
	}
	f := k.Fields()
	fs := f["fairSharing"].(map[string]any)["preemptionStrategies"].([]string)
	if strings.Join(fs, ",") != "LessThanOrEqualToFinalShare,LessThanInitialShare" {
		t.Errorf("strategies %v", fs)
	}
	// Trace durations as written: the local Kueue runs on the trace clock.
	if w := f["waitForPodsReady"].(map[string]any); w["timeout"] != "1h40m0s" || w["blockAdmission"] != true {
		t.Errorf("waitForPodsReady %v", w)
	}
	if !(&KueueConfig{FairSharing: &KueueFairSharing{Enable: false}}).Empty() || k.Empty() {
		t.Error("Empty")
	}
}

// TestResume runs a 2-variant × 2-repeat experiment with a fake executor, then again: the
// second run executes only what has no done marker.
func TestResume(t *testing.T) {
	dir := t.TempDir()
	expFile := filepath.Join(dir, "exp.yaml")
	abs, err := filepath.Abs(teams)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(header("repeats: 2\nseed: 10\nvariants: [{name: a}, {name: b}]\n"), teams, abs, 1)
	if err := os.WriteFile(expFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Load(expFile)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var ran []string
	fake := func(_ context.Context, j *job) (*replay.Result, error) {
		ran = append(ran, j.label())
		if j.trace == nil || len(j.trace.Workloads) != 10 {
			t.Errorf("%s: trace not loaded", j.label())
		}
		return &replay.Result{Summary: results.Summary{Meta: results.Meta{Trace: j.traceRef}}}, nil
	}
	var progress strings.Builder
	o, err := Run(t.Context(), e, Options{OutDir: out, Out: &progress, exec: fake})
	if err != nil {
		t.Fatal(err)
	}
	if o.Ran != 4 || o.Skipped != 0 || len(ran) != 4 {
		t.Fatalf("first run: ran %d skipped %d (%v)", o.Ran, o.Skipped, ran)
	}
	if !strings.Contains(progress.String(), "variant 2/2 (b) repeat 2/2: starting (10 workloads, seed 11)") {
		t.Errorf("progress:\n%s", progress.String())
	}
	m, ok := ReadDone(filepath.Join(out, "b", "r1"))
	if !ok || m.Seed != 11 || m.TraceSeed != 2 || filepath.Base(m.Trace) != "seed-2.jsonl" {
		t.Errorf("done marker %+v", m)
	}
	// Lose one marker: only that run is redone, and a half-written directory is cleared.
	if err := os.Remove(filepath.Join(out, "a", "r1", DoneFile)); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(out, "a", "r1", "stale")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ran = nil
	o, err = Run(t.Context(), e, Options{OutDir: out, exec: fake})
	if err != nil {
		t.Fatal(err)
	}
	if o.Ran != 1 || o.Skipped != 3 || len(ran) != 1 || ran[0] != "variant 1/2 (a) repeat 2/2" {
		t.Fatalf("resume: ran %d skipped %d (%v)", o.Ran, o.Skipped, ran)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale file of an unfinished run kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "a", SpecFile)); err != nil {
		t.Errorf("variant spec not written: %v", err)
	}
}

func TestKubeconfigRejectsKueueConfig(t *testing.T) {
	e, err := Parse("exp.yaml", []byte(header("variants:\n- name: a\n  kueueConfig: {fairSharing: {enable: true}}\n")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(t.Context(), e, Options{OutDir: t.TempDir(), REST: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err == nil || !strings.Contains(err.Error(), "exp.yaml:7: variant a: kueueConfig needs a fresh local cluster") {
		t.Errorf("error %v", err)
	}
}

func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	w := &prefixWriter{w: &b, prefix: "v 1/2: "}
	for _, s := range []string{"trace 00:01", ":00 a\nb\n", "c"} {
		if _, err := w.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if b.String() != "v 1/2: trace 00:01:00 a\nv 1/2: b\n" {
		t.Errorf("%q", b.String())
	}
}

// twoByTwo writes a 2-variant × 2-repeat experiment on the teams cluster and loads it.
func twoByTwo(t *testing.T) (*Experiment, string) {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(teams)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "exp.yaml")
	doc := strings.Replace(header("repeats: 2\nseed: 10\nvariants: [{name: a}, {name: b}]\n"), teams, abs, 1)
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Load(f)
	if err != nil {
		t.Fatal(err)
	}
	return e, filepath.Join(dir, "out")
}

// TestParallel runs 4 runs 2 at a time: two runs are in flight together (each waits for the
// other), the runs in flight never share a slot, and the slots' local clusters differ in name and
// ports.
func TestParallel(t *testing.T) {
	e, out := twoByTwo(t)
	var mu sync.Mutex
	inFlight := map[int]string{}
	both := make(chan struct{})
	var bothOnce sync.Once
	maxInFlight := 0
	fake := func(ctx context.Context, j *job) (*replay.Result, error) {
		mu.Lock()
		if other, ok := inFlight[j.slot]; ok {
			t.Errorf("%s and %s both on slot %d", j.label(), other, j.slot)
		}
		inFlight[j.slot] = j.label()
		maxInFlight = max(maxInFlight, len(inFlight))
		if len(inFlight) == 2 {
			bothOnce.Do(func() { close(both) })
		}
		mu.Unlock()
		select { // the first two runs end only once both were running at the same time
		case <-both:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		mu.Lock()
		delete(inFlight, j.slot)
		mu.Unlock()
		return &replay.Result{}, nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	o, err := Run(ctx, e, Options{OutDir: out, Parallel: 2, exec: fake})
	if err != nil {
		t.Fatal(err)
	}
	if o.Ran != 4 || maxInFlight != 2 {
		t.Errorf("ran %d, at most %d at once; want 4 runs, 2 at once", o.Ran, maxInFlight)
	}
	l := LocalCluster{Name: "sweep"}
	a, b := l.slot(0, 2), l.slot(1, 2)
	if a.Name == b.Name || a.PortBase == b.PortBase || b.PortBase-a.PortBase != slotPortStride || a.Name != "sweep-0" {
		t.Errorf("slots %+v and %+v must not share a name or ports", a, b)
	}
	if s := l.slot(0, 1); s != (LocalCluster{Name: "sweep"}) {
		t.Errorf("a sequential experiment's cluster changed: %+v", s)
	}
}

// TestIndex runs one run of the experiment by its index, as one pod of the Indexed Job does.
func TestIndex(t *testing.T) {
	e, out := twoByTwo(t)
	var ran []string
	fake := func(_ context.Context, j *job) (*replay.Result, error) {
		ran = append(ran, j.label())
		return &replay.Result{}, nil
	}
	three := 3
	if _, err := Run(t.Context(), e, Options{OutDir: out, Index: &three, exec: fake}); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != "variant 2/2 (b) repeat 2/2" {
		t.Errorf("index 3 ran %v, want variant b repeat 2 only", ran)
	}
	if m, ok := ReadDone(filepath.Join(out, "b", "r1")); !ok || m.Seed != 11 {
		t.Errorf("done marker %+v", m)
	}
	if _, err := os.Stat(filepath.Join(out, "a", "r0")); !os.IsNotExist(err) {
		t.Errorf("index 3 touched variant a's run directory (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(out, ManifestFile)); err != nil {
		t.Errorf("experiment.json: %v", err)
	}
	four := 4
	if _, err := Run(t.Context(), e, Options{OutDir: out, Index: &four, exec: fake}); err == nil || !strings.Contains(err.Error(), "want 0..3 (2 variants × 2 repeats)") {
		t.Errorf("index 4: %v", err)
	}
	if e.Runs(0) != 4 || e.Runs(3) != 6 {
		t.Errorf("Runs: %d %d", e.Runs(0), e.Runs(3))
	}
}

// TestFailureStopsTheRest: after a failed run no new run starts.
func TestFailureStopsTheRest(t *testing.T) {
	e, out := twoByTwo(t)
	n := 0
	fake := func(_ context.Context, j *job) (*replay.Result, error) {
		n++
		return nil, errors.New("boom")
	}
	o, err := Run(t.Context(), e, Options{OutDir: out, exec: fake})
	if err == nil || !strings.Contains(err.Error(), "variant 1/2 (a) repeat 1/2: boom") || n != 1 || o.Ran != 0 {
		t.Errorf("err %v after %d runs (ran %d); want the first failure to stop the experiment", err, n, o.Ran)
	}
}

func TestFaultsAndWorkloadOverrides(t *testing.T) {
	e, err := Parse("exp.yaml", []byte(header(`faults:
  seed: 3
  events:
  - {at: 36h, node: h100-000, for: 2h}
variants:
- name: base
- name: no-faults
  faults: {}
- name: ckpt-15m
  workloads: {families: [distributed_training], checkpointInterval: 15m, checkpointCost: 1m, restartOverhead: 10m, maxRestarts: 4}
`)))
	if err != nil {
		t.Fatal(err)
	}
	if f := e.FaultsOf(&e.Variants[0]); f == nil || f.Seed != 3 || f.Events[0].At != 36*3600 || f.Events[0].For != 7200 {
		t.Errorf("base faults %+v", f)
	}
	if f := e.FaultsOf(&e.Variants[1]); !f.Empty() {
		t.Errorf("faults: {} must turn faults off, got %+v", f)
	}
	tr := &trace.Trace{Workloads: []*trace.Workload{
		{WorkloadID: "d", WorkloadType: trace.DistributedTraining, CheckpointIntervalSec: 3600},
		{WorkloadID: "s", WorkloadType: trace.SingleGPUTraining, CheckpointIntervalSec: 1800},
	}}
	got := e.Variants[2].Workloads.Apply(tr)
	if d := got.Workloads[0]; d.CheckpointIntervalSec != 900 || d.CheckpointCostSec != 60 || d.RestartOverheadSec != 600 || d.MaxRestarts != 4 {
		t.Errorf("overridden %+v", d)
	}
	if got.Workloads[1] != tr.Workloads[1] || tr.Workloads[0].CheckpointIntervalSec != 3600 {
		t.Error("the overrides touched a workload of another family, or the shared trace")
	}
}

// TestSimEngine runs a small experiment on the sim engine for real: three variants, no cluster,
// one with the built-in control-plane model and its own Kueue client rate.
func TestSimEngine(t *testing.T) {
	dir := t.TempDir()
	e := loadWithTeams(t, dir, `engine: sim
sim: {cycle: 50ms}
variants:
- name: base
- name: fair
  kueueConfig: {fairSharing: {enable: true}}
- name: slow-client
  controlPlane: kueue
  kueueConfig: {clientConnection: {qps: 0.5, burst: 1}}
`)
	if tm, _ := e.SimTiming(); tm.CycleSec != 0.05 {
		t.Fatalf("sim timing %+v", tm)
	}
	o, err := Run(t.Context(), e, Options{OutDir: filepath.Join(dir, "out")})
	if err != nil {
		t.Fatal(err)
	}
	if o.Ran != 3 {
		t.Fatalf("ran %d runs, want 3", o.Ran)
	}
	for _, v := range []string{"base", "fair", "slow-client"} {
		m, ok := ReadDone(filepath.Join(dir, "out", v, "r0"))
		if !ok || m.Summary.Engine != results.EngineSim || m.Summary.Groups[0].Succeeded != 10 {
			t.Errorf("%s: done marker %v, engine %q", v, ok, m.Summary.Engine)
			continue
		}
		cp := m.Summary.Kueue.ControlPlane
		switch {
		case v != "slow-client" && cp != nil:
			t.Errorf("%s ran with control plane %+v, want none", v, cp)
		case v == "slow-client" && (cp == nil || cp.Name != "kueue" || cp.QPS != 0.5 || cp.Burst != 1):
			t.Errorf("%s ran with control plane %+v, want the built-in one at the variant's 0.5 QPS, burst 1", v, cp)
		}
	}
	if _, err := Run(t.Context(), e, Options{OutDir: filepath.Join(dir, "out2"), REST: &rest.Config{Host: "https://127.0.0.1:1"}}); err == nil {
		t.Error("engine sim with --kubeconfig was accepted")
	}
}

// TestSimAcrossKueueReleases runs an upgrade what-if on the sim engine for real: the same trace
// through Kueue v0.15.0 (a child kueuelab built for it, runtime/simver) and the release this
// binary links, each run's summary naming its Kueue.
func TestSimAcrossKueueReleases(t *testing.T) {
	dir := t.TempDir()
	e := loadWithTeams(t, dir, `engine: sim
kueueVersion: v0.15.0
variants:
- name: old
- name: new
  kueueVersion: `+kueuever.Default+`
- name: gated
  kueueVersion: `+kueuever.Default+`
  kueueConfig: {featureGates: {SchedulerLongRequeueInterval: true}}
`)
	var progress bytes.Buffer
	o, err := Run(t.Context(), e, Options{OutDir: filepath.Join(dir, "out"), Out: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if o.Ran != 3 {
		t.Fatalf("ran %d runs, want 3", o.Ran)
	}
	if m, ok := ReadDone(filepath.Join(dir, "out", "gated", "r0")); !ok || m.Summary.Kueue == nil || !m.Summary.Kueue.FeatureGates["SchedulerLongRequeueInterval"] {
		t.Errorf("gated: done %v, Kueue %+v; want the gate in the summary", ok, m.Summary.Kueue)
	}
	// Gates are process-wide: different ones in parallel runs of one process are refused.
	if _, err := Run(t.Context(), e, Options{OutDir: filepath.Join(dir, "out2"), Parallel: 2}); err == nil ||
		!strings.Contains(err.Error(), "variants new and gated set different Kueue feature gates") {
		t.Errorf("parallel runs with different gates: %v", err)
	}
	for v, want := range map[string]string{"old": "v0.15.0", "new": kueuever.Default} {
		m, ok := ReadDone(filepath.Join(dir, "out", v, "r0"))
		if !ok || m.Summary.Kueue == nil || m.Summary.Kueue.Version != want || m.Summary.Groups[0].Succeeded != 10 {
			t.Errorf("%s: done marker %v, summary %+v; want Kueue %s and 10 succeeded", v, ok, m.Summary.Kueue, want)
			continue
		}
		// Each release with its own defaults: waitForPodsReady is on by default from v0.19 only.
		if on := m.Summary.Kueue.WaitForPodsReady != nil; on != (want == kueuever.Default) {
			t.Errorf("%s: Kueue %s ran with waitForPodsReady %+v", v, want, m.Summary.Kueue.WaitForPodsReady)
		}
	}
}

// loadWithTeams writes header(extra), its cluster the absolute path of teams.yaml, as dir/exp.yaml
// and loads it.
func loadWithTeams(t *testing.T, dir, extra string) *Experiment {
	t.Helper()
	abs, err := filepath.Abs(teams)
	if err != nil {
		t.Fatal(err)
	}
	expFile := filepath.Join(dir, "exp.yaml")
	if err := os.WriteFile(expFile, []byte(strings.Replace(header(extra), teams, abs, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Load(expFile)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// cohortBase: one H100 node; team a's and team b's ClusterQueues own no GPUs and sit in no cohort.
const cohortBase = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: cohorts}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 64, memory: 512Gi}
clusterQueues:
- name: a-cq
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 0}
- name: b-cq
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 0}
teams:
- {name: a, clusterQueue: a-cq}
- {name: b, clusterQueue: b-cq}
`

// TestCohortTreeOps: a variant builds a cohort tree (team a's queue in cohort research, research
// under org) and gives research 8 GPUs of its own. Kueue lends a cohort's own quota to the
// queues of its subtree only: team a's 8-GPU job, which its queue's nominal 0 never admits,
// borrows research's 8 and starts at once; team b's, outside research, still waits.
func TestCohortTreeOps(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(cohortBase), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := Parse(filepath.Join(dir, "exp.yaml"), []byte(`apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: t}
generator: {jobs: 10, seed: 1}
cluster: `+filepath.Join(dir, "cluster.yaml")+`
variants:
- name: base
- name: tree
  patch:
  - cohort: {queue: a, cohort: research}
  - cohort: {cohort: research, parent: org}
  - set: {cohort: research, flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: "8"}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := e.Spec(&e.Variants[1])
	if err != nil {
		t.Fatal(err)
	}
	objs, err := s.Objects(cluster.Options{OmitNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	cohorts := map[string]*kueue.Cohort{}
	for _, o := range objs {
		if c, ok := o.(*kueue.Cohort); ok {
			cohorts[c.Name] = c
		}
	}
	r := cohorts["research"]
	if r == nil || cohorts["org"] == nil || r.Spec.ParentName != "org" || len(r.Spec.ResourceGroups) != 1 ||
		r.Spec.ResourceGroups[0].Flavors[0].Resources[0].NominalQuota.Value() != 8 {
		t.Fatalf("cohorts %+v: want research under org with 8 GPUs of its own", cohorts)
	}
	job := func(id, team string) string {
		return `{"type":"workload","schemaVersion":"v2","workloadId":"` + id + `","submitTimeOffsetSec":0,"namespace":"` + team + `","workloadType":"single_gpu_training","durationSec":600,"intentClass":"standard",` +
			`"workloadClass":{"cpu":"cpu.light","gpu":"gpu.light"},"sharedIntensityProfile":{"cpuUtilization":0.2,"gpuUtilization":0.5,"memoryIntensity":0.3,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.1},` +
			`"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","memory":"64Gi","nvidia.com/gpu":"8"}}]}`
	}
	_, tr := testutil.WriteTrace(t, job("ja", "a"), job("jb", "b"))
	admitted := func(v *Variant) map[string]*float64 {
		spec, _, err := e.Spec(v)
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		cfg := sim.Config{Trace: tr, TraceName: "hand", Spec: spec, Seed: 1, Timing: sim.DefaultTiming, OutDir: out, MaxTraceSec: 3600,
			WallClock: func() time.Time { return time.Time{} }}
		if _, err := sim.Run(context.Background(), cfg); err != nil && !errors.Is(err, replay.ErrIncomplete) {
			t.Fatal(err)
		}
		d, err := results.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*float64{}
		for _, rec := range d.Workloads {
			got[rec.ID] = rec.Admitted
		}
		return got
	}
	base, tree := admitted(&e.Variants[0]), admitted(&e.Variants[1])
	if base["ja"] != nil || base["jb"] != nil {
		t.Errorf("base: admitted at %v and %v: no queue owns a GPU", base["ja"], base["jb"])
	}
	if a := tree["ja"]; a == nil || *a > 1 {
		t.Errorf("tree: team a's job admitted at %v: want at once, on research's quota", a)
	}
	if tree["jb"] != nil {
		t.Errorf("tree: team b's job admitted at %v: research lends to its own subtree only", *tree["jb"])
	}
}
