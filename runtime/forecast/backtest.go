package forecast

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kueuelab/kueuelab/internal/atomicfile"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

// Backtest is a snapshot's past rebuilt as the state at an earlier instant, with what happened
// after it: the check of a forecast a user can run on a cluster's own history.
type Backtest struct {
	// AtSec is the instant the state was rebuilt at and NowSec the snapshot's, on its clock.
	AtSec  float64 `json:"atSec"`
	NowSec float64 `json:"nowSec"`
	// Pending and Admitted count the workloads pending and admitted at AtSec, History those
	// finished by then, Later those created after it (the recorded arrivals).
	Pending  int `json:"pending"`
	Admitted int `json:"admitted"`
	History  int `json:"history"`
	Later    int `json:"later"`
	// Unplaced counts the workloads running at AtSec without one admission to restore (an
	// experiment's trials): left out, their quota free.
	Unplaced int `json:"unplaced,omitempty"`
	// Unscored are the pending workloads whose admission after AtSec the history does not tell:
	// evicted at some time (only the last admission is kept), or gone without one (deleted).
	Unscored []string `json:"unscored,omitempty"`
	// Truth is each scored pending workload's time to admission after AtSec; absent: not
	// admitted by NowSec.
	Truth map[string]float64 `json:"-"`
}

// BacktestOptions say how the past is rebuilt.
type BacktestOptions struct {
	// Oracle gives every finished workload alive at the instant the work it actually had left
	// (its run in the history), as a replay's own state knows it, and the forecast the recorded
	// arrivals: what is left to it is Kueue's decisions. Workloads still live at the snapshot keep
	// what the snapshot knows of them. Otherwise a workload's work is known only where its job
	// declared it (kueuelab.io/duration-sec), as a snapshot taken at the instant would have had it.
	Oracle bool
}

// ArrivalsNote is what a backtest says of its arrivals when they are not what a forecast at its
// instant could know: the recorded ones without the oracle ("" otherwise).
func ArrivalsNote(arrivals string, oracle bool) string {
	if arrivals != state.ArrivalsRecorded || oracle {
		return ""
	}
	return "backtest: --arrivals recorded replays the workloads created after the instant, which a forecast then could not know " +
		"(an oracle for the arrivals alone); --arrivals history fits them from what came before it"
}

// ParseAt reads a backtest's instant: an RFC 3339 time (a snapshot with a clock origin), a
// duration before the snapshot's instant ("-6h"), or seconds or a duration on the snapshot's
// clock ("7200", "2h").
func ParseAt(s string, st *state.State) (float64, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if st.ClockOrigin == "" {
			return 0, fmt.Errorf("--at %s: the state's clock is a replay's trace time, which has no wall time: give seconds or a duration", s)
		}
		origin, err := time.Parse(time.RFC3339Nano, st.ClockOrigin)
		if err != nil {
			return 0, fmt.Errorf("state clockOrigin: %w", err)
		}
		return t.Sub(origin).Seconds(), nil
	}
	if rest, ago := strings.CutPrefix(s, "-"); ago {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("--at %s: want an RFC 3339 time, a duration before the snapshot (-6h) or a time on its clock (7200, 2h)", s)
		}
		return st.NowSec - d.Seconds(), nil
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		return x, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--at %s: want an RFC 3339 time, a duration before the snapshot (-6h) or a time on its clock (7200, 2h)", s)
	}
	return d.Seconds(), nil
}

// RebuildAt writes into dst the state at atSec of the snapshot directory src: the workloads
// pending and admitted then, as Kueue held them (from the live workloads and the history's
// finished records), the workloads finished by then as its history, and those created after it
// as recorded arrivals. It returns what happened after atSec, to score a forecast from dst.
func RebuildAt(ctx context.Context, src string, atSec float64, dst string, o BacktestOptions) (*Backtest, error) {
	st, err := state.Load(filepath.Join(src, state.StateFile))
	if err != nil {
		return nil, err
	}
	if len(st.Finished) == 0 {
		return nil, fmt.Errorf("backtest: %s has no finished workloads' records (state finished:): no history to rebuild the past from (or a snapshot taken by an older kueuelab)", src)
	}
	if !(atSec < st.NowSec) || math.IsInf(atSec, 0) {
		return nil, fmt.Errorf("backtest: instant %g s: want a time before the snapshot's, %g s on its clock", atSec, st.NowSec)
	}
	live, err := trace.LoadWorkloads(ctx, filepath.Join(src, st.Trace), trace.Options{})
	if err != nil {
		return nil, fmt.Errorf("backtest: %w", err)
	}
	hist, err := trace.LoadWorkloads(ctx, filepath.Join(src, st.History), trace.Options{})
	if err != nil {
		return nil, fmt.Errorf("backtest: %w", err)
	}
	if first := min(minCreated(st), st.NowSec); atSec < first {
		return nil, fmt.Errorf("backtest: instant %g s is before the first workload the snapshot knows (%g s)", atSec, first)
	}
	b := &backtest{bt: &Backtest{AtSec: atSec, NowSec: st.NowSec, Truth: map[string]float64{}}, at: atSec, oracle: o.Oracle,
		jobs: map[string][]*trace.Job{}, out: &trace.Trace{}, hist: &trace.Trace{}}
	b.st = &state.State{APIVersion: state.APIVersion, Kind: state.Kind, Metadata: state.Metadata{Name: fmt.Sprintf("%s-backtest-at-%g", st.Metadata.Name, atSec)},
		Source:       fmt.Sprintf("backtest at %g s of %s", atSec, cmp.Or(st.Source, src)),
		KueueVersion: st.KueueVersion, NowSec: atSec, ClockOrigin: st.ClockOrigin, Trace: state.TraceFile, Cluster: state.ClusterFile,
		Arrivals: state.ArrivalsRecorded, KueueConfig: st.KueueConfig}
	histByID, liveByID := hist.ByID(), live.ByID()
	for i := range st.Finished {
		p := &st.Finished[i]
		w := histByID[p.ID]
		if w == nil {
			return nil, fmt.Errorf("backtest: finished workload %s of %s is not in its history %s", p.ID, src, st.History)
		}
		b.past(p, w, hist.Jobs[p.ID])
	}
	for i := range st.Workloads {
		lw := &st.Workloads[i]
		w := liveByID[lw.ID]
		if w == nil {
			return nil, fmt.Errorf("backtest: workload %s of %s is not in its trace %s", lw.ID, src, st.Trace)
		}
		b.live(lw, st.NowSec, w, live.Jobs[lw.ID])
	}
	if b.bt.Pending == 0 {
		return nil, fmt.Errorf("backtest: no workload was pending at %g s", atSec)
	}
	if err := b.write(src, dst, st); err != nil {
		return nil, err
	}
	return b.bt, nil
}

func minCreated(st *state.State) float64 {
	m := math.Inf(1)
	for _, w := range st.Workloads {
		m = math.Min(m, w.CreatedSec)
	}
	for _, p := range st.Finished {
		m = math.Min(m, p.CreatedSec)
	}
	return m
}

type backtest struct {
	bt     *Backtest
	st     *state.State
	at     float64
	oracle bool
	// out is the trace of the workloads alive at the instant and after it, hist the history's.
	out, hist *trace.Trace
	jobs      map[string][]*trace.Job
}

// shape adds a workload's shape to tr, submitted at created, its duration dur (0: as it is).
func (b *backtest) shape(tr *trace.Trace, w *trace.Workload, jobs []*trace.Job, created, dur float64) {
	c := *w
	if dur > 0 && dur != w.DurationSec {
		nw, nj := trace.WithDuration(&c, jobs, dur)
		c, jobs = *nw, nj
	}
	c.SubmitTimeOffsetSec = created
	var js []*trace.Job
	for _, j := range jobs {
		cj := *j
		cj.SubmitTimeOffsetSec = created
		js = append(js, &cj)
	}
	tr.Workloads = append(tr.Workloads, &c)
	b.jobs[c.WorkloadID] = js
}

// placeholder is the trace duration of a workload alive at the instant: what a snapshot then
// would have written (its declared duration, else snapshot's placeholder), or with Oracle its run.
func (b *backtest) placeholder(declared *float64, run float64) float64 {
	switch {
	case b.oracle:
		return run
	case declared != nil:
		return *declared
	}
	return snapshot.PlaceholderDurationSec
}

// past places a finished workload: history, admitted or pending at the instant, or later.
func (b *backtest) past(p *state.Past, w *trace.Workload, jobs []*trace.Job) {
	switch {
	case p.CreatedSec > b.at:
		b.bt.Later++
		b.shape(b.out, w, jobs, p.CreatedSec, 0)
		return
	case p.FinishedSec <= b.at:
		b.bt.History++
		b.shape(b.hist, w, jobs, p.CreatedSec, 0)
		return
	}
	run := w.DurationSec
	if p.AdmittedSec != nil && *p.AdmittedSec <= b.at {
		if p.Admission == nil {
			b.bt.Unplaced++
			return
		}
		b.bt.Admitted++
		adm := *p.AdmittedSec
		sw := state.Workload{ID: p.ID, Phase: state.Admitted, CreatedSec: p.CreatedSec, AdmittedSec: &adm, Admission: p.Admission}
		switch {
		case b.oracle:
			left := p.FinishedSec - b.at
			sw.RemainingSec = positive(left)
		case p.DurationSec != nil:
			// Run past what it declared: a snapshot then would have known nothing (drawn).
			sw.RemainingSec = left(*p.DurationSec - (b.at - adm))
		}
		b.st.Workloads = append(b.st.Workloads, sw)
		b.shape(b.out, w, jobs, p.CreatedSec, b.placeholder(p.DurationSec, run))
		return
	}
	b.bt.Pending++
	sw := state.Workload{ID: p.ID, Phase: state.Pending, CreatedSec: p.CreatedSec}
	// Requeued by the instant and admitted after it: it waited then, since its last eviction,
	// which Kueue orders it by (the requeue time stands in for the eviction's).
	requeued := p.RequeuedSec != nil && *p.RequeuedSec <= b.at
	if requeued {
		sw.QueuedSec = p.RequeuedSec
	}
	switch {
	case b.oracle:
		sw.RemainingSec = positive(run)
	case p.DurationSec != nil:
		sw.RemainingSec = positive(*p.DurationSec)
	}
	b.st.Workloads = append(b.st.Workloads, sw)
	b.shape(b.out, w, jobs, p.CreatedSec, b.placeholder(p.DurationSec, run))
	switch {
	case p.AdmittedSec == nil || (p.Evictions > 0 && !requeued):
		b.bt.Unscored = append(b.bt.Unscored, p.ID)
	default:
		b.bt.Truth[p.ID] = *p.AdmittedSec - b.at
	}
}

// live places a workload alive at the snapshot: admitted or pending at the instant, or later.
func (b *backtest) live(lw *state.Workload, now float64, w *trace.Workload, jobs []*trace.Job) {
	if lw.CreatedSec > b.at {
		b.bt.Later++
		b.shape(b.out, w, jobs, lw.CreatedSec, 0)
		return
	}
	// The work it was known to have in all: its work left now plus what it has run since its
	// admission (none while pending).
	var declared *float64
	if r := lw.RemainingSec; r != nil {
		d := *r
		if lw.Phase == state.Admitted {
			d += now - *lw.AdmittedSec
		}
		declared = &d
	}
	var conds []state.Condition
	evictedSince := false
	for _, c := range lw.Conditions {
		if c.SinceSec <= b.at {
			conds = append(conds, c)
		} else if c.Type == "Evicted" || c.Type == "Preempted" {
			evictedSince = true
		}
	}
	if lw.Phase == state.Admitted && *lw.AdmittedSec <= b.at {
		b.bt.Admitted++
		sw := state.Workload{ID: lw.ID, Phase: state.Admitted, CreatedSec: lw.CreatedSec, AdmittedSec: lw.AdmittedSec,
			Admission: lw.Admission, MaxExecutionSec: lw.MaxExecutionSec, Conditions: conds}
		if declared != nil {
			sw.RemainingSec = left(*declared - (b.at - *lw.AdmittedSec))
		}
		b.st.Workloads = append(b.st.Workloads, sw)
		b.shape(b.out, w, jobs, lw.CreatedSec, 0)
		return
	}
	b.bt.Pending++
	sw := state.Workload{ID: lw.ID, Phase: state.Pending, CreatedSec: lw.CreatedSec, RemainingSec: declared, Conditions: conds}
	if q := lw.QueuedSec; q != nil && *q <= b.at {
		sw.QueuedSec, sw.RequeueState = q, lw.RequeueState
	} else if q != nil {
		evictedSince = true
	}
	if lw.Phase == state.Pending {
		// Its grant is counted from its next admission, which is the same then as now.
		sw.MaxExecutionSec = lw.MaxExecutionSec
	}
	b.st.Workloads = append(b.st.Workloads, sw)
	b.shape(b.out, w, jobs, lw.CreatedSec, 0)
	switch {
	case evictedSince:
		// It held quota at some time after the instant before its current phase: whether it
		// was pending at the instant is not known.
		b.bt.Unscored = append(b.bt.Unscored, lw.ID)
	case lw.Phase == state.Admitted:
		b.bt.Truth[lw.ID] = *lw.AdmittedSec - b.at
	}
}

// left is work left x, nil when none is (a workload past its declared duration).
func left(x float64) *float64 {
	if !(x > 0) {
		return nil
	}
	return positive(x)
}

func positive(x float64) *float64 {
	if !(x > 0) {
		x = 1e-3
	}
	x = math.Round(x*1000) / 1000
	return &x
}

// write writes the rebuilt state, its traces and the snapshot's cluster spec and Kueue
// configuration into dst.
func (b *backtest) write(src, dst string, st *state.State) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	copies := []struct{ from, to string }{{st.Cluster, state.ClusterFile}}
	if st.KueueConfig != "" {
		copies = append(copies, struct{ from, to string }{st.KueueConfig, st.KueueConfig})
	}
	for _, c := range copies {
		data, err := os.ReadFile(filepath.Join(src, c.from))
		if err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
		if err := atomicfile.Write(filepath.Join(dst, c.to), data); err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
	}
	trace.SortWorkloads(b.out.Workloads)
	if err := trace.WriteFile(filepath.Join(dst, state.TraceFile), b.out.Workloads, b.jobs); err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	if len(b.hist.Workloads) > 0 {
		trace.SortWorkloads(b.hist.Workloads)
		b.st.History = state.HistoryFile
		if err := trace.WriteFile(filepath.Join(dst, state.HistoryFile), b.hist.Workloads, b.jobs); err != nil {
			return fmt.Errorf("backtest: %w", err)
		}
	}
	slices.SortStableFunc(b.st.Workloads, func(x, y state.Workload) int {
		return cmp.Or(cmp.Compare(x.CreatedSec, y.CreatedSec), strings.Compare(x.ID, y.ID))
	})
	data, err := state.Marshal(b.st)
	if err != nil {
		return err
	}
	if _, err := state.Parse("backtest state", data); err != nil {
		return fmt.Errorf("backtest: the rebuilt state does not load (a kueuelab bug):\n%w", err)
	}
	if err := atomicfile.Write(filepath.Join(dst, state.StateFile), data); err != nil {
		return fmt.Errorf("backtest: %w", err)
	}
	return nil
}
