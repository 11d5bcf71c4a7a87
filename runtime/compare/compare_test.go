package compare

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/results"
)

func f(v float64) *float64 { return &v }

// rec is a workload submitted at 0, admitted at adm and finished at fin (nil: not reached).
func rec(id string, adm, fin *float64, preempt int) results.Record {
	r := results.Record{ID: id, Family: "debug_eval", Queue: "q", Submitted: f(0), Admitted: adm, Finished: fin, State: results.StatePending}
	if fin != nil {
		r.State = results.StateSucceeded
	}
	for range preempt {
		r.Preemptions = append(r.Preemptions, results.Incident{T: 1, Reason: "InClusterQueue"})
	}
	return r
}

func dir(engine string, recs ...results.Record) *results.Dir {
	s := results.Summarize(recs, results.Meta{Engine: results.Engine(engine), GPUCapacity: 8})
	return &results.Dir{Path: engine, Summary: s, Workloads: recs}
}

func TestCompareAgrees(t *testing.T) {
	a := dir("cluster", rec("a", f(0), f(100), 0), rec("b", f(10), f(200), 1), rec("c", f(20), f(300), 0))
	b := dir("sim", rec("a", f(0), f(100), 0), rec("b", f(10), f(201), 1), rec("c", f(20), f(300), 0))
	r, err := Compare(a, b, DefaultTolerances)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Agree() || r.RankCorr != 1 || r.Admitted != 3 || r.MedianRank != 0 {
		t.Fatalf("agree %v, rank correlation %g over %d, median rank difference %g", r.Agree(), r.RankCorr, r.Admitted, r.MedianRank)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out, 5); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "AGREE") || !strings.Contains(out.String(), "median JCT") {
		t.Errorf("text:\n%s", out.String())
	}
}

func TestCompareDiffers(t *testing.T) {
	a := dir("cluster", rec("a", f(0), f(100), 0), rec("b", f(10), f(200), 3), rec("c", f(20), f(300), 0), rec("d", f(30), f(400), 0))
	// b never finishes in B, c and d are admitted in the other order, d takes twice as long.
	b := dir("sim", rec("a", f(0), f(100), 0), rec("b", f(10), nil, 0), rec("c", f(40), f(300), 0), rec("d", f(30), f(800), 0))
	r, err := Compare(a, b, DefaultTolerances)
	if err != nil {
		t.Fatal(err)
	}
	if r.Agree() || len(r.OnlyA) != 1 || r.OnlyA[0] != "b" || r.StateDiff != 1 {
		t.Fatalf("agree %v, finished in A only %v, state differences %d", r.Agree(), r.OnlyA, r.StateDiff)
	}
	var pre *Metric
	for i := range r.Metrics {
		if r.Metrics[i].Name == "preemptions" {
			pre = &r.Metrics[i]
		}
	}
	if pre == nil || pre.A != 3 || pre.B != 0 || pre.Agree || !math.IsNaN(Metric{A: 0, B: 1}.Delta()) {
		t.Fatalf("preemptions metric %+v", pre)
	}
	if r.RankCorr >= 1 {
		t.Errorf("rank correlation %g for a swapped pair", r.RankCorr)
	}
	var csv bytes.Buffer
	if err := r.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != 5 {
		t.Errorf("CSV has %d lines, want a header and 4 rows", lines)
	}
	var out bytes.Buffer
	if err := r.WriteText(&out, 2); err != nil {
		t.Fatal(err)
	}
	// The largest JCT difference first: b (finished in A only), then d.
	text := out.String()
	if i, j := strings.Index(text, " b  debug_eval"), strings.Index(text, " d  debug_eval"); i < 0 || j < 0 || i > j || !strings.Contains(text, "DIFFER") {
		t.Errorf("text:\n%s", text)
	}
}

func TestTolerance(t *testing.T) {
	for _, tt := range []struct {
		a, b  float64
		tol   Tolerance
		agree bool
	}{
		{100, 101.9, Tolerance{Rel: 0.02}, true},
		{100, 102.1, Tolerance{Rel: 0.02}, false},
		{0.1, 30, Tolerance{Rel: 0.1, Abs: 60}, true},
		{math.NaN(), 1, Tolerance{Rel: 1}, false},
	} {
		if m := metric("m", tt.a, tt.b, tt.tol); m.Agree != tt.agree {
			t.Errorf("%g vs %g with %+v: agree %v", tt.a, tt.b, tt.tol, m.Agree)
		}
	}
}
