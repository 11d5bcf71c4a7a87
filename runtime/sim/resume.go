package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/internal/atomicfile"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
	"github.com/kueuelab/kueuelab/runtime/sim/des"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// A run resumed from a state (Config.Resume) starts at the state's instant with the state's
// workloads already in Kueue, created then, before Kueue's first cycle, in the order Kueue queued
// them, each with the status the state gives its Workload (conditions, requeue state; an admitted
// one holding its quota, as Kueue rebuilds its cache after a restart); the ones Kueue kept aside
// as inadmissible go back there; pods go back to their nodes and continue from their progress.
// The rest of the trace arrives at its own times. What only Kueue's memory holds beyond that (a
// cycle in flight, its backoff, admission fair sharing's usage) starts afresh.

// restore creates the resumed workloads (the first items, in Kueue's order) before anything else
// happens, and then the LocalQueues, as a starting Kueue meets them: its queue manager adopts
// the existing Workloads of each LocalQueue it learns of (pending ones queued, admitted ones
// assigned to it, so that their end requeues what waits behind them), and its handlers then see
// every Workload created. It returns the index of the first item left to submit.
func (s *sim) restore() (int, error) {
	if s.cfg.Resume == nil {
		return 0, nil
	}
	n := 0
	for n < len(s.items) && s.items[n].resume != nil {
		it := s.items[n]
		s.items[n] = nil
		s.submit(it)
		n++
	}
	if err := s.kq.AddObjects(s.lqs); err != nil {
		return n, fmt.Errorf("resume: add LocalQueues: %w", err)
	}
	s.drain()
	for _, key := range slices.SortedFunc(maps.Keys(s.wls), compareKeys) {
		if r := s.wls[key].it.resume; r != nil && r.Parked {
			if err := s.kq.Park(key); err != nil {
				return n, fmt.Errorf("resume: park %s: %w", r.ID, err)
			}
		}
	}
	return n, nil
}

// splitLocalQueues separates the LocalQueues from the other objects.
func splitLocalQueues(objs []client.Object) (other, lqs []client.Object) {
	for _, o := range objs {
		if _, ok := o.(*kueue.LocalQueue); ok {
			lqs = append(lqs, o)
		} else {
			other = append(other, o)
		}
	}
	return other, lqs
}

// checkResume checks Config.Resume against the trace.
func (c *Config) checkResume() error {
	st := c.Resume
	if st == nil {
		return nil
	}
	if c.Trace == nil {
		return errors.New("resume: give the trace in memory (Config.Trace)")
	}
	var errs []error
	ids := make(map[string]bool, len(c.Trace.Workloads))
	idx := st.Index()
	for _, w := range c.Trace.Workloads {
		ids[w.WorkloadID] = true
		if idx[w.WorkloadID] == nil && w.SubmitTimeOffsetSec < st.NowSec {
			errs = append(errs, fmt.Errorf("resume: trace workload %s is submitted at %gs, before the state's instant %gs, and the state does not list it (finished before? leave it out of the trace)", w.WorkloadID, w.SubmitTimeOffsetSec, st.NowSec))
		}
	}
	for _, w := range st.Workloads {
		if !ids[w.ID] {
			errs = append(errs, fmt.Errorf("resume: state workload %s is not in the trace", w.ID))
		}
	}
	return errors.Join(errs...)
}

// resumeOrder puts the resumed items first, in the order of the creation timestamps their
// Workloads get (resumedCreation), then of id as a replay creates them, so that a timestamp a
// tie moves by a nanosecond (createResumed) keeps that order.
func resumeOrder(a, b *item) int {
	switch {
	case a.resume != nil && b.resume != nil:
		return cmp.Or(cmp.Compare(resumedCreation(a.resume), resumedCreation(b.resume)), strings.Compare(a.id, b.id))
	case a.resume != nil:
		return -1
	case b.resume != nil:
		return 1
	}
	return 0
}

// resumedWork is w with the work its state says is left, when the state knows no more than that:
// the workload's duration and each of its job records' work scaled to it. A state with its roles'
// progress keeps the work whole, and the pods continue from that progress (resumeProgress).
func resumedWork(w *trace.Workload, jobs []*trace.Job, r *state.Workload) (*trace.Workload, []*trace.Job) {
	if r == nil || r.RemainingSec == nil || len(r.Progress) > 0 {
		return w, jobs
	}
	return trace.WithDuration(w, jobs, *r.RemainingSec)
}

// resumedCreation is the creation time a resumed workload's Workload gets: the state's; for a
// state that gives no conditions, its queuedSec, so that Kueue orders a requeued workload by its
// eviction as it would from the Evicted condition.
func resumedCreation(r *state.Workload) float64 {
	if len(r.Conditions) == 0 {
		return r.OrderSec()
	}
	return r.CreatedSec
}

// createResumed creates a resumed workload's Workload, pending or admitted, with the status the
// state gives it and the creation time resumedCreation.
func (s *sim) createResumed(wl *kueue.Workload, r *state.Workload) error {
	s.pods.resumeProgress(wl.Namespace, r)
	t := des.Time(resumedCreation(r))
	if !t.After(s.lastResumed) {
		// Equal timestamps (a cluster's, to the second) keep the state's order.
		t = s.lastResumed.Add(time.Nanosecond)
	}
	s.lastResumed = t
	wl.CreationTimestamp = metav1.NewTime(t)
	st := kueuelib.RestoredStatus{}
	for _, c := range r.Conditions {
		st.Conditions = append(st.Conditions, metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: metav1.NewTime(des.Time(c.SinceSec))})
	}
	if rs := r.RequeueState; rs != nil {
		st.RequeueCount = &rs.Count
		if rs.RequeueAtSec != nil {
			at := des.Time(*rs.RequeueAtSec)
			st.RequeueAt = &at
		}
	}
	w := s.wls[keyOf(wl)]
	if r.Phase != state.Admitted {
		if err := s.kq.CreatePending(wl, st); err != nil {
			return err
		}
		primeTracker(w, wl)
		return nil
	}
	a := r.Admission
	var podsets []kueuelib.RestoredPodSet
	for _, ps := range a.PodSets {
		podsets = append(podsets, kueuelib.RestoredPodSet{Name: ps.Name, Count: ps.Count, Flavors: ps.Flavors})
	}
	if err := s.kq.CreateAdmitted(wl, a.ClusterQueue, podsets, des.Time(*r.AdmittedSec), st); err != nil {
		return err
	}
	primeTracker(w, wl)
	return nil
}

// primeTracker shows w's event table the conditions its Workload was restored with, but its
// admission, so that the run records the restored admission (at the state's instant) and no
// eviction, preemption or requeue that happened before it.
func primeTracker(w *kwl, wl *kueue.Workload) {
	c := wl.DeepCopy()
	c.Status.Conditions = slices.DeleteFunc(c.Status.Conditions, func(x metav1.Condition) bool {
		return x.Type == kueue.WorkloadQuotaReserved || x.Type == kueue.WorkloadAdmitted
	})
	w.conds.Observe(c)
}

// writeState writes the run's state now into dir (state.yaml, the trace of the workloads alive
// and yet to come, the cluster spec), for a forecast or a resumed run to start from. Each live
// workload's work left is known exactly (its pods' progress); a Katib experiment alive now is
// left out, and said so, because its trials are not resumed.
func (s *sim) writeState(dir string, tr *trace.Trace) (skipped []string, err error) {
	now := s.loop.Now()
	st := &state.State{Metadata: state.Metadata{Name: fmt.Sprintf("%s-at-%g", s.plan.cluster.Name, now)},
		Source:       fmt.Sprintf("sim replay of %s on %s at trace time %gs", s.cfg.TraceName, s.plan.cluster.Name, now),
		KueueVersion: kueuelib.KueueVersion, NowSec: now, Trace: state.TraceFile, Cluster: state.ClusterFile,
		Arrivals: state.ArrivalsRecorded}
	byID := map[string][]*kwl{}
	for _, w := range s.wls {
		if !w.finished {
			byID[w.it.id] = append(byID[w.it.id], w)
		}
	}
	keep := map[string]bool{}
	parked := s.kq.Parked()
	traceByID := tr.ByID()
	var trials []*trace.Workload
	jobs := maps.Clone(tr.Jobs)
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		ws := byID[id]
		if ws[0].trial >= 0 {
			// An experiment's live trials stay, each a workload of its own (a one-pod Job, as
			// Katib creates it), so that their quota and pods are where they were; the trials the
			// experiment would create after them are not.
			skipped = append(skipped, id)
			slices.SortFunc(ws, func(a, b *kwl) int { return a.trial - b.trial })
			for _, w := range ws {
				tw, job, err := trialWorkload(traceByID[id], tr.Jobs[id], w)
				if err != nil {
					return nil, err
				}
				if job != nil {
					jobs[tw.WorkloadID] = []*trace.Job{job}
				}
				sw, err := s.stateOf(w, parked[w.key])
				if err != nil {
					return nil, err
				}
				sw.ID = tw.WorkloadID
				for i := range sw.Progress {
					sw.Progress[i].Role = trace.RoleMain
				}
				st.Workloads = append(st.Workloads, sw)
				trials = append(trials, tw)
			}
			continue
		}
		sw, err := s.stateOf(ws[0], parked[ws[0].key])
		if err != nil {
			return nil, err
		}
		st.Workloads = append(st.Workloads, sw)
		keep[id] = true
	}
	out, history := &trace.Trace{}, &trace.Trace{}
	skip := map[string]bool{}
	for _, id := range skipped {
		skip[id] = true
	}
	toCome := s.unsubmitted()
	for _, w := range tr.Workloads {
		// Alive now, or not submitted yet (a workload submitted at this very instant may not
		// have run yet). The others are done: the history a forecast draws durations from.
		switch {
		case keep[w.WorkloadID] || toCome[w.WorkloadID]:
			out.Workloads = append(out.Workloads, w)
		case !skip[w.WorkloadID]:
			history.Workloads = append(history.Workloads, w)
		}
	}
	out.Workloads = append(out.Workloads, trials...)
	trace.SortWorkloads(out.Workloads)
	if len(history.Workloads) > 0 {
		st.History = state.HistoryFile
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if err := trace.WriteFile(filepath.Join(dir, state.TraceFile), out.Workloads, jobs); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if st.History != "" {
		if err := trace.WriteFile(filepath.Join(dir, state.HistoryFile), history.Workloads, nil); err != nil {
			return nil, fmt.Errorf("state: %w", err)
		}
	}
	spec, err := yaml.Marshal(s.cfg.Spec)
	if err != nil {
		return nil, fmt.Errorf("state: cluster spec: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(dir, state.ClusterFile), spec); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	b, err := state.Marshal(st)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(dir, state.StateFile), b); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return skipped, nil
}

// unsubmitted is the set of workloads whose submission has not run: the items from the next one
// to submit on.
func (s *sim) unsubmitted() map[string]bool {
	out := map[string]bool{}
	for _, it := range s.items[s.next:] {
		if it != nil {
			out[it.id] = true
		}
	}
	return out
}

// stateOf is one live Workload's state now.
func (s *sim) stateOf(w *kwl, parked bool) (state.Workload, error) {
	wl := s.kq.Store.Workload(w.key)
	if wl == nil {
		return state.Workload{}, fmt.Errorf("state: workload %s is not in the store", w.key)
	}
	sw := state.Workload{ID: w.it.id, Phase: state.Pending, CreatedSec: des.Seconds(wl.CreationTimestamp.Time)}
	for _, c := range wl.Status.Conditions {
		if c.Type != kueue.WorkloadQuotaReserved && c.Type != kueue.WorkloadAdmitted {
			sw.Conditions = append(sw.Conditions, state.Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message,
				SinceSec: des.Seconds(c.LastTransitionTime.Time)})
		}
	}
	if rs := wl.Status.RequeueState; rs != nil {
		sw.RequeueState = &state.RequeueState{}
		if rs.Count != nil {
			sw.RequeueState.Count = *rs.Count
		}
		if rs.RequeueAt != nil {
			at := des.Seconds(rs.RequeueAt.Time)
			sw.RequeueState.RequeueAtSec = &at
		}
	}
	if !kueuelib.HasQuotaReservation(wl) || kueuelib.IsEvicted(wl) {
		// An eviction at the instant of creation comes before its nanoseconds (as an admission).
		if q := max(des.Seconds(s.kq.QueueOrderTime(wl)), sw.CreatedSec); q != sw.CreatedSec {
			sw.QueuedSec = &q
		}
		sw.Parked = parked
		sw.Progress = s.pods.progress(w, false)
		if r, ok := s.pods.checkpointed(w); ok {
			sw.RemainingSec = &r
		}
		return sw, nil
	}
	sw.Phase = state.Admitted
	at := sw.CreatedSec
	for _, c := range wl.Status.Conditions {
		if c.Type == kueue.WorkloadQuotaReserved && c.Status == metav1.ConditionTrue {
			// A cycle ending at the instant the Workload was created admits it at that instant,
			// before the nanoseconds its creation time carries for a unique order.
			at = max(des.Seconds(c.LastTransitionTime.Time), sw.CreatedSec)
		}
	}
	sw.AdmittedSec = &at
	a := &state.Admission{ClusterQueue: string(wl.Status.Admission.ClusterQueue)}
	for _, psa := range wl.Status.Admission.PodSetAssignments {
		ps := state.PodSetFlav{Name: string(psa.Name), Flavors: map[string]string{}}
		if psa.Count != nil {
			ps.Count = *psa.Count
		} else if p := podSetOf(wl, psa.Name); p != nil {
			ps.Count = p.Count
		}
		for r, f := range psa.Flavors {
			ps.Flavors[string(r)] = string(f)
		}
		a.PodSets = append(a.PodSets, ps)
	}
	sw.Admission = a
	sw.Progress = s.pods.progress(w, true)
	var r float64
	for _, rp := range sw.Progress {
		r = max(r, rp.RemainingSec+rp.PauseSec)
	}
	sw.RemainingSec = &r
	return sw, nil
}

// progress is where each role of w stands: for an admitted workload, its pods (the one with the
// most work left; a pod not started has all of its own, or what its role's checkpoint saved); for
// a pending one, what its next pods start from.
func (p *podRole) progress(w *kwl, admitted bool) []state.RoleProgress {
	var out []state.RoleProgress
	for i := range w.podsets {
		c := w.podsets[i].contract
		key := w.key.Namespace + "/" + c.WorkloadID + "/" + c.Role
		rp := state.RoleProgress{Role: c.Role, RemainingSec: c.DurationSec, RestartsOwed: p.restarts[key]}
		if ck, ok := p.ckpts[key]; ok && ck > 0 {
			rp.RemainingSec, rp.CheckpointSec = ck, ck
		}
		if admitted {
			best := -1.0
			for _, pd := range w.pods {
				if pd.ps != i || pd.done || pd.node < 0 {
					continue
				}
				rp.Nodes = append(rp.Nodes, p.ks.NodeName(pd.node))
				sn := p.eng.Snapshot(pd.eid)
				if sn.RemainingSec > best {
					best = sn.RemainingSec
					rp.RemainingSec, rp.CheckpointSec, rp.SinceCheckpointSec, rp.PauseSec = sn.RemainingSec, sn.CheckpointSec, sn.SinceCheckpointSec, sn.PauseSec
				}
			}
		}
		rp.RemainingSec = max(rp.RemainingSec, 0)
		out = append(out, rp)
	}
	return out
}

// resumeProgress sets up the resumed workload r's pods to continue from its roles' progress: an
// admitted workload's first pods restore it (bind), a pending one's roles keep their checkpoints
// and owed restarts as after an eviction.
func (p *podRole) resumeProgress(ns string, r *state.Workload) {
	for _, rp := range r.Progress {
		key := ns + "/" + r.ID + "/" + rp.Role
		if rp.RestartsOwed > 0 {
			p.restarts[key] = rp.RestartsOwed
		}
		if r.Phase == state.Admitted {
			// A role whose pods make more than one pod set (a one-role trace workload rendered as
			// a launcher and workers) has an entry per pod set: its pods take all their nodes, in
			// the pod sets' order, and continue from the one with the most work left, as the state
			// writer picks a pod set's. (A role's pods are alike, so which pod takes which of its
			// nodes does not matter.)
			p.pins[key] = append(p.pins[key], rp.Nodes...)
			if sn, ok := p.resumed[key]; !ok || rp.RemainingSec > sn.RemainingSec {
				p.resumed[key] = engine.Snapshot{RemainingSec: rp.RemainingSec, CheckpointSec: rp.CheckpointSec, SinceCheckpointSec: rp.SinceCheckpointSec, PauseSec: rp.PauseSec}
			}
		} else if rp.CheckpointSec > 0 {
			p.ckpts[key] = rp.CheckpointSec
		}
	}
}

// checkpointed is the work a workload's checkpoints leave it, when it has any.
func (p *podRole) checkpointed(w *kwl) (float64, bool) {
	var left float64
	found := false
	for i := range w.podsets {
		c := w.podsets[i].contract
		if r, ok := p.ckpts[w.key.Namespace+"/"+c.WorkloadID+"/"+c.Role]; ok {
			left, found = max(left, r), true
		}
	}
	return left, found && left > 0
}

// saveState writes the state at the limit to Config.StateOut and says what it left out.
func (s *sim) saveState() error {
	s.pods.advance()
	tr := s.cfg.Trace
	if tr == nil {
		var err error
		if tr, err = trace.LoadWorkloads(context.Background(), s.cfg.TracePath, trace.Options{}); err != nil {
			return fmt.Errorf("state: %w", err)
		}
	}
	skipped, err := s.writeState(s.cfg.StateOut, tr)
	if err != nil {
		return err
	}
	if len(skipped) > 0 {
		fmt.Fprintf(s.cfg.Out, "state: %d Katib experiments alive at %gs: their live trials are in the state as workloads of their own, the trials still to come are not: %s\n", len(skipped), s.loop.Now(), strings.Join(skipped, ", "))
	}
	return nil
}

// placeResumed places a pod of a resumed admitted workload's first attempt: on the next node its
// role's pods ran on, or, past those, among the pods waiting for a node, as its role's other pods
// were. It reports false for any other pod (and for a node that no longer fits it).
func (p *podRole) placeResumed(pd *pod) bool {
	if pd.w.it.resume == nil || pd.w.it.resume.Phase != state.Admitted || pd.w.attempt != 1 {
		return false
	}
	pins, ok := p.pins[pd.ckpt]
	if !ok {
		return false
	}
	if len(pins) == 0 {
		p.pending = append(p.pending, pd)
		return true
	}
	p.pins[pd.ckpt] = pins[1:]
	if p.nodeIndex == nil {
		p.nodeIndex = map[string]int{}
		for i := range p.ks.Nodes() {
			p.nodeIndex[p.ks.NodeName(i)] = i
		}
	}
	i, known := p.nodeIndex[pins[0]]
	if !known || !p.ks.ScheduleOn(pd.req, i) {
		return false
	}
	p.bind(pd, i)
	return true
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

// trialWorkload is live trial w of experiment e as a workload of its own: a one-pod Job of the
// trial's requests and duration (the kind the default mapping renders a single-GPU training as),
// submitted when the trial was created, with the experiment's namespace, priority and profile;
// with a job record, the experiment's first trial record, when it has job records.
func trialWorkload(e *trace.Workload, ejobs []*trace.Job, w *kwl) (*trace.Workload, *trace.Job, error) {
	if e == nil || len(w.podsets) != 1 {
		return nil, nil, fmt.Errorf("state: trial %s: not a one-pod-set trial of a trace experiment", w.key)
	}
	var group *trace.PodGroup
	for i := range e.Pods {
		if e.Pods[i].Role == trace.RoleTrial {
			group = &e.Pods[i]
		}
	}
	if group == nil {
		return nil, nil, fmt.Errorf("state: experiment %s has no trial pods", e.WorkloadID)
	}
	c := w.podsets[0].contract
	tw := *e
	tw.WorkloadID = fmt.Sprintf("%s-trial-%d", e.WorkloadID, w.trial)
	tw.WorkloadType, tw.Gang, tw.DurationSec, tw.Tags = trace.SingleGPUTraining, false, c.DurationSec, nil
	tw.Pods = []trace.PodGroup{{Role: trace.RoleMain, Replicas: 1, Requests: group.Requests}}
	var job *trace.Job
	for _, j := range ejobs {
		if j.PodRole == trace.RoleTrial {
			jc := *j
			jc.JobID, jc.WorkloadID, jc.WorkloadType, jc.PodRole, jc.Gang = tw.WorkloadID+"-main-01", tw.WorkloadID, tw.WorkloadType, trace.RoleMain, false
			job = &jc
			break
		}
	}
	return &tw, job, nil
}
