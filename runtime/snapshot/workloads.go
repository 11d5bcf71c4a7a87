package snapshot

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kueuelab/kueuelab/model/importer"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/history"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// liveItems are the Workloads a forecast starts from: not finished, active, on a LocalQueue of a
// team. The others are counted in warnings.
func (b *builder) liveItems() []*kueuewl.Summary {
	var live []*kueuewl.Summary
	inactive, noQueue, offClock := 0, map[string]int{}, 0
	for i := range b.items {
		it := &b.items[i]
		switch {
		case it.Finished != nil:
			continue
		case it.Inactive:
			inactive++
			continue
		case !b.onClock(it.CreatedAt):
			offClock++
			continue
		}
		if _, ok := b.teamOf[it.Namespace+"/"+it.Queue]; !ok {
			noQueue[it.Namespace+"/"+it.Queue]++
			continue
		}
		live = append(live, it)
	}
	if inactive > 0 {
		b.snap.warn("Workloads: %d deactivated (spec.active false) left out: Kueue neither queues nor admits them", inactive)
	}
	if offClock > 0 {
		b.snap.warn("Workloads: %d live ones created outside the published replay's clock (before its start or after where it stopped: another run's) left out", offClock)
	}
	for _, q := range sortedKeys(noQueue) {
		b.snap.warn("Workloads: %d on LocalQueue %s, which the spec has not, left out", noQueue[q], q)
	}
	// One order for the state and the trace: creation, then namespace and name.
	slices.SortStableFunc(live, func(a, c *kueuewl.Summary) int {
		if d := a.CreatedAt.Compare(c.CreatedAt); d != 0 {
			return d
		}
		if a.Namespace != c.Namespace {
			if a.Namespace < c.Namespace {
				return -1
			}
			return 1
		}
		if a.Name < c.Name {
			return -1
		}
		if a.Name > c.Name {
			return 1
		}
		return 0
	})
	return live
}

// historyTeam is the team of a finished Workload ("" when the spec has not its LocalQueue) and
// whether the history keeps it: of a team, on the snapshot's clock.
func (b *builder) historyTeam(it *kueuewl.Summary) (string, bool) {
	team := b.teamOf[it.Namespace+"/"+it.Queue]
	return team, team != "" && b.onClock(it.CreatedAt) && b.onClock(*it.Finished)
}

// millis rounds seconds to the millisecond, as the state keeps its times.
func millis(x float64) float64 { return math.Round(x*1000) / 1000 }

// onClock says whether t can be a time of the replay whose trace clock the cluster publishes:
// between its start and where it stands. Every time is, when the cluster publishes none.
func (b *builder) onClock(t time.Time) bool {
	p := b.clock
	if p == nil {
		return true
	}
	x := p.Trace(t)
	// Conditions have one-second resolution.
	return x >= -1 && x <= p.Position.At(b.now)+1
}

// clockFor returns the function that puts a time on the snapshot's clock and the snapshot's now
// on it. A replay's published trace clock is the clock when there is one (Kueue wrote its times
// on it); otherwise seconds since the oldest Workload's creation, live or finished (a trace's
// submit times are never negative, and the history is on the same clock).
func (b *builder) clockFor(live []*kueuewl.Summary) (at func(time.Time) float64, now float64) {
	if p := b.clock; p != nil {
		now = p.Position.At(b.now)
		b.snap.Clock = fmt.Sprintf("trace seconds of the replay that published ConfigMap %s/%s; Kueue's times less its epoch %s",
			"kube-system", "kueuelab-clock", p.Epoch.UTC().Format(time.RFC3339))
		if !p.Running {
			b.snap.warn("ConfigMap/kube-system/kueuelab-clock: the replay that published it has ended (trace %.3f s): times are read on its clock, now is where it stopped", p.Position.Now)
		}
		return p.Trace, now
	}
	origin := b.now
	for _, it := range live {
		if it.CreatedAt.Before(origin) {
			origin = it.CreatedAt
		}
	}
	for _, it := range b.items {
		if it.Finished != nil && it.Created.Before(origin) {
			origin = it.Created
		}
	}
	b.snap.Clock = "seconds since the oldest Workload's creation, " + origin.UTC().Format(time.RFC3339Nano)
	b.origin = origin.UTC().Format(time.RFC3339Nano)
	return func(t time.Time) float64 { return t.Sub(origin).Seconds() }, b.now.Sub(origin).Seconds()
}

// workloads builds the live trace, the state and the history.
func (b *builder) workloads(live []*kueuewl.Summary) error {
	at, now := b.clockFor(live)
	created := make([]float64, len(live))
	for i, it := range live {
		created[i] = millis(at(it.CreatedAt))
		now = math.Max(now, created[i])
	}
	now = millis(now)
	items := make([]kueuewl.Summary, len(live))
	index := map[*kueuewl.Summary]int{}
	for i, it := range live {
		items[i] = *it
		// The live workload's namespace is its team's (a second LocalQueue of a namespace is a team
		// of its own).
		items[i].Namespace = b.teamOf[it.Namespace+"/"+it.Queue]
		index[&items[i]] = i
	}
	// history.Live keeps the submit offsets on the state's clock.
	res, ids, err := history.Live(items, history.LiveOptions{
		Submit: func(s *kueuewl.Summary) float64 { return created[index[s]] },
		Duration: func(s *kueuewl.Summary) float64 {
			if d, ok := history.DurationOf(s); ok {
				return d
			}
			return PlaceholderDurationSec
		},
		Intent: func(s *kueuewl.Summary) string { return b.intentOf[priority(s)] },
	})
	if err != nil {
		return fmt.Errorf("snapshot: live workloads: %w", err)
	}
	st := &state.State{Metadata: state.Metadata{Name: b.opts.Name}, Source: b.opts.Source, KueueVersion: b.opts.KueueVersion,
		NowSec: now, ClockOrigin: b.origin, Trace: state.TraceFile, Arrivals: state.ArrivalsNone, Cluster: state.ClusterFile}
	overdue, unknown := 0, 0
	for i, it := range live {
		w := state.Workload{ID: ids[i], Phase: state.Pending, CreatedSec: created[i], MaxExecutionSec: it.MaxExecSec}
		dur, known := history.DurationOf(it)
		if a := it.Admission; a != nil && it.Admitted != nil {
			w.Phase = state.Admitted
			// Conditions are kept to the second, the precise creation to the nanosecond.
			adm := math.Min(now, math.Max(created[i], millis(at(*it.Admitted))))
			w.AdmittedSec = &adm
			w.Admission = b.admission(a)
			if known {
				if left := millis(dur - (now - adm)); left > 0 {
					w.RemainingSec = &left
				} else {
					overdue++
				}
			}
		} else {
			if it.QueuedAt != nil {
				q := math.Min(now, math.Max(created[i], millis(at(*it.QueuedAt))))
				w.QueuedSec = &q
			}
			if known {
				d := millis(dur)
				w.RemainingSec = &d
			}
		}
		if !known {
			unknown++
		}
		st.Workloads = append(st.Workloads, w)
	}
	if unknown > 0 {
		b.snap.warn("Workloads: %d of %d live workloads carry no %s: their trace duration is a placeholder (%d s) and their state no remainingSec, which a forecast draws",
			unknown, len(live), contract.DurationSec, PlaceholderDurationSec)
	}
	if overdue > 0 {
		b.snap.warn("Workloads: %d admitted workloads have run longer than their %s: no remainingSec, which a forecast draws", overdue, contract.DurationSec)
	}
	b.snap.State, b.snap.Live = st, res
	if err := b.history(at); err != nil {
		return err
	}
	if _, err := state.Parse("state.yaml (snapshot)", mustMarshal(st)); err != nil {
		return fmt.Errorf("snapshot: the state read from the cluster does not load (a kueuelab bug):\n%w", err)
	}
	return nil
}

func mustMarshal(s *state.State) []byte {
	b, err := state.Marshal(s)
	if err != nil {
		return nil
	}
	return b
}

// admission is a Workload's admission with the spec's flavor names (resources the spec does not
// have are left out).
func (b *builder) admission(a *kueuewl.Admission) *state.Admission {
	out := &state.Admission{ClusterQueue: a.ClusterQueue}
	for _, ps := range a.PodSets {
		fl := map[string]string{}
		for r, f := range ps.Flavors {
			if name, ok := b.flavorOf[f]; ok && slices.Contains(kueuewl.SpecResources, r) {
				fl[r] = name
			}
		}
		out.PodSets = append(out.PodSets, state.PodSetFlav{Name: ps.Name, Count: ps.Count, Flavors: fl})
	}
	return out
}

// history is the finished Workloads, exactly as `trace import --from-cluster` reads them.
func (b *builder) history(at func(time.Time) float64) error {
	var finished []kueuewl.Summary
	var first time.Time
	gone, offClock := 0, 0
	for _, it := range b.items {
		if it.Finished == nil {
			continue
		}
		// As a live one: its team's name as the namespace (a second LocalQueue of a namespace is a
		// team of its own), so that a forecast counts its arrivals for its queue.
		team, ok := b.historyTeam(&it)
		switch {
		case team == "":
			gone++
			continue
		case !ok:
			offClock++
			continue
		}
		it.Namespace = team
		finished = append(finished, it)
		if first.IsZero() || it.Created.Before(first) {
			first = it.Created
		}
	}
	if gone > 0 {
		b.snap.warn("history: %d finished Workloads of LocalQueues the spec does not have are left out", gone)
	}
	if offClock > 0 {
		b.snap.warn("history: %d finished Workloads outside the published replay's clock (another run's) left out", offClock)
	}
	if len(finished) == 0 {
		return nil
	}
	res, err := history.Build(finished, history.Options{})
	if err != nil {
		return fmt.Errorf("snapshot: history: %w", err)
	}
	if len(res.Workloads) == 0 {
		return nil
	}
	// The spec's classes are the cluster's priorities (priorities): each finished workload takes
	// its value's, as a live one does, rather than a guess from its class's name.
	intent := map[string]string{}
	for i := range finished {
		if in, ok := b.intentFor(priority(&finished[i])); ok {
			intent[history.WorkloadID(&finished[i])] = in
		}
	}
	for _, w := range res.Workloads {
		if in, ok := intent[w.WorkloadID]; ok {
			w.IntentClass = in
			for _, j := range res.Jobs[w.WorkloadID] {
				j.IntentClass = in
			}
		}
	}
	// history.Build counts from the first finished workload's creation: put the history on the
	// state's clock, where the live workloads are.
	shift := millis(at(first))
	for _, w := range res.Workloads {
		w.SubmitTimeOffsetSec += shift
	}
	for _, js := range res.Jobs {
		for _, j := range js {
			j.SubmitTimeOffsetSec += shift
		}
	}
	b.snap.History = res
	b.snap.State.History = state.HistoryFile
	b.snap.State.Finished = b.past(finished, res, at)
	return nil
}

// past is the finished workloads' record for backtests: per history workload, when its Workload
// was created, admitted and finished, on the state's clock, with Kueue's admission. An
// experiment's trials, several Workloads under one id, span the first creation to the last finish
// and have no one admission.
func (b *builder) past(finished []kueuewl.Summary, res *importer.Result, at func(time.Time) float64) []state.Past {
	ms := func(t time.Time) float64 { return millis(at(t)) }
	kept := map[string]bool{}
	for _, w := range res.Workloads {
		kept[w.WorkloadID] = true
	}
	live := b.snap.State.Index()
	byID := map[string][]*kueuewl.Summary{}
	var order []string
	shared := 0
	for i := range finished {
		it := &finished[i]
		id := history.WorkloadID(it)
		if !kept[id] {
			continue
		}
		if live[id] != nil {
			// An experiment with a trial finished and one live: the live trial is the workload.
			shared++
			continue
		}
		if byID[id] == nil {
			order = append(order, id)
		}
		byID[id] = append(byID[id], it)
	}
	var out []state.Past
	badRequeue, later, replayRequeue := 0, 0, 0
	now := b.snap.State.NowSec
	for _, id := range order {
		its := byID[id]
		p := state.Past{ID: id, CreatedSec: math.Inf(1)}
		for _, it := range its {
			p.CreatedSec = math.Min(p.CreatedSec, ms(it.CreatedAt))
			p.FinishedSec = math.Max(p.FinishedSec, ms(*it.Finished))
			if it.Admitted != nil && (p.AdmittedSec == nil || ms(*it.Admitted) < *p.AdmittedSec) {
				a := ms(*it.Admitted)
				p.AdmittedSec = &a
			}
			p.Evictions += it.Evictions
			if it.Requeued != nil && (p.RequeuedSec == nil || ms(*it.Requeued) > *p.RequeuedSec) {
				r := ms(*it.Requeued)
				p.RequeuedSec = &r
			}
		}
		// Conditions are kept to the second, the precise creation to the nanosecond.
		if a := p.AdmittedSec; a != nil {
			*a = math.Max(*a, p.CreatedSec)
		}
		p.FinishedSec = math.Max(p.FinishedSec, *cmp.Or(p.AdmittedSec, &p.CreatedSec))
		// Kueue writes the Requeued condition at the wall time, not on its clock (it leaves the
		// time to SetStatusCondition): on a replay's clock it says nothing. Elsewhere a requeue
		// outside the workload's life (conditions have one-second resolution) is not Kueue's.
		if b.clock != nil && p.RequeuedSec != nil {
			p.RequeuedSec = nil
			replayRequeue++
		}
		if r := p.RequeuedSec; r != nil {
			end := *cmp.Or(p.AdmittedSec, &p.FinishedSec)
			if *r < p.CreatedSec-1 || *r > end+1 {
				p.RequeuedSec = nil
				badRequeue++
			} else {
				*r = math.Min(math.Max(*r, p.CreatedSec), end)
			}
		}
		if len(its) == 1 {
			if a := its[0].Admission; a != nil && p.AdmittedSec != nil {
				p.Admission = b.admission(a)
			}
			if d, ok := history.DurationOf(its[0]); ok {
				p.DurationSec = &d
			}
		}
		if p.FinishedSec > now {
			// Kueue wrote its times on another clock than the snapshot's: a replay before the
			// one whose trace clock the cluster publishes.
			later++
			continue
		}
		out = append(out, p)
	}
	if shared > 0 {
		b.snap.warn("history: %d finished Workloads share their workload id with a live one (an experiment's trials): left out of the finished records a backtest reads", shared)
	}
	if later > 0 {
		b.snap.warn("history: %d finished workloads end after the snapshot's instant (times of another replay's clock): left out of the finished records a backtest reads", later)
	}
	if replayRequeue > 0 {
		b.snap.warn("history: %d evicted workloads' Requeued condition is at the wall time (Kueue does not write it on a replay's clock): when they last waited is not known, a backtest leaves them unscored", replayRequeue)
	}
	if badRequeue > 0 {
		b.snap.warn("history: %d evicted workloads' Requeued condition is outside their life (not on Kueue's clock): when they last waited is not known, a backtest leaves them unscored", badRequeue)
	}
	return out
}

// intentFor is the spec's class of a priority value: its own, else the class of the nearest value
// the spec keeps (false when it keeps none).
func (b *builder) intentFor(v int32) (string, bool) {
	if in, ok := b.intentOf[v]; ok {
		return in, true
	}
	best, found := int64(0), false
	var in string
	for kv, ki := range b.intentOf {
		d := int64(kv) - int64(v)
		if d < 0 {
			d = -d
		}
		if !found || d < best || (d == best && ki < in) {
			best, in, found = d, ki, true
		}
	}
	return in, found
}
