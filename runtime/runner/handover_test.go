package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// TestWatcherHandsHoldsOver: where one step of the control plane ends and the next begins in one
// informer event, the watcher places the next step's hold before it releases the last one's. The
// clock moves as soon as no hold is active (after a settle window of milliseconds, which a busy
// machine can spend between two calls), so a release before the hold that takes over lets it jump
// to its next alarm with the next step still owed.
func TestWatcherHandsHoldsOver(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	cases := []struct {
		name string
		// setup brings the watcher to the state before the step, with the holds then owed;
		// step is the informer event.
		setup, step func(w *watcher, f *handoverFixture)
		want        func(f *handoverFixture) []simclock.Key // held after the step
	}{
		{"the last pod of a reservation created: its start before the pods hold ends",
			func(w *watcher, f *handoverFixture) { f.reserve(w) },
			func(w *watcher, f *handoverFixture) { w.onPod(f.pod(corev1.PodPending), false) },
			func(*handoverFixture) []simclock.Key { return []simclock.Key{simclock.PodStart(f0), holdSeen(f0)} }},
		{"a pod parked: kube-scheduler's settling before its start's end",
			func(w *watcher, f *handoverFixture) { f.reserve(w); w.onPod(f.pod(corev1.PodPending), false) },
			func(w *watcher, f *handoverFixture) { w.onPod(f.pod(corev1.PodPending, unschedulable), false) },
			func(*handoverFixture) []simclock.Key {
				return []simclock.Key{{Kind: simclock.KindSchedule, ID: "kube-scheduler"}}
			}},
		{"the last pod ended: the Workload's finish before the agent's completion hold ends",
			func(w *watcher, f *handoverFixture) {
				f.reserve(w)
				w.onPod(f.pod(corev1.PodRunning), false)
				w.clk.Ack(simclock.PodStart(f0))
				w.clk.Hold(simclock.PodDone(f0))
			},
			func(w *watcher, f *handoverFixture) { w.onPod(f.pod(corev1.PodSucceeded), false) },
			func(f *handoverFixture) []simclock.Key { return []simclock.Key{{Kind: simclock.KindFinish, ID: f.id}} }},
		{"a pod deleted before it ran: its owner's replacement before its start's end",
			func(w *watcher, f *handoverFixture) { f.reserve(w); w.onPod(f.pod(corev1.PodPending), false) },
			func(w *watcher, f *handoverFixture) { w.onPod(f.pod(corev1.PodPending), true) },
			func(f *handoverFixture) []simclock.Key { return []simclock.Key{{Kind: simclock.KindRecover, ID: f.id}} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			w, _, p := watchFixture(t)
			clk := simclock.New(simclock.Options{Trace: &log})
			w.clk, w.kueue.clk, w.sched.clk = clk, clk, clk
			f := newHandoverFixture(t, p)
			c.setup(w, f)
			// Kueue's settling would cover every gap: the step starts with it settled.
			clk.Release(simclock.Key{Kind: simclock.KindKueue, ID: "kueue"})
			active := 0
			for _, n := range clk.Active() {
				active += n
			}
			if active == 0 {
				t.Fatalf("nothing held before the step: the setup is wrong")
			}
			log.Reset()
			c.step(w, f)
			for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
				fields := strings.Fields(line)
				if len(fields) != 3 {
					continue
				}
				switch fields[1] {
				case "hold":
					active++
				case "release":
					active--
				}
				if active == 0 {
					t.Errorf("no hold active after %q; the step's lines:\n%s", line, log.String())
					break
				}
			}
			for _, k := range c.want(f) {
				if !clk.Held(k) {
					t.Errorf("%s not held after the step; active: %v", k, clk.Active())
				}
			}
		})
	}
}

// f0 is the fixture's pod's UID.
const f0 = types.UID("handover-pod-0")

// handoverFixture is one batch Job workload of one pod, as the watcher's informers show it.
type handoverFixture struct {
	id, ns, name string
	wl           *kueue.Workload
}

func newHandoverFixture(t *testing.T, p *plan) *handoverFixture {
	t.Helper()
	it := batchJobs(t, p, 1)[0]
	top := it.objects[0]
	wl := kueueWorkload(top, "Job", 1)
	wl.Spec.QueueName = kueue.LocalQueueName(it.queue)
	return &handoverFixture{id: it.id, ns: top.GetNamespace(), name: top.GetName(), wl: wl}
}

// reserve shows the Workload with its quota reserved: its pod is owed.
func (f *handoverFixture) reserve(w *watcher) {
	f.wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 2)}
	f.wl.Status.Admission = &kueue.Admission{ClusterQueue: "main"}
	w.onWorkload(f.wl, false)
}

func (f *handoverFixture) pod(phase corev1.PodPhase, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-0", f.name), Namespace: f.ns, UID: f0,
		Labels: map[string]string{contract.WorkloadLabel: f.name}},
		Status: corev1.PodStatus{Phase: phase, Conditions: conds}}
}

// TestFirstAlarmsArmedBeforeStart: the runner arms the submitter's and the sampler's first alarms
// before the clock starts, so the clock's first move is to the earliest of them whichever
// goroutine runs first.
func TestFirstAlarmsArmedBeforeStart(t *testing.T) {
	p, _ := testPlan(t, 40, "examples/clusters/small.yaml")
	first := p.items[0].offset
	clk := simclock.New(simclock.Options{})
	sub := newSubmitter(nil, p, nil, clk, 1000, 100, 1)
	smp := &sampler{plan: p, clk: clk, step: first + 1}
	smp.arm() // the later alarm first
	sub.arm()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.Start(ctx)
	select {
	case <-sub.alarm.C():
	case <-smp.alarm.C():
		t.Fatalf("the sample row at %g fired before the first submission at %g", first+1, first)
	case <-time.After(10 * time.Second):
		t.Fatalf("the first submission's alarm did not fire; clock: %s", clk.Blockers())
	}
	if now := clk.Now(); now != first {
		t.Errorf("the first submission's alarm fired at trace %g, want %g", now, first)
	}
}

// TestWatcherPodParkedBeforeReservation: the pod informer may show a pod parked before the
// Workload informer shows the reservation it belongs to (a pod exists only once Kueue admitted its
// workload). The verdict is then recorded again within the reservation, where the quota held idle
// reads a wait's reason.
func TestWatcherPodParkedBeforeReservation(t *testing.T) {
	w, _, p := watchFixture(t)
	path := filepath.Join(t.TempDir(), "events.jsonl")
	log, err := results.CreateEventLog(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := results.NewRecorder(p.records, log)
	if err != nil {
		t.Fatal(err)
	}
	w.rec = rec
	f := newHandoverFixture(t, p)
	w.onWorkload(f.wl, false)
	msg := "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}
	w.onPod(f.pod(corev1.PodPending, unschedulable), false)
	f.reserve(w)
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := results.ReadEvents(bytes.NewReader(data), path)
	if err != nil {
		t.Fatal(err)
	}
	_, waits := results.ReservedIdle(evs, rec.Records(), 100, 60)
	found := false
	for _, wt := range waits {
		if wt.Workload != f.id {
			continue
		}
		found = true
		if !wt.Unschedulable || wt.Reason != results.SchedulingReason(msg) {
			t.Errorf("wait %+v: want kube-scheduler's verdict %q; events %+v", wt, results.SchedulingReason(msg), evs)
		}
	}
	if !found {
		t.Errorf("no wait for %s; events %+v", f.id, evs)
	}
}

// TestPodsReadyHold: with waitForPodsReady Kueue gives a Workload a PodsReady condition and counts
// its timeout from the admission until the condition is True. The clock holds from the moment
// every pod runs until Kueue says so; without the condition (waitForPodsReady off) nothing is
// held.
func TestPodsReadyHold(t *testing.T) {
	ready := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: kueue.WorkloadPodsReady, Status: status, Reason: reason}
	}
	for _, tc := range []struct {
		name string
		// podsReady is the Workload's PodsReady condition when its pod starts (nil: none), then
		// kueue the one Kueue writes after.
		podsReady, kueue *metav1.Condition
		heldAfterStart   bool
		heldAfterKueue   bool
	}{
		{"waitForPodsReady on: held until Kueue's condition is True",
			new(ready(metav1.ConditionFalse, kueue.WorkloadWaitForStart)), new(ready(metav1.ConditionTrue, kueue.WorkloadStarted)), true, false},
		{"Kueue still waiting: still held",
			new(ready(metav1.ConditionFalse, kueue.WorkloadWaitForStart)), new(ready(metav1.ConditionFalse, kueue.WorkloadWaitForStart)), true, true},
		{"waitForPodsReady off: no condition, no hold", nil, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _, p := watchFixture(t)
			clk := simclock.New(simclock.Options{})
			w.clk, w.kueue.clk, w.sched.clk = clk, clk, clk
			f := newHandoverFixture(t, p)
			f.wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 2)}
			if tc.podsReady != nil {
				f.wl.Status.Conditions = append(f.wl.Status.Conditions, *tc.podsReady)
			}
			f.wl.Status.Admission = &kueue.Admission{ClusterQueue: "main"}
			w.onWorkload(f.wl, false)
			key := simclock.Key{Kind: simclock.KindPodsReady, ID: f.id}
			if clk.Held(key) {
				t.Fatal("held before the pod runs")
			}
			w.onPod(f.pod(corev1.PodRunning), false)
			if got := clk.Held(key); got != tc.heldAfterStart {
				t.Fatalf("held %v once every pod runs, want %v", got, tc.heldAfterStart)
			}
			f.wl.Status.Conditions = f.wl.Status.Conditions[:1]
			if tc.kueue != nil {
				f.wl.Status.Conditions = append(f.wl.Status.Conditions, *tc.kueue)
			}
			w.onWorkload(f.wl, false)
			if got := clk.Held(key); got != tc.heldAfterKueue {
				t.Fatalf("held %v after Kueue's write, want %v", got, tc.heldAfterKueue)
			}
		})
	}
}
