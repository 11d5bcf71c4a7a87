package forecast

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

// pastState is a snapshot at 2,000 s of small's queue, written by hand: two 8-GPU holders ran
// from 50 s to 1,000 s (h1 declared 900 s, and ran 950), p waited from 100 s for them and ran to 1,500 s, e
// was evicted, requeued at 700 s and last admitted at 1,600 s, r was evicted twice, requeued at
// 400 s and admitted at 1,300 s, gone was deleted at 600 s without an admission, old ran before
// them all, late came at 1,200 s, and live, created at 1,800 s, still waits.
const pastState = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterState
nowSec: 2000
clockOrigin: "2026-12-07T00:00:00Z"
trace: workloads.jsonl
cluster: cluster.yaml
history: history.jsonl
arrivals: none
workloads:
- {id: live, phase: Pending, createdSec: 1800}
finished:
- {id: old, createdSec: 0, admittedSec: 0, finishedSec: 40, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
- {id: h1, createdSec: 10, admittedSec: 50, finishedSec: 1000, durationSec: 900, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
- {id: h2, createdSec: 10, admittedSec: 50, finishedSec: 1000, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
- {id: p, createdSec: 100, admittedSec: 1000, finishedSec: 1500, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
- {id: e, createdSec: 200, admittedSec: 1600, finishedSec: 1700, evictions: 1, requeuedSec: 700, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
- {id: r, createdSec: 250, admittedSec: 1300, finishedSec: 1400, evictions: 2, requeuedSec: 400, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
- {id: gone, createdSec: 300, finishedSec: 600}
- {id: late, createdSec: 1200, admittedSec: 1200, finishedSec: 1300, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
`

func writePast(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gpu := func(id string, at, d float64, gpus int) string {
		return handWorkload(id, "single_gpu_training", at, d, 1, gpus)
	}
	files := map[string]string{
		state.StateFile:   pastState,
		state.ClusterFile: small,
		state.TraceFile:   gpu("live", 1800, snapshot.PlaceholderDurationSec, 8),
		state.HistoryFile: strings.Join([]string{gpu("old", 0, 40, 8), gpu("h1", 10, 950, 8), gpu("h2", 10, 950, 8), gpu("p", 100, 500, 8),
			gpu("e", 200, 100, 4), gpu("r", 250, 100, 8), gpu("gone", 300, 300, 2), gpu("late", 1200, 100, 4)}, "\n") + "\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestRebuildAt: the state at 500 s, derived by hand from pastState.
func TestRebuildAt(t *testing.T) {
	src := writePast(t)
	for _, tc := range []struct {
		name   string
		oracle bool
		// remaining: the work left each workload alive at 500 s has in the rebuilt state (-1: none,
		// drawn); dur: its trace duration.
		remaining, dur map[string]float64
	}{
		{"as a snapshot then", false, map[string]float64{"h1": 450, "h2": -1, "p": -1, "e": -1, "r": -1, "gone": -1},
			map[string]float64{"h1": 900, "h2": 3600, "p": 3600, "e": 3600, "r": 3600, "gone": 3600, "late": 100, "live": 3600}},
		{"oracle", true, map[string]float64{"h1": 500, "h2": 500, "p": 500, "e": 100, "r": 100, "gone": 300},
			map[string]float64{"h1": 950, "h2": 950, "p": 500, "e": 100, "r": 100, "gone": 300, "late": 100, "live": 3600}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := t.TempDir()
			bt, err := RebuildAt(context.Background(), src, 500, dst, BacktestOptions{Oracle: tc.oracle})
			if err != nil {
				t.Fatal(err)
			}
			want := &Backtest{AtSec: 500, NowSec: 2000, Pending: 4, Admitted: 2, History: 1, Later: 2, Unscored: []string{"e", "gone"},
				Truth: map[string]float64{"p": 500, "r": 800}}
			if d := cmp.Diff(want, bt); d != "" {
				t.Errorf("backtest (-want +got):\n%s", d)
			}
			st, err := state.Load(filepath.Join(dst, state.StateFile))
			if err != nil {
				t.Fatal(err)
			}
			if st.NowSec != 500 || st.Arrivals != state.ArrivalsRecorded || st.History != state.HistoryFile || st.ClockOrigin != "2026-12-07T00:00:00Z" {
				t.Errorf("state: now %g, arrivals %s, history %q, origin %q", st.NowSec, st.Arrivals, st.History, st.ClockOrigin)
			}
			var ids []string
			for _, w := range st.Workloads {
				ids = append(ids, w.ID)
				want := map[string]state.Phase{"h1": state.Admitted, "h2": state.Admitted}[w.ID]
				if want == "" {
					want = state.Pending
				}
				if w.Phase != want {
					t.Errorf("%s: %s, want %s", w.ID, w.Phase, want)
				}
				got := -1.0
				if w.RemainingSec != nil {
					got = *w.RemainingSec
				}
				if got != tc.remaining[w.ID] {
					t.Errorf("%s: remaining %g, want %g", w.ID, got, tc.remaining[w.ID])
				}
				if q := w.QueuedSec; (w.ID == "r") != (q != nil) || (q != nil && *q != 400) {
					t.Errorf("%s: queued at %v, want r only, at its requeue, 400 s", w.ID, q)
				}
			}
			if !slices.Equal(ids, []string{"h1", "h2", "p", "e", "r", "gone"}) {
				t.Errorf("state workloads %v, want h1 h2 p e r gone", ids)
			}
			tr, err := trace.LoadWorkloads(context.Background(), filepath.Join(dst, state.TraceFile), trace.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tr.Workloads {
				if w.DurationSec != tc.dur[w.WorkloadID] {
					t.Errorf("trace %s: duration %g, want %g", w.WorkloadID, w.DurationSec, tc.dur[w.WorkloadID])
				}
			}
			if len(tr.Workloads) != 8 {
				t.Errorf("trace has %d workloads, want the 6 alive at 500 s and the 2 after", len(tr.Workloads))
			}
		})
	}
}

// TestBacktestOracleScores: from the state at 500 s with every run known, the sim admits p when
// the holders finish, at 1,000 s as the history says, and r, queued behind e and gone, when they
// have finished, at 1,300 s: each some seconds late, as Kueue retries a workload it found
// inadmissible on its 1 s requeue batch (r's wait starts a second late with p's). e and gone are
// not scored. Without the oracle h1's declared work is known and the rest drawn from old's history.
func TestBacktestOracleScores(t *testing.T) {
	src := writePast(t)
	for _, oracle := range []bool{true, false} {
		dst := t.TempDir()
		bt, err := RebuildAt(context.Background(), src, 500, dst, BacktestOptions{Oracle: oracle})
		if err != nil {
			t.Fatal(err)
		}
		arrivals := state.ArrivalsRecorded
		if !oracle {
			arrivals = state.ArrivalsNone
		}
		rep, err := Run(context.Background(), Options{Dir: dst, Repeats: 2, Seed: 1, HorizonSec: bt.NowSec - bt.AtSec, Arrivals: arrivals})
		if err != nil {
			t.Fatal(err)
		}
		s := ScoreBacktest(rep, bt)
		if s.Workloads != 2 || s.Unscored != 2 {
			t.Errorf("oracle %v: score %+v, want 2 workloads, 2 unscored", oracle, s)
		}
		known, drawn := 1, 5
		if oracle {
			known, drawn = 6, 0
			if s.Within60 != 2 || s.MedianAbsErrSec < 1 || s.MedianAbsErrSec > 3 {
				t.Errorf("oracle: score %+v: want p and r within 60 s, 1-3 s late", s)
			}
		}
		if rep.Known != known || rep.Drawn != drawn || rep.History != 1 {
			t.Errorf("oracle %v: %d known, %d drawn from %d finished, want %d, %d from 1", oracle, rep.Known, rep.Drawn, rep.History, known, drawn)
		}
	}
}

// pastLive is a snapshot at 2,000 s whose past is in its live workloads: la admitted at 400 s
// with 100 s left now (1,700 s of work in all), lp admitted at 1,900 s with 50 s left, lq evicted
// at 800 s and waiting again, lw waiting since 460 s.
const pastLive = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterState
nowSec: 2000
trace: workloads.jsonl
cluster: cluster.yaml
history: history.jsonl
arrivals: none
workloads:
- id: la
  phase: Admitted
  createdSec: 300
  admittedSec: 400
  remainingSec: 100
  admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}
  conditions: [{type: PodsReady, status: "True", reason: Started, sinceSec: 450}]
- id: lp
  phase: Admitted
  createdSec: 400
  admittedSec: 1900
  remainingSec: 50
  admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}
- id: lq
  phase: Pending
  createdSec: 450
  queuedSec: 800
  conditions: [{type: Evicted, status: "True", reason: Preempted, sinceSec: 800}]
- {id: lw, phase: Pending, createdSec: 460}
finished:
- {id: old, createdSec: 0, admittedSec: 0, finishedSec: 40, admission: {clusterQueue: q, podSets: [{name: main, count: 1, flavors: {cpu: h100-sxm, memory: h100-sxm, nvidia.com/gpu: h100-sxm}}]}}
`

// TestRebuildAtLive: the state at 500 s of pastLive, derived by hand: la admitted with 1,600 s
// left and its PodsReady condition; lp pending (admitted at 1,900 s: 1,400 s later) with all its
// 150 s of work; lq pending but unscored (its eviction after the instant: where it stood then is
// not known), without its later queue time and condition; lw pending, never admitted.
func TestRebuildAtLive(t *testing.T) {
	dir := t.TempDir()
	gpu := func(id string, at float64) string { return handWorkload(id, "single_gpu_training", at, 3600, 1, 8) }
	for name, body := range map[string]string{state.StateFile: pastLive, state.ClusterFile: small,
		state.TraceFile:   strings.Join([]string{gpu("la", 300), gpu("lp", 400), gpu("lq", 450), gpu("lw", 460)}, "\n") + "\n",
		state.HistoryFile: handWorkload("old", "single_gpu_training", 0, 40, 1, 8) + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dst := t.TempDir()
	bt, err := RebuildAt(context.Background(), dir, 500, dst, BacktestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Backtest{AtSec: 500, NowSec: 2000, Pending: 3, Admitted: 1, History: 1, Unscored: []string{"lq"}, Truth: map[string]float64{"lp": 1400}}
	if d := cmp.Diff(want, bt); d != "" {
		t.Errorf("backtest (-want +got):\n%s", d)
	}
	st, err := state.Load(filepath.Join(dst, state.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	idx := st.Index()
	if la := idx["la"]; la == nil || la.Phase != state.Admitted || la.RemainingSec == nil || *la.RemainingSec != 1600 || len(la.Conditions) != 1 {
		t.Errorf("la: %+v, want admitted, 1,600 s left, its PodsReady condition", la)
	}
	if lp := idx["lp"]; lp == nil || lp.Phase != state.Pending || lp.RemainingSec == nil || *lp.RemainingSec != 150 || lp.Admission != nil {
		t.Errorf("lp: %+v, want pending with its 150 s of work", lp)
	}
	if lq := idx["lq"]; lq == nil || lq.Phase != state.Pending || lq.QueuedSec != nil || len(lq.Conditions) != 0 {
		t.Errorf("lq: %+v, want pending, neither its later queue time nor its later condition", lq)
	}
	// At 420 s, before la's pods were ready: no PodsReady condition yet.
	if _, err := RebuildAt(context.Background(), dir, 420, dst, BacktestOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err = state.Load(filepath.Join(dst, state.StateFile)); err != nil {
		t.Fatal(err)
	}
	if la := st.Index()["la"]; la == nil || *la.RemainingSec != 1680 || len(la.Conditions) != 0 {
		t.Errorf("la at 420 s: %+v, want 1,680 s left, no condition", la)
	}
}

func TestParseAt(t *testing.T) {
	st := &state.State{NowSec: 7200, ClockOrigin: "2026-12-07T00:00:00Z"}
	for in, want := range map[string]float64{"-1h": 3600, "600": 600, "30m": 1800, "2026-12-07T01:30:00Z": 5400} {
		got, err := ParseAt(in, st)
		if err != nil || got != want {
			t.Errorf("%s: %g %v, want %g", in, got, err, want)
		}
	}
	if _, err := ParseAt("yesterday", st); err == nil || !strings.Contains(err.Error(), "RFC 3339") {
		t.Errorf("yesterday: %v", err)
	}
	if _, err := ParseAt("2026-12-07T01:30:00Z", &state.State{NowSec: 7200}); err == nil || !strings.Contains(err.Error(), "no wall time") {
		t.Errorf("a wall time on a replay's clock: %v", err)
	}
}

// TestArrivalsNote: only the recorded arrivals without the oracle are what a forecast at the
// instant could not know.
func TestArrivalsNote(t *testing.T) {
	for _, tc := range []struct {
		arrivals string
		oracle   bool
		note     bool
	}{
		{state.ArrivalsRecorded, false, true},
		{state.ArrivalsRecorded, true, false},
		{state.ArrivalsNone, false, false},
		{ArrivalsHistory, false, false},
		{"", true, false},
	} {
		if got := ArrivalsNote(tc.arrivals, tc.oracle); (got != "") != tc.note {
			t.Errorf("arrivals %q, oracle %v: note %q, want one: %v", tc.arrivals, tc.oracle, got, tc.note)
		}
	}
}
