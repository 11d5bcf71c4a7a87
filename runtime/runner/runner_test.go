package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent"
	rtcluster "github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// repoFile finds a file relative to the module root.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..", rel)
}

// genTrace generates n workloads with the default profile (seeded) through a trace file, as a
// user's run reads them.
func genTrace(t *testing.T, n int, seed uint64) *trace.Trace {
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
	if _, err := gen.Write(context.Background(), fw.Writer, gen.New(p, seed), gen.Options{Workloads: n, EmitWorkloadRecords: true}); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(context.Background(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func testPlan(t *testing.T, n int, specFile string) (*plan, *Config) {
	t.Helper()
	spec, err := rcluster.Load(repoFile(t, specFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{REST: nil, Trace: genTrace(t, n, 7), Spec: spec, Clock: simclock.New(simclock.Options{}), OutDir: t.TempDir()}
	if err := cfg.check(); err == nil || !strings.Contains(err.Error(), "no rest config") {
		t.Fatalf("check without a rest config: %v", err)
	}
	p, err := newPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, cfg
}

func TestPlanCoversEveryWorkloadOnce(t *testing.T) {
	p, cfg := testPlan(t, 200, "examples/clusters/teams.yaml")
	if len(p.items) != 200 || len(p.records) != 200 {
		t.Fatalf("%d items, %d records, want 200", len(p.items), len(p.records))
	}
	if !slices.IsSortedFunc(p.items, func(a, b *item) int { return cmpFloat(a.offset, b.offset) }) {
		t.Error("items not in submit order")
	}
	families := map[trace.Family]int{}
	exps := 0
	for _, it := range p.items {
		if it.exp != nil {
			exps++
			if len(it.objects) != 0 {
				t.Errorf("%s: an experiment submits trials only, got %d objects", it.id, len(it.objects))
			}
		}
	}
	for _, r := range p.records {
		families[r.Family]++
		if r.Queue == "" || r.LocalQueue == "" {
			t.Errorf("%s: no queue (lq %q, cq %q)", r.ID, r.LocalQueue, r.Queue)
		}
	}
	for _, f := range trace.Families {
		if families[f] == 0 {
			t.Errorf("no %s workload in 200 generated ones", f)
		}
	}
	if exps != families[trace.HPOExperiment] {
		t.Errorf("%d experiments, %d hpo workloads", exps, families[trace.HPOExperiment])
	}
	if p.cluster.GPUCapacity != 96 {
		t.Errorf("GPU capacity %d, want 96", p.cluster.GPUCapacity)
	}
	if !slices.Equal(p.cluster.Flavors, []string{"cpu", "h100-sxm"}) || !slices.Equal(p.cluster.Queues, []string{"team-a-cq", "team-b-cq", "team-c-cq"}) {
		t.Errorf("flavors %v queues %v", p.cluster.Flavors, p.cluster.Queues)
	}
	for _, w := range cfg.Trace.Workloads {
		if p.byLabel[w.Namespace+"/"+render.Name(w.WorkloadID)] == "" && !hasLabelFor(p, w.WorkloadID) {
			t.Errorf("%s: pods cannot be mapped back", w.WorkloadID)
		}
	}
}

func hasLabelFor(p *plan, id string) bool {
	for _, v := range p.byLabel {
		if v == id {
			return true
		}
	}
	return false
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestTrialsPlayKatib(t *testing.T) {
	p, _ := testPlan(t, 200, "examples/clusters/small.yaml")
	var it *item
	for _, x := range p.items {
		if x.exp != nil && *x.exp.Spec.MaxTrialCount >= 3 {
			it = x
			break
		}
	}
	if it == nil {
		t.Fatal("no experiment with ≥ 3 trials in the trace")
	}
	tr := newTrials()
	*it.exp.Spec.ParallelTrialCount = 2
	if _, err := tr.add(it.id, it.exp, 1); err != nil {
		t.Fatal(err)
	}
	k := int(*it.exp.Spec.MaxTrialCount)
	first, err := tr.next(it.id)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 {
		t.Fatalf("first batch %d trials, want parallelTrialCount 2", len(first))
	}
	if again, _ := tr.next(it.id); len(again) != 0 {
		t.Fatalf("%d more trials while 2 run", len(again))
	}
	j := first[1]
	if j.Name != it.exp.Name+"-trial-1" || j.Namespace != it.exp.Namespace {
		t.Errorf("trial %s/%s", j.Namespace, j.Name)
	}
	if j.Labels["kueue.x-k8s.io/queue-name"] == "" || j.Labels[contract.WorkloadLabel] != it.exp.Name || j.Labels[contract.Trial] != "1" {
		t.Errorf("trial labels %v", j.Labels)
	}
	if j.Spec.Template.Labels[contract.WorkloadLabel] != it.exp.Name {
		t.Errorf("trial pod labels %v", j.Spec.Template.Labels)
	}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if strings.Contains(e.Value, "${") {
			t.Errorf("env %s=%s not substituted", e.Name, e.Value)
		}
	}
	// Same seed, same trial: same parameters; the two trials differ.
	again := newTrials()
	if _, err := again.add(it.id, it.exp, 1); err != nil {
		t.Fatal(err)
	}
	rerun, _ := again.next(it.id)
	if !slices.Equal(envOf(rerun[1]), envOf(j)) {
		t.Errorf("trial parameters not reproducible: %v vs %v", envOf(rerun[1]), envOf(j))
	}
	if slices.Equal(envOf(first[0]), envOf(first[1])) {
		t.Errorf("two trials drew identical parameters %v", envOf(j))
	}
	ref, ok := tr.lookup(j.Namespace, j.Name)
	if !ok || ref.n != 1 {
		t.Fatalf("lookup %v %v", ref, ok)
	}
	// Finish trials one by one: each frees a slot, the last one decides.
	created := 2
	for n := 0; n < k; n++ {
		verdict := tr.finish(trialRef{id: it.id, n: n}, n == 0)
		if tr.finish(trialRef{id: it.id, n: n}, false) != "" && n < k-1 {
			t.Fatal("a duplicate finish counted")
		}
		more, _ := tr.next(it.id)
		created += len(more)
		if n < k-1 && verdict != "" {
			t.Fatalf("verdict %q after %d of %d trials", verdict, n+1, k)
		}
		if n == k-1 && verdict != results.StateSucceeded {
			t.Fatalf("verdict %q after all trials (1 failure ≤ maxFailedTrialCount)", verdict)
		}
	}
	if created != k {
		t.Errorf("created %d trials, want maxTrialCount %d", created, k)
	}
	if ids := tr.takePending(); len(ids) == 0 {
		t.Error("finishing trials did not wake the submitter")
	}
}

func envOf(j *batchv1.Job) []string {
	var out []string
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		out = append(out, e.Name+"="+e.Value)
	}
	return out
}

// watchFixture is a watcher over a one-workload plan with a manual clock.
func watchFixture(t *testing.T) (*watcher, *results.Recorder, *plan) {
	t.Helper()
	p, _ := testPlan(t, 40, "examples/clusters/small.yaml")
	rec, err := results.NewRecorder(p.records, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk := simclock.New(simclock.Options{}) // not started: the tests look at its holds only
	w := newWatcher(p, rec, clk, newTrials())
	never := func(context.Context) (bool, string, error) { return false, "", nil }
	// Settlers that never run: a poke leaves their hold in place for the test to see.
	w.kueue = newSettler("kueue", clk, simclock.KindKueue, time.Millisecond, never)
	w.sched = newSettler("kube-scheduler", clk, simclock.KindSchedule, time.Millisecond, never)
	w.queues = newQueueView(w.lqToCQ)
	return w, rec, p
}

func kueueWorkload(owner client.Object, kind string, count int32, conds ...metav1.Condition) *kueue.Workload {
	return &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "wl-" + owner.GetName(), Namespace: owner.GetNamespace(), UID: types.UID("uid-" + owner.GetName()),
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: owner.GetName()}}},
		Spec:   kueue.WorkloadSpec{PodSets: []kueue.PodSet{{Name: "main", Count: count}}},
		Status: kueue.WorkloadStatus{Conditions: conds},
	}
}

func cond(typ, reason string, sec int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.Unix(sec, 0)}
}

// batchJobs returns the plan's workloads rendered as one batch Job, failing without n of them.
func batchJobs(t *testing.T, p *plan, n int) []*item {
	t.Helper()
	var out []*item
	for _, x := range p.items {
		if x.exp == nil && kindOf(x.objects[0]) == "Job" {
			out = append(out, x)
		}
	}
	if len(out) < n {
		t.Fatalf("%d batch Job workloads, want %d", len(out), n)
	}
	return out
}

func TestWatcherRecordsLifecycle(t *testing.T) {
	w, rec, p := watchFixture(t)
	it := batchJobs(t, p, 1)[0]
	top := it.objects[0]
	wl := kueueWorkload(top, "Job", 1)
	w.onWorkload(wl, false)
	wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 1), cond("Admitted", "Admitted", 1)}
	wl.Status.Admission = &kueue.Admission{ClusterQueue: "main", PodSetAssignments: []kueue.PodSetAssignment{{Name: "main",
		Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "h100-sxm", "nvidia.com/gpu": "h100-sxm"}}}}
	w.onWorkload(wl, false)
	w.onWorkload(wl, false) // a resync reports nothing new
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-x", Namespace: top.GetNamespace(), UID: "pod-x",
		Labels: map[string]string{contract.WorkloadLabel: top.GetName()}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			"nvidia.com/gpu": resource.MustParse("2")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	w.onPod(pod, false)
	wl.Status.Conditions = append(wl.Status.Conditions, cond("Evicted", "Preempted", 2), cond("Preempted", "InClusterQueue", 2))
	w.onWorkload(wl, false)
	wl.Status.Conditions = append(wl.Status.Conditions, cond("Requeued", "Preempted", 3))
	w.onWorkload(wl, false)
	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	done.Annotations = map[string]string{contract.EnergyJoules: "1234.5", contract.FinishedTraceSec: "100"}
	w.onPod(done, false)
	w.onPod(done, true)
	wl.Status.Conditions = append(wl.Status.Conditions, cond("Finished", "Succeeded", 4))
	w.onWorkload(wl, false)

	var r results.Record
	for _, x := range rec.Records() {
		if x.ID == it.id {
			r = x
		}
	}
	if r.WorkloadCreated == nil || r.QuotaReserved == nil || r.Admitted == nil || r.FirstPodRunning == nil || r.AllPodsRunning == nil || r.Finished == nil {
		t.Fatalf("missing milestones: %+v", r)
	}
	if r.State != results.StateSucceeded || r.Flavors["main"] != "h100-sxm" {
		t.Errorf("state %s flavors %v", r.State, r.Flavors)
	}
	if len(r.Evictions) != 1 || r.Evictions[0].Reason != "Preempted" || len(r.Preemptions) != 1 || r.Preemptions[0].Reason != "InClusterQueue" || r.Requeues != 1 {
		t.Errorf("evictions %v preemptions %v requeues %d", r.Evictions, r.Preemptions, r.Requeues)
	}
	// The pod ran from trace 0 (the clock did not move) to the agent's end at 100, on 2 GPUs.
	if r.EnergyJ != 1234.5 || r.GPUSeconds != 200 {
		t.Errorf("energy %g gpu-seconds %g, want 1234.5 and 200", r.EnergyJ, r.GPUSeconds)
	}
}

// TestWatcherHoldsTheClock walks one two-pod workload through its life and checks, after each
// step, which holds the trace clock carries: every step the control plane owes is covered, and
// nothing is held while only simulated time can move things on.
func TestWatcherHoldsTheClock(t *testing.T) {
	w, _, p := watchFixture(t)
	jobs := batchJobs(t, p, 2)
	it := jobs[0]
	top := it.objects[0]
	owner := ownerKey("Job", top.GetNamespace(), top.GetName())
	wl := kueueWorkload(top, "Job", 2)
	wl.Spec.QueueName = kueue.LocalQueueName(it.queue)
	u := &unit{key: it.id}
	pod := func(n int, phase corev1.PodPhase, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", top.GetName(), n), Namespace: top.GetNamespace(),
			UID: types.UID(fmt.Sprintf("pod-%d", n)), Labels: map[string]string{contract.WorkloadLabel: top.GetName()}},
			Status: corev1.PodStatus{Phase: phase, Conditions: conds}}
	}
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	pending := metav1.Condition{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending", LastTransitionTime: metav1.Unix(1, 0)}
	kueueKey := simclock.Key{Kind: simclock.KindKueue, ID: "kueue"}
	release := func(k simclock.Key) func() { return func() { w.clk.Release(k) } } // what a settler or the agent does
	steps := []struct {
		name string
		do   func()
		want map[simclock.Key]bool
	}{
		{"submitted", func() { w.clk.Hold(submitHold(owner)) }, map[simclock.Key]bool{submitHold(owner): true, kueueKey: false}},
		{"Workload created: Kueue owes a decision", func() { w.onWorkload(wl, false) },
			map[simclock.Key]bool{submitHold(owner): false, kueueKey: true}},
		{"Kueue caught up", release(kueueKey), map[simclock.Key]bool{kueueKey: false}},
		{"Kueue tried and it does not fit", func() { wl.Status.Conditions = []metav1.Condition{pending}; w.onWorkload(wl, false) },
			map[simclock.Key]bool{kueueKey: false, holdPods(u): false}},
		{"quota reserved: pods owed; nothing else pending, so Kueue owes nothing", func() {
			wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 2)}
			wl.Status.Admission = &kueue.Admission{ClusterQueue: "main"}
			w.onWorkload(wl, false)
		}, map[simclock.Key]bool{holdPods(u): true, kueueKey: false}},
		{"one pod created: its start owed", func() { w.onPod(pod(0, corev1.PodPending), false) },
			map[simclock.Key]bool{holdPods(u): true, simclock.PodStart("pod-0"): true, holdSeen("pod-0"): true}},
		{"both pods created", func() { w.onPod(pod(1, corev1.PodPending), false) },
			map[simclock.Key]bool{holdPods(u): false, simclock.PodStart("pod-1"): true, holdSeen("pod-1"): true}},
		{"the agent started pod 0 before this watcher saw it Running: its start is not recorded yet",
			func() { w.clk.Ack(simclock.PodStart("pod-0")) },
			map[simclock.Key]bool{simclock.PodStart("pod-0"): false, holdSeen("pod-0"): true}},
		{"pod 0 seen Running", func() { w.onPod(pod(0, corev1.PodRunning), false) },
			map[simclock.Key]bool{simclock.PodStart("pod-0"): false, holdSeen("pod-0"): false}},
		{"pod 1 has no node: simulated wait", func() { w.onPod(pod(1, corev1.PodPending, unschedulable), false) },
			map[simclock.Key]bool{simclock.PodStart("pod-1"): false, holdSeen("pod-1"): false}},
		{"pod 1 bound to a node: its start owed again", func() {
			p := pod(1, corev1.PodPending, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
			p.Spec.NodeName = "node-a"
			w.onPod(p, false)
		}, map[simclock.Key]bool{simclock.PodStart("pod-1"): true, holdSeen("pod-1"): true}},
		{"pod 1 seen Running before the agent started it", func() {
			p := pod(1, corev1.PodRunning)
			p.Spec.NodeName = "node-a"
			w.onPod(p, false)
		}, map[simclock.Key]bool{simclock.PodStart("pod-1"): true, holdSeen("pod-1"): false}},
		{"the agent started pod 1", func() { w.clk.Ack(simclock.PodStart("pod-1")) },
			map[simclock.Key]bool{simclock.PodStart("pod-1"): false}},
		{"the agent completed both: their ends owed", func() { w.clk.Hold(simclock.PodDone("pod-0")); w.clk.Hold(simclock.PodDone("pod-1")) },
			map[simclock.Key]bool{simclock.PodDone("pod-0"): true, simclock.PodDone("pod-1"): true}},
		{"pod 0 ended, pod 1 still running", func() { w.onPod(pod(0, corev1.PodSucceeded), false) },
			map[simclock.Key]bool{simclock.PodDone("pod-0"): false, holdFinish(u): false}},
		{"pod 1 ended: the Workload's finish owed", func() { w.onPod(pod(1, corev1.PodSucceeded), false) },
			map[simclock.Key]bool{simclock.PodDone("pod-1"): false, holdFinish(u): true}},
		{"another workload waits for quota", func() {
			other := kueueWorkload(jobs[1].objects[0], "Job", 1)
			other.Spec.QueueName = kueue.LocalQueueName(jobs[1].queue)
			w.onWorkload(other, false)
			w.clk.Release(kueueKey) // Kueue tried it: it does not fit
		}, map[simclock.Key]bool{kueueKey: false}},
		{"finished: quota released while one waits, Kueue owes a decision", func() {
			wl.Status.Conditions = append(wl.Status.Conditions, cond("Finished", "Succeeded", 3))
			w.onWorkload(wl, false)
		}, map[simclock.Key]bool{holdFinish(u): false, kueueKey: true}},
		{"a restarted Kueue rewrites the finished Workload: nothing owed", func() {
			w.clk.Release(kueueKey)
			again := wl.DeepCopy()
			again.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 9), cond("Finished", "Succeeded", 9)}
			w.onWorkload(again, false)
			again.Status.Conditions = again.Status.Conditions[:1] // seen between two of its writes
			w.onWorkload(again, false)
		}, map[simclock.Key]bool{holdPods(u): false, holdFinish(u): false}},
	}
	for _, st := range steps {
		st.do()
		for key, want := range st.want {
			if got := w.clk.Held(key); got != want {
				t.Errorf("%s: hold %s = %v, want %v", st.name, key, got, want)
			}
		}
	}
	if n := w.late.n; n != 0 {
		t.Errorf("%d late steps recorded, want none (the second Finished is no step)", n)
	}
}

// TestWatcherHoldsEviction: an evicted workload holds the clock until its quota is released; its
// running pods' deletion is held until the agent has stopped them; freed resources let
// kube-scheduler owe a decision for a pod it had rejected.
func TestWatcherHoldsEviction(t *testing.T) {
	w, _, p := watchFixture(t)
	jobs := batchJobs(t, p, 2)
	top, other := jobs[0].objects[0], jobs[1].objects[0]
	wl := kueueWorkload(top, "Job", 1, cond("QuotaReserved", "QuotaReserved", 1))
	w.onWorkload(wl, false)
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-0", Namespace: top.GetNamespace(), UID: "run-0",
		Labels: map[string]string{contract.WorkloadLabel: top.GetName()}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	w.onPod(running, false)
	w.clk.Ack(simclock.PodStart("run-0"))
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: other.GetName() + "-0", Namespace: other.GetNamespace(), UID: "wait-0",
		Labels: map[string]string{contract.WorkloadLabel: other.GetName()}}, Status: corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}
	w.onPod(waiting, false)
	u := w.units[jobs[0].id]
	wl.Status.Conditions = append(wl.Status.Conditions, cond("Evicted", "Preempted", 2))
	w.onWorkload(wl, false)
	if !w.clk.Held(holdEvict(u)) {
		t.Fatal("evicted workload with quota: no evict hold")
	}
	gone := running.DeepCopy()
	now := metav1.Now()
	gone.DeletionTimestamp = &now
	w.onPod(gone, false)
	if !w.clk.Held(simclock.PodGone("run-0")) || !w.clk.Held(simclock.Key{Kind: simclock.KindSchedule, ID: "kube-scheduler"}) {
		t.Errorf("deleted running pod: gone %v, schedule %v; want both held", w.clk.Held(simclock.PodGone("run-0")),
			w.clk.Held(simclock.Key{Kind: simclock.KindSchedule, ID: "kube-scheduler"}))
	}
	if w.clk.Held(holdFinish(u)) {
		t.Error("an evicted workload's last pod left: no Finished is owed")
	}
	w.clk.Ack(simclock.PodGone("run-0"))
	wl.Status.Conditions = []metav1.Condition{{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending",
		LastTransitionTime: metav1.Unix(3, 0)}, cond("Evicted", "Preempted", 2)}
	w.onWorkload(wl, false)
	if w.clk.Held(holdEvict(u)) {
		t.Error("quota released: the evict hold must end")
	}
}

func TestWatcherIgnoresForeignWorkloads(t *testing.T) {
	w, rec, _ := watchFixture(t)
	foreign := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "not-ours", Namespace: "team-a"}}
	w.onWorkload(kueueWorkload(foreign, "Job", 1, cond("Finished", "Succeeded", 1)), false)
	if c := rec.Counts(); c.Finished() != 0 {
		t.Errorf("a foreign Workload finished one of ours: %+v", c)
	}
}

// TestWatcherIgnoresAnEarlierRunsObjects: a finished Workload and a running pod of an earlier
// run, there at the watch's first list under the names and labels of this run's first workload,
// are not its: nothing is recorded; this run's own Workload of that owner, created later, is.
func TestWatcherIgnoresAnEarlierRunsObjects(t *testing.T) {
	w, rec, p := watchFixture(t)
	top := batchJobs(t, p, 1)[0].objects[0]
	old := kueueWorkload(top, "Job", 1, cond("Finished", "Succeeded", 1))
	oldPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-old", Namespace: top.GetNamespace(), UID: "pod-old",
		Labels: map[string]string{contract.WorkloadLabel: top.GetName()}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	w.markBefore(old)
	w.onWorkload(old, false)
	w.markBefore(oldPod)
	w.onPod(oldPod, false)
	if n := rec.Events(); n != 0 {
		t.Fatalf("%d events recorded of an earlier run's objects: %+v", n, rec.Records()[0])
	}
	mine := kueueWorkload(top, "Job", 1)
	mine.UID = "uid-mine"
	w.onWorkload(mine, false)
	if n := rec.Events(); n != 1 {
		t.Errorf("%d events of this run's own Workload, want its creation", n)
	}
}

func TestSamplerAggregates(t *testing.T) {
	p, _ := testPlan(t, 40, "examples/clusters/small.yaml")
	s := &sampler{plan: p}
	gpuPS := func(n int32, g string) kueue.PodSet {
		return kueue.PodSet{Name: "main", Count: n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(g)}}}}}}}
	}
	admitted := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"},
		Spec: kueue.WorkloadSpec{QueueName: "team-a-lq", PodSets: []kueue.PodSet{gpuPS(2, "4")}},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{cond("QuotaReserved", "x", 1)},
			Admission: &kueue.Admission{ClusterQueue: "main", PodSetAssignments: []kueue.PodSetAssignment{{Name: "main",
				Flavors:       map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "h100-sxm"},
				ResourceUsage: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}}}}}}
	pending := kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"},
		Spec: kueue.WorkloadSpec{QueueName: "team-a-lq", PodSets: []kueue.PodSet{gpuPS(1, "8")}}}
	finished := *admitted.DeepCopy()
	finished.Status.Conditions = append(finished.Status.Conditions, cond("Finished", "Succeeded", 2))
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "h100-000", Labels: map[string]string{contract.GPUFamily: "H100-SXM"}}}
	var id string
	for k, v := range p.byLabel {
		if strings.HasPrefix(k, "team-a/") && v != "" {
			id = strings.TrimPrefix(k, "team-a/")
			break
		}
	}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: map[string]string{contract.WorkloadLabel: id}},
		Spec: corev1.PodSpec{NodeName: "h100-000", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	var usage []kueuewl.GPUUsage
	for _, wl := range []kueue.Workload{admitted, pending, finished} {
		if u, ok := kueuewl.UsageOf(&wl); ok {
			usage = append(usage, u)
		}
	}
	rows := s.aggregate(60, usage, []corev1.Pod{pod}, []corev1.Node{node}, map[string]float64{"h100-000": 3000})
	got := map[string]results.Sample{}
	for _, r := range rows {
		got[r.Scope+"/"+r.Name] = r
	}
	if q := got["clusterqueue/main"]; q.Requested != 16 || q.Reserved != 8 || q.Pending != 1 || q.InUse != 4 || !math.IsNaN(q.NodePowerW) {
		t.Errorf("queue row %+v", q)
	}
	if f := got["flavor/h100-sxm"]; f.Reserved != 8 || f.InUse != 4 || f.NodePowerW != 3000 {
		t.Errorf("flavor row %+v", f)
	}
	if f := got["flavor/cpu"]; f.Reserved != 0 || !math.IsNaN(f.NodePowerW) {
		t.Errorf("cpu row %+v", f)
	}
}

// TestSubmitterPaces submits a trace through a fake API server at a high speedup: every workload
// is submitted, and no object is created before its due time.
func TestSubmitterPaces(t *testing.T) {
	p, _ := testPlan(t, 30, "examples/clusters/small.yaml")
	scheme, err := rtcluster.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := results.NewRecorder(p.records, nil)
	if err != nil {
		t.Fatal(err)
	}
	// An event-driven clock with no Kueue to end the submit holds: a fake one ends each hold as
	// soon as its create returns, so the clock jumps from submission to submission.
	clk := simclock.New(simclock.Options{})
	fc := &recordingClient{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), clk: clk, kueue: true}
	sub := newSubmitter(fc, p, rec, clk, 1000, 100, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.Start(ctx)
	done := make(chan struct{})
	go func() { sub.run(ctx); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for rec.Counts().Submitted < len(p.items) {
		if time.Now().After(deadline) {
			t.Fatalf("submitted %d of %d (clock at %g: %s)", rec.Counts().Submitted, len(p.items), clk.Now(), clk.Blockers())
		}
		time.Sleep(5 * time.Millisecond) // polling the recorder
	}
	cancel()
	<-done
	due := map[string]float64{} // object name → its workload's submit time; trials by experiment name
	for _, it := range p.items {
		for _, o := range it.objects {
			due[o.GetName()] = it.offset
		}
		if it.exp != nil {
			due[it.exp.Name] = it.offset
		}
	}
	for _, c := range fc.calls {
		c.offset = due[c.name]
		if exp, _, ok := strings.Cut(c.name, "-trial-"); ok {
			c.offset = due[exp]
		}
		if c.at != c.offset {
			t.Errorf("%s created at trace %.3f s, due at %.3f s: the clock must stand at the submission", c.name, c.at, c.offset)
		}
	}
	if st := sub.stats(); st.Submitted != len(p.items) || st.Rejected != 0 {
		t.Errorf("stats %+v", st)
	}
}

type createCall struct {
	name   string
	at     float64 // trace time
	offset float64
}

// recordingClient notes when each object was created; with kueue it also plays Kueue creating
// the Workload (the submit hold ends).
type recordingClient struct {
	client.Client
	clk   *simclock.Clock
	kueue bool
	mu    sync.Mutex
	calls []createCall
}

func (r *recordingClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	r.mu.Lock()
	r.calls = append(r.calls, createCall{name: o.GetName(), at: r.clk.Now()})
	r.mu.Unlock()
	key := submitHold(ownerKey(kindOf(o), o.GetNamespace(), o.GetName())) // before Create clears the TypeMeta
	err := r.Client.Create(ctx, o, opts...)
	if r.kueue {
		r.clk.Release(key)
	}
	return err
}

// TestPlanKeepsUnrunnableWorkloads: workloads larger than the cluster stay in the results as
// unfinished with the placer's reason, and count as done for the progress.
func TestPlanKeepsUnrunnableWorkloads(t *testing.T) {
	spec := `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- {name: cpu, gpuFamily: CPU, count: 1, cpu: 64, memory: 256Gi}
- {name: gpu, gpuFamily: H100-SXM, count: 1, gpusPerNode: 2, cpu: 64, memory: 512Gi}
clusterQueues:
- name: q
  quotas:
  - {flavor: cpu, resources: {cpu: 64, memory: 256Gi}}
  - {flavor: h100-sxm, resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 2}}
teams:
- {name: team, clusterQueue: q}
defaultTeam: team
`
	path := filepath.Join(t.TempDir(), "tiny.yaml")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := rcluster.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Trace: genTrace(t, 100, 3), Spec: s, Clock: simclock.New(simclock.Options{})}
	p, err := newPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.unrunnable) == 0 || len(p.items)+len(p.unrunnable) != 100 || len(p.records) != 100 {
		t.Fatalf("%d items, %d unrunnable, %d records; want some unrunnable and 100 in all", len(p.items), len(p.unrunnable), len(p.records))
	}
	for _, r := range p.records {
		if r.Error != "" && r.GPUs <= 2 {
			t.Errorf("%s (%d GPUs) unrunnable: %s", r.ID, r.GPUs, r.Error)
		}
	}
	rec, err := results.NewRecorder(p.records, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := rec.Counts()
	if c.States[results.StateRejected] != len(p.unrunnable) || c.States[results.StateUnsubmitted] != len(p.items) || rec.Pending() != len(p.items) {
		t.Errorf("counts %+v pending %d: want the unrunnable rejected and the rest unsubmitted", c, rec.Pending())
	}
}

// TestPlanAppliesWhatMappedKindsNeed: a mapping's kinds bring their cluster objects (a TrainJob's
// ClusterTrainingRuntime) into the cluster side, and only then: every create of a TrainJob is
// denied by the admission webhooks while its runtime is missing.
func TestPlanAppliesWhatMappedKindsNeed(t *testing.T) {
	spec, err := rcluster.Load(repoFile(t, "examples/clusters/small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reg := render.DefaultRegistry()
	for _, kind := range reg.FamilyKinds()[trace.DistributedTraining] {
		m := render.DefaultMapping()
		m[trace.DistributedTraining] = kind
		p, err := newPlan(&Config{Trace: genTrace(t, 20, 7), Spec: spec, Mapping: m})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := reg.Integration(kind)
		want := 0
		if in.ClusterObjects != nil {
			want = len(in.ClusterObjects(render.Options{Target: render.TargetKWOK}))
		}
		got := 0
		for _, o := range p.clusterObjs {
			if o.GetObjectKind().GroupVersionKind().Kind == "ClusterTrainingRuntime" {
				got++
			}
		}
		if got != want {
			t.Errorf("%s: %d ClusterTrainingRuntimes in the cluster side, want %d", kind, got, want)
		}
	}
}

// TestWatcherPodsRunningBeforeReservation: the pod informer may show a workload's pods Running
// before the Workload informer shows its reservation (two watch streams); the pods are then all
// up at the reservation, and all_pods_running is recorded there.
func TestWatcherPodsRunningBeforeReservation(t *testing.T) {
	w, rec, p := watchFixture(t)
	it := batchJobs(t, p, 1)[0]
	top := it.objects[0]
	wl := kueueWorkload(top, "Job", 1)
	w.onWorkload(wl, false)
	w.onPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-x", Namespace: top.GetNamespace(), UID: "pod-x",
		Labels: map[string]string{contract.WorkloadLabel: top.GetName()}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, false)
	wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 1), cond("Admitted", "Admitted", 1)}
	w.onWorkload(wl, false)
	for _, r := range rec.Records() {
		if r.ID == it.id && (r.QuotaReserved == nil || r.AllPodsRunning == nil) {
			t.Fatalf("quota reserved %v, all pods running %v: want both", r.QuotaReserved, r.AllPodsRunning)
		}
	}
}

// TestReadmissionForgetsEvictedPodEnds: the lateness of a Workload's Finished is measured against
// the pods of its last admission. Before, the end of a pod an eviction stopped stayed the bound,
// and a Finished the Workload informer showed before the pod informer showed the last pod's end
// was reported 9,844 trace s late (the 1,000-workload bench run).
func TestReadmissionForgetsEvictedPodEnds(t *testing.T) {
	w, _, p := watchFixture(t)
	top := batchJobs(t, p, 1)[0].objects[0]
	wl := kueueWorkload(top, "Job", 1, cond("QuotaReserved", "QuotaReserved", 1))
	w.onWorkload(wl, false)
	u := w.units[batchJobs(t, p, 1)[0].id]
	ended := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-0", Namespace: top.GetNamespace(), UID: "first-0",
		Labels:      map[string]string{contract.WorkloadLabel: top.GetName()},
		Annotations: map[string]string{contract.FinishedTraceSec: "50"}}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	w.onPod(ended, false)
	if u.lastEnd != 50 {
		t.Fatalf("first admission's pod ended at 50: lastEnd %g", u.lastEnd)
	}
	wl.Status.Conditions = []metav1.Condition{{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending",
		LastTransitionTime: metav1.Unix(2, 0)}, cond("Evicted", "Preempted", 2)}
	w.onWorkload(wl, false)
	wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 3)}
	w.onWorkload(wl, false)
	if u.lastEnd != 0 {
		t.Errorf("re-admitted: lastEnd %g still bounds this admission's Finished", u.lastEnd)
	}
}

// TestWatcherEndsAPreemptionLoop: the watcher shows its events to the loop guard
// (results.LoopGuard). A Workload preempted a second time from the same state, with nothing
// created or finished in between, is a loop; a Workload created in between is progress.
func TestWatcherEndsAPreemptionLoop(t *testing.T) {
	w, _, p := watchFixture(t)
	jobs := batchJobs(t, p, 2)
	wl := kueueWorkload(jobs[0].objects[0], "Job", 1)
	w.onWorkload(wl, false)
	sec := int64(0)
	// round admits the Workload and preempts it (the clock is not started: trace 0).
	round := func() {
		sec++
		wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", sec)}
		w.onWorkload(wl, false)
		sec++
		wl.Status.Conditions = []metav1.Condition{{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending",
			LastTransitionTime: metav1.Unix(sec, 0)}, cond("Evicted", "Preempted", sec), cond("Preempted", "InClusterQueue", sec),
			cond("Requeued", "Preempted", sec)}
		w.onWorkload(wl, false)
	}
	noLoop := func(when string) {
		t.Helper()
		select {
		case err := <-w.loop:
			t.Fatalf("%s: loop reported: %v", when, err)
		default:
		}
	}
	round()
	noLoop("first preemption")
	w.onWorkload(kueueWorkload(jobs[1].objects[0], "Job", 1), false) // progress: a Workload created
	round()
	noLoop("second preemption, a Workload created since the first")
	round()
	select {
	case err := <-w.loop:
		if !errors.Is(err, results.ErrPreemptionLoop) || !strings.Contains(err.Error(), "InClusterQueue") ||
			!strings.Contains(err.Error(), "workload "+jobs[0].id+" ") {
			t.Errorf("error %v, want a %v naming workload %s with Kueue's reason", err, results.ErrPreemptionLoop, jobs[0].id)
		}
	default:
		t.Fatal("no loop reported on the third preemption from the same state")
	}
}

// TestReplacementPodForgetsTheFailedOnesEnd: a Job's pod fails at 50 and its replacement runs;
// the Workload informer shows Finished before the pod informer shows the replacement's end. The
// failed pod's end is no bound for that Finished: no late step.
func TestReplacementPodForgetsTheFailedOnesEnd(t *testing.T) {
	w, _, p := watchFixture(t)
	top := batchJobs(t, p, 1)[0].objects[0]
	wl := kueueWorkload(top, "Job", 1, cond("QuotaReserved", "QuotaReserved", 1))
	w.onWorkload(wl, false)
	pod := func(uid string, phase corev1.PodPhase, ended string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-" + uid, Namespace: top.GetNamespace(), UID: types.UID(uid),
			Labels: map[string]string{contract.WorkloadLabel: top.GetName()}}, Status: corev1.PodStatus{Phase: phase}}
		if ended != "" {
			p.Annotations = map[string]string{contract.FinishedTraceSec: ended}
		}
		return p
	}
	w.onPod(pod("first", corev1.PodRunning, ""), false)
	w.onPod(pod("first", corev1.PodFailed, "50"), false)
	u := w.units[batchJobs(t, p, 1)[0].id]
	if u.lastEnd != 50 {
		t.Fatalf("the first pod ended at 50: lastEnd %g", u.lastEnd)
	}
	w.onPod(pod("second", corev1.PodRunning, ""), false)
	if u.lastEnd != 0 {
		t.Errorf("a replacement runs: lastEnd %g still bounds the Workload's Finished", u.lastEnd)
	}
	wl.Status.Conditions = append(wl.Status.Conditions, cond("Finished", "Succeeded", 9))
	w.onWorkload(wl, false)
	if n, worst, what := w.lateness(); n != 0 {
		t.Errorf("%d late steps (worst %.0f s: %s), want none", n, worst, what)
	}
}

// TestConfigUntil: a stop at a trace time leaves the objects (it needs Keep) on a clock that
// stops (not one on wall time), with a Kueue on that clock, and is a time.
func TestConfigUntil(t *testing.T) {
	for _, tc := range []struct {
		name       string
		until      float64
		keep       bool
		wall       bool
		kueueClock string
		want       string
	}{
		{"without keep", 3600, false, false, "kueue.clock", "until: the state at that time is the cluster's objects, which the run then leaves: it needs Keep"},
		{"negative", -1, true, false, "kueue.clock", "until -1: want a trace time > 0"},
		{"wall clock", 3600, true, true, "kueue.clock", "until: a clock on wall time (an agent in the cluster) does not stop at a trace time"},
		{"Kueue on wall time", 3600, true, false, "", "until: this cluster's Kueue keeps wall time"},
		{"fine", 3600, true, false, "kueue.clock", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := simclock.New(simclock.Options{})
			if tc.wall {
				clk = simclock.New(simclock.Options{Disabled: true, MaxRate: 100})
			}
			cfg := &Config{REST: &rest.Config{}, Trace: genTrace(t, 3, 7), Spec: &rcluster.Spec{}, Clock: clk, OutDir: t.TempDir(),
				Agent: nopAgent{}, UntilSec: tc.until, Keep: tc.keep, KueueClock: tc.kueueClock}
			err := cfg.check()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("check: %v, want %q", err, tc.want)
			}
		})
	}
}

// nopAgent stands in for the in-process agent where a test only checks a Config.
type nopAgent struct{}

func (nopAgent) Run(context.Context) error { return nil }
func (nopAgent) Snapshot() agent.Snapshot  { return agent.Snapshot{} }
