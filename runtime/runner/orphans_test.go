package runner

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

type patchCall struct {
	ns    string
	owner metav1.OwnerReference
	n     int
}

// fakeResyncer records the resync requests in calls.
func fakeResyncer(t *testing.T, w *watcher) (*resyncer, chan patchCall) {
	calls := make(chan patchCall, 16)
	r := &resyncer{ctx: t.Context(), orphaned: w.orphaned, clk: w.clk, grace: time.Millisecond, asking: map[string]bool{},
		patch: func(_ context.Context, ns string, owner metav1.OwnerReference, n int) error {
			calls <- patchCall{ns, owner, n}
			return nil
		}}
	return r, calls
}

// TestWatcherHoldsOrphans: a job evicted an instant after its pods were created, whose operator
// reported no active pods while two of them ran on (as mpi-operator does when its informer cache
// does not have the workers yet). Kueue released the quota; the clock waits for the pods'
// deletion and the job is asked to resync. A pod already being deleted at the release owes nothing; a new admission ends
// the wait (the operator reuses the pods).
func TestWatcherHoldsOrphans(t *testing.T) {
	w, _, p := watchFixture(t)
	var r *resyncer
	var calls chan patchCall
	r, calls = fakeResyncer(t, w)
	w.resync = r
	it := batchJobs(t, p, 1)[0]
	top := it.objects[0]
	wl := kueueWorkload(top, "Job", 3, cond("QuotaReserved", "QuotaReserved", 1))
	wl.OwnerReferences[0].APIVersion, wl.OwnerReferences[0].Controller = "batch/v1", ptr.To(true)
	w.onWorkload(wl, false)
	u := w.units[it.id]
	pod := func(n string, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: top.GetName() + "-" + n, Namespace: top.GetNamespace(), UID: types.UID(n),
			Labels: map[string]string{contract.WorkloadLabel: top.GetName()}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(2, 0)}
		}
		return p
	}
	for _, n := range []string{"worker-0", "worker-1", "launcher"} {
		w.onPod(pod(n, false), false)
	}
	w.onPod(pod("launcher", true), false) // deleted in time
	released := func(sec int64) {
		wl.Status.Conditions = []metav1.Condition{{Type: "QuotaReserved", Status: metav1.ConditionFalse, Reason: "Pending",
			LastTransitionTime: metav1.Unix(sec, 0)}, cond("Evicted", "Preempted", 2)}
		w.onWorkload(wl, false)
	}
	wl.Status.Conditions = append(wl.Status.Conditions, cond("Evicted", "Preempted", 2))
	w.onWorkload(wl, false)
	if w.clk.Held(holdOrphans(u)) {
		t.Fatal("evicted, quota still reserved: the pods are not orphans yet")
	}
	released(3)
	if !w.clk.Held(holdOrphans(u)) || len(u.orphans) != 2 {
		t.Fatalf("quota released with two workers live: orphans hold %v, orphans %v", w.clk.Held(holdOrphans(u)), u.orphans)
	}
	select {
	case c := <-calls:
		if c.ns != top.GetNamespace() || c.owner.Kind != "Job" || c.owner.Name != top.GetName() || c.owner.APIVersion != "batch/v1" {
			t.Errorf("resync asked of %+v in %s, want the Job %s/%s", c.owner, c.ns, top.GetNamespace(), top.GetName())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the owner was never asked to resync")
	}
	w.onPod(pod("worker-0", true), false)
	if !w.clk.Held(holdOrphans(u)) {
		t.Error("one worker still live: the hold ended early")
	}
	w.onPod(pod("worker-1", true), true)
	if w.clk.Held(holdOrphans(u)) || w.orphaned(u.key) {
		t.Error("every orphan deleted: the hold must end")
	}

	// Released again with a worker live, then admitted again before it is deleted.
	wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 4)}
	w.onWorkload(wl, false)
	w.onPod(pod("worker-2", false), false)
	released(5)
	if !w.clk.Held(holdOrphans(u)) {
		t.Fatal("second release with a live worker: no orphans hold")
	}
	wl.Status.Conditions = []metav1.Condition{cond("QuotaReserved", "QuotaReserved", 6)}
	w.onWorkload(wl, false)
	if w.clk.Held(holdOrphans(u)) || !u.created["worker-2"] {
		t.Errorf("re-admitted: orphans hold %v, the live worker counted for the admission %v; want false, true",
			w.clk.Held(holdOrphans(u)), u.created["worker-2"])
	}
}

// TestResyncerBacksOff: the owner is asked again while the pods remain, and no more once they are
// gone; a second ask for the same unit while one is under way adds nothing.
func TestResyncerBacksOff(t *testing.T) {
	var mu sync.Mutex
	left := 3 // the checks that still find orphans
	calls := make(chan patchCall, 16)
	r := &resyncer{ctx: t.Context(), grace: time.Millisecond, asking: map[string]bool{}, clk: simclock.New(simclock.Options{}),
		orphaned: func(string) bool {
			mu.Lock()
			defer mu.Unlock()
			left--
			return left >= 0
		},
		patch: func(_ context.Context, ns string, owner metav1.OwnerReference, n int) error {
			calls <- patchCall{ns, owner, n}
			return nil
		}}
	owner := metav1.OwnerReference{APIVersion: "kubeflow.org/v2beta1", Kind: "MPIJob", Name: "mpi"}
	r.ask("w1", "team-a", owner)
	r.ask("w1", "team-a", owner)
	var got []int
	deadline := time.After(10 * time.Second)
	for len(got) < 3 {
		select {
		case c := <-calls:
			got = append(got, c.n)
		case <-deadline:
			t.Fatalf("resync requests %v, want 3", got)
		}
	}
	// Await the asker's end: it leaves its mark once the pods are found gone.
	for end := time.Now().Add(10 * time.Second); ; {
		r.mu.Lock()
		busy := r.asking["w1"]
		r.mu.Unlock()
		if !busy {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the asker did not stop once the pods were gone")
		}
		time.Sleep(time.Millisecond)
	}
	if len(calls) != 0 || r.count() != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("requests %v, %d more queued, count %d; want 1 2 3 and no more", got, len(calls), r.count())
	}
}
