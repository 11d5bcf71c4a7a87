package sim

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// The lifecycle role: what Kueue's workload controller and job reconciler (jobframework) do
// around the scheduler, played with Kueue's own functions (kueuelib's operations) against the
// Store.
//   - Every Workload write goes to the workload controller's event handlers (Kueue.Deliver),
//     which keep the queue manager and the cache in step, exactly as the informer feeds them.
//   - Quota reserved and admitted: the job starts (its pods are created after
//     Timing.PodStartSec and bound by the kube-scheduler role).
//   - Evicted (preempted): the job stops — its pods are deleted — and, once they are gone, the
//     Workload's quota is released with Requeued set as jobframework sets it
//     (pkg/controller/jobframework reconciler, "handle eviction"); the handlers requeue it.
//   - waitForPodsReady: the job reconciler's PodsReady condition follows the pods (False,
//     WaitForStart, at admission and when the admission is gone; True once every pod runs),
//     and Kueue's workload reconciler, run on the virtual clock (Kueue.Reconcile), evicts a
//     Workload whose pods were not ready in time and requeues it after its backoff.
//   - Every pod done: the job is finished and so is its Workload (Kueue.Finish), Succeeded or,
//     when a pod failed, Failed (the rendered jobs allow no retries); the handlers release its
//     quota and the sim forgets it.

// drain hands Kueue's Workload writes on (through the control-plane model, when there is one)
// to the workload controller's handlers and then to the lifecycle, until none is left. It returns
// when the writes the writer waits for are answered (now without a model).
func (s *sim) drain() float64 {
	answered := s.loop.Now()
	for {
		for s.kq.Store.HasChanges() {
			changes := s.kq.Store.TakeChanges()
			if s.cp != nil {
				var at float64
				changes, at = s.cp.send(changes)
				answered = max(answered, at)
			}
			s.pods.batch(func() {
				for _, c := range changes {
					s.deliver(c)
				}
			})
		}
		// The workload controller reconciles what its handlers queued; its writes go round again.
		ran, err := s.kq.Reconcile()
		if err != nil {
			s.fail(err)
			return answered
		}
		if !ran && !s.kq.Store.HasChanges() {
			return answered
		}
	}
}

// deliver is one write seen: by the workload controller's handlers, then by the lifecycle.
func (s *sim) deliver(c kueuelib.Change) {
	s.kq.Deliver(c)
	s.react(c)
}

// react records one Workload write's transitions (kueuewl.Tracker, the table both engines use)
// and plays the controllers' reaction to it.
func (s *sim) react(c kueuelib.Change) {
	if c.New == nil {
		return
	}
	w := s.wls[c.Key()]
	if w == nil {
		return
	}
	old, cur := c.Old, c.New
	if old == nil {
		old = &kueue.Workload{}
	}
	now := s.loop.Now()
	var finished *kueuewl.Transition
	for _, tr := range w.conds.Observe(cur) {
		if tr.Type == results.EvFinished {
			// Recorded once the job's pods are gone and, for a trial, its experiment told.
			finished = &tr
			continue
		}
		s.emit(results.Event{T: now, Workload: w.it.id, Object: w.key.String(), Type: tr.Type, Reason: tr.Reason, Message: tr.Message, Flavors: tr.Flavors})
	}
	if !kueuelib.HasQuotaReservation(old) && kueuelib.HasQuotaReservation(cur) {
		s.reserve(w, cur)
	}
	if !kueuelib.IsAdmitted(old) && kueuelib.IsAdmitted(cur) {
		w.startEv = s.loop.After(s.cfg.Timing.PodStartSec, func() { s.pods.start(w, cur) })
		// A Workload restored admitted (resume.go) keeps the PodsReady condition it had.
		if c.Old != nil || !kueuelib.HasPodsReadyCondition(cur) {
			s.syncPodsReady(w, false)
		}
	}
	if kueuelib.IsAdmitted(old) && !kueuelib.IsAdmitted(cur) && !kueuelib.IsFinished(cur) {
		s.syncPodsReady(w, false)
	}
	if kueuelib.HasQuotaReservation(old) && !kueuelib.HasQuotaReservation(cur) {
		s.unreserve(w)
	}
	if kueuelib.IsEvicted(cur) && kueuelib.HasQuotaReservation(cur) && !kueuelib.IsFinished(cur) {
		s.stopEvicted(w, cur)
	}
	if finished != nil {
		s.workloadFinished(w, *finished)
	}
}

// ErrPreemptionLoop is wrapped by Run's error when a preemption loop ended the run (the rule and
// why: results.LoopGuard).
var ErrPreemptionLoop = results.ErrPreemptionLoop

// loopFound ends the run with the guard's error about preemption e, which it completes with the
// preemptor and Kueue's reason.
func (s *sim) loopFound(err error, e *results.Event) {
	by := ""
	if m := preemptorUID.FindStringSubmatch(e.Message); m != nil {
		if p := s.workloadByUID(types.UID(m[1])); p != nil {
			by = fmt.Sprintf(" by workload %s (Workload %s)", p.it.id, p.key)
		}
	}
	s.fail(fmt.Errorf("%w, the last time%s: %s: %s", err, by, e.Reason, e.Message))
}

// horizon is the trace time of the next change from outside Kueue the sim has coming, the loop
// guard's Horizon: the next submission or the next pod completion the engine predicts.
func (s *sim) horizon() (float64, bool) {
	t, ok := s.pods.eng.NextFinish()
	if s.next < len(s.items) {
		if at := s.items[s.next].offset; !ok || at < t {
			t, ok = at, true
		}
	}
	return t, ok
}

// preemptorUID finds the preemptor's UID in the message of Kueue's Preempted condition
// (preemption.preemptionMessage: "Preempted to accommodate a workload (UID: ..., JobUID: ...) ...").
var preemptorUID = regexp.MustCompile(`\(UID: ([^,)]+)`)

// workloadByUID is the live Workload of that UID, or nil (used once, for an error message).
func (s *sim) workloadByUID(uid types.UID) *kwl {
	for k, w := range s.wls {
		if o := s.kq.Store.Workload(k); o != nil && o.UID == uid {
			return w
		}
	}
	return nil
}

// reserve books the quota a Workload got for the time series.
func (s *sim) reserve(w *kwl, cur *kueue.Workload) {
	w.cq = string(cur.Status.Admission.ClusterQueue)
	w.reservedGPU = map[string]int64{}
	for _, psa := range cur.Status.Admission.PodSetAssignments {
		for r, f := range psa.Flavors {
			if kueuewl.IsGPU(string(r)) {
				q := psa.ResourceUsage[r]
				w.reservedGPU[string(f)] += q.Value()
			}
		}
	}
	s.sample.g.reserved(w)
}

func (s *sim) unreserve(w *kwl) {
	s.sample.g.unreserved(w)
	w.cq, w.reservedGPU = "", nil
}

// stopEvicted plays the job reconciler for an evicted Workload that still holds quota: the job is
// stopped (its pods deleted) and the Workload's admission cleared, with Requeued True when
// Kueue preempted it (jobframework sets it so for preemption and node failures only).
func (s *sim) stopEvicted(w *kwl, cur *kueue.Workload) {
	if w.startEv != nil {
		w.startEv.Cancel()
		w.startEv = nil
	}
	s.pods.stopAll(w, "Evicted")
	if err := s.kq.ReleaseEvicted(cur); err != nil {
		s.fail(fmt.Errorf("release evicted workload %s: %w", w.key, err))
	}
}

// syncPodsReady plays the job reconciler's PodsReady condition (waitForPodsReady): the job's
// pods are all ready (running) or not.
func (s *sim) syncPodsReady(w *kwl, ready bool) {
	if err := s.kq.SyncPodsReady(w.key, ready); err != nil {
		s.fail(fmt.Errorf("workload %s: PodsReady: %w", w.key, err))
	}
}

// finishWorkload declares the job finished: Kueue's workload.Finish (Kueue.Finish) sets the
// Workload's Finished condition, which the handlers see.
func (s *sim) finishWorkload(w *kwl, failed bool, msg string) {
	if err := s.kq.Finish(w.key, failed, msg); err != nil {
		s.fail(fmt.Errorf("finish workload %s: %w", w.key, err))
	}
}

// workloadFinished records a finished Workload, forgets it and, for a trial, tells its experiment.
func (s *sim) workloadFinished(w *kwl, tr kueuewl.Transition) {
	if w.finished {
		return
	}
	w.finished = true
	s.guard.Finished(w.key.String()) // a trial's end has no finished event of its own
	s.sample.g.finished(w)
	s.pods.removeAll(w)
	delete(s.wls, w.key)
	s.kq.Store.Forget(w.key)
	it := w.it
	it.open--
	defer s.seal(it)
	defer s.dropClaimTemplates(it)
	now := s.loop.Now()
	if w.trial < 0 {
		s.emit(results.Event{T: now, Workload: it.id, Type: results.EvFinished, Object: w.key.String(), Reason: tr.Reason, Message: tr.Message})
		return
	}
	verdict, err := s.trialDone(it, w.trial, tr.Failed)
	if err != nil {
		// A trial that cannot be created can never finish: the experiment stays unfinished and
		// the reason is in the event log, as in the cluster engine.
		s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
		return
	}
	if verdict != "" {
		s.emit(results.Event{T: now, Workload: it.id, Type: results.EvFinished, Reason: verdict, Message: "all trials finished"})
	}
}
