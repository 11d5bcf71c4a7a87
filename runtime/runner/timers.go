package runner

import (
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// KueueTimers are Kueue's waitForPodsReady settings in seconds. Zero durations are off.
type KueueTimers struct {
	// PodsReadyTimeout and RecoveryTimeout are waitForPodsReady's timeout and recoveryTimeout.
	PodsReadyTimeout, RecoveryTimeout float64
	// BackoffBase and BackoffMax are waitForPodsReady.requeuingStrategy's backoff.
	BackoffBase, BackoffMax float64
}

// timers puts the timers of a Kueue that runs on wall time (one kueuelab does not run: the local
// Kueue follows the trace clock, runtime/kueueclock) at their trace times. The clock jumps, so it
// reaches a timer's trace time long before Kueue's wall timer fires: an alarm stops the clock at
// the trace time, and a hold keeps it there until Kueue has acted (evicted the workload whose pods
// were not ready in time, requeued the workload whose backoff ended), which takes the timer's
// whole duration in wall time. Kueue computes its timers from API timestamps of one-second
// resolution, so it may also act up to a wall second early.
type timers struct {
	cfg KueueTimers
	clk *simclock.Clock

	mu sync.Mutex
	by map[string]*unitTimer // by unit key
}

type unitTimer struct {
	alarm    *simclock.Alarm
	kind     string  // "podsready", "recovery" or "backoff"
	due      float64 // trace time
	firedKey simclock.Key
	fired    bool
	stop     chan struct{}
}

func newTimers(cfg KueueTimers, clk *simclock.Clock) *timers {
	if cfg.PodsReadyTimeout <= 0 && cfg.RecoveryTimeout <= 0 {
		return nil
	}
	return &timers{cfg: cfg, clk: clk, by: map[string]*unitTimer{}}
}

// limit is how long a fired timer may hold the clock: Kueue's wall timer plus its one-second
// timestamp resolution and some slack for a busy machine.
func (t *timers) limit(traceSec float64) time.Duration {
	return time.Duration(traceSec*float64(time.Second)) + 10*time.Second
}

// released: the unit no longer holds quota (or finished): its PodsReady timer is moot.
func (t *timers) released(u *unit) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ut := t.by[u.key]; ut != nil && ut.kind != "backoff" {
		t.cancel(u.key, ut)
	}
}

// workload updates the unit's timer from its Workload: armed while Kueue's timer runs, released
// once Kueue has acted.
func (t *timers) workload(u *unit, wl *kueue.Workload, now float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	want, due := "", 0.0
	ready := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady)
	admitted := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadAdmitted)
	requeued := meta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
	switch {
	case u.finished:
	case admitted != nil && admitted.Status == "True" && (ready == nil || ready.Status != "True"):
		if ready != nil && ready.Reason == kueue.WorkloadWaitForRecovery && t.cfg.RecoveryTimeout > 0 {
			want, due = "recovery", now+t.cfg.RecoveryTimeout
		} else if t.cfg.PodsReadyTimeout > 0 && (ready == nil || ready.Reason == kueue.WorkloadWaitForStart || ready.Reason == "PodsReady") {
			want, due = "podsready", u.admitted+t.cfg.PodsReadyTimeout
		}
	case requeued != nil && requeued.Status == "False" && wl.Status.RequeueState != nil &&
		(wl.Status.RequeueState.RequeueAt != nil || t.by[u.key] != nil && t.by[u.key].kind == "backoff"):
		// Kueue clears requeueAt when the backoff ends and sets Requeued True in a second write:
		// the backoff is over for the runner only then.
		n := ptr.Deref(wl.Status.RequeueState.Count, 1)
		backoff := t.cfg.BackoffBase * math.Pow(2, float64(n-1))
		if t.cfg.BackoffMax > 0 {
			backoff = math.Min(backoff, t.cfg.BackoffMax)
		}
		want, due = "backoff", now+backoff
	}
	ut := t.by[u.key]
	if ut != nil && (ut.kind != want || want == "") {
		t.cancel(u.key, ut)
		ut = nil
	}
	if want == "" || ut != nil {
		return
	}
	ut = &unitTimer{alarm: t.clk.NewAlarm("kueue-"+want, simclock.OrderTimer), kind: want, due: due,
		firedKey: simclock.Key{Kind: simclock.KindTimer, ID: u.key}, stop: make(chan struct{})}
	t.by[u.key] = ut
	ut.alarm.Set(due)
	limit := t.limit(due - now)
	go func() {
		select {
		case <-ut.stop:
			return
		case <-ut.alarm.C():
		}
		// Kueue owes the action now: hold the clock here until the Workload shows it.
		t.mu.Lock()
		if t.by[u.key] == ut {
			ut.fired = true
			t.clk.HoldFor(ut.firedKey, limit)
		}
		t.mu.Unlock()
		ut.alarm.Done()
	}()
}

func (t *timers) cancel(key string, ut *unitTimer) {
	close(ut.stop)
	ut.alarm.Stop()
	if ut.fired {
		t.clk.Release(ut.firedKey)
	}
	delete(t.by, key)
}
