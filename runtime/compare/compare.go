// Package compare puts two runs of the same trace side by side — typically the cluster engine and
// the sim engine, which is how the sim is validated — per workload (state, admission order,
// time to admission, job completion time, preemptions) and as a whole: each agreement metric
// with its tolerance, and the workloads that differ most.
package compare

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Tolerance bounds a metric's difference: it agrees when |B − A| ≤ max(Rel × |A|, Abs).
type Tolerance struct {
	Rel, Abs float64
}

// Tolerances are the agreement criteria, per metric.
type Tolerances struct {
	JCTP50, TTAP50, TTAP95, Preemptions, GPUAllocation Tolerance
}

// DefaultTolerances are the criteria for the sim engine to agree with the cluster engine:
// median JCT within 2 %, TTA p50 and p95 within 10 %, preemptions within 10 %, GPU allocation
// within 2 %. The absolute floors keep near-zero values comparable: a minute of TTA (the
// control plane's own latency is seconds), two preemptions.
var DefaultTolerances = Tolerances{
	JCTP50:        Tolerance{Rel: 0.02},
	TTAP50:        Tolerance{Rel: 0.10, Abs: 60},
	TTAP95:        Tolerance{Rel: 0.10, Abs: 60},
	Preemptions:   Tolerance{Rel: 0.10, Abs: 2},
	GPUAllocation: Tolerance{Rel: 0.02},
}

// Row is one workload in both runs.
type Row struct {
	ID, Family, Queue string
	// StateA and StateB are the final states ("" when the workload is missing from a run).
	StateA, StateB string
	// AdmitA and AdmitB are the workload's rank in its run's admission order (1 = first); 0
	// when not admitted.
	AdmitA, AdmitB int
	TTAA, TTAB     *float64
	JCTA, JCTB     *float64
	PreemptA       int
	PreemptB       int
}

// Metric is one agreement criterion.
type Metric struct {
	Name  string
	A, B  float64
	Tol   Tolerance
	Agree bool
}

// Delta is B − A relative to A (NaN when A is 0).
func (m Metric) Delta() float64 {
	if m.A == 0 {
		return math.NaN()
	}
	return (m.B - m.A) / math.Abs(m.A)
}

// Report is a comparison of run B against run A.
type Report struct {
	A, B       string // the runs' directories
	EngineA    results.Engine
	EngineB    results.Engine
	Rows       []Row
	Metrics    []Metric
	FinishedA  int // finished (Succeeded or Failed) in A
	FinishedB  int
	OnlyA      []string // workloads finished in A only
	OnlyB      []string
	StateDiff  int     // workloads whose final state differs
	Missing    int     // workloads in one run only
	RankCorr   float64 // Spearman correlation of the admission orders (workloads admitted in both)
	Admitted   int     // workloads admitted in both
	MedianRank float64 // median |rank A − rank B| over them
}

// Compare compares run b against run a.
func Compare(a, b *results.Dir, tol Tolerances) (*Report, error) {
	if a == nil || b == nil {
		return nil, errors.New("compare: two results directories are needed")
	}
	r := &Report{A: a.Path, B: b.Path, EngineA: a.Summary.Engine, EngineB: b.Summary.Engine}
	ra, rb := admissionRanks(a.Workloads), admissionRanks(b.Workloads)
	byB := make(map[string]*results.Record, len(b.Workloads))
	for i := range b.Workloads {
		byB[b.Workloads[i].ID] = &b.Workloads[i]
	}
	seen := map[string]bool{}
	for i := range a.Workloads {
		x := &a.Workloads[i]
		seen[x.ID] = true
		row := Row{ID: x.ID, Family: string(x.Family), Queue: x.Queue, StateA: x.State, AdmitA: ra[x.ID], PreemptA: len(x.Preemptions)}
		row.TTAA, row.JCTA = opt(x.TimeToAdmission()), opt(x.JCT())
		if y := byB[x.ID]; y != nil {
			row.StateB, row.AdmitB, row.PreemptB = y.State, rb[y.ID], len(y.Preemptions)
			row.TTAB, row.JCTB = opt(y.TimeToAdmission()), opt(y.JCT())
		} else {
			r.Missing++
		}
		r.Rows = append(r.Rows, row)
	}
	for i := range b.Workloads {
		y := &b.Workloads[i]
		if seen[y.ID] {
			continue
		}
		r.Missing++
		row := Row{ID: y.ID, Family: string(y.Family), Queue: y.Queue, StateB: y.State, AdmitB: rb[y.ID], PreemptB: len(y.Preemptions)}
		row.TTAB, row.JCTB = opt(y.TimeToAdmission()), opt(y.JCT())
		r.Rows = append(r.Rows, row)
	}
	for _, row := range r.Rows {
		fa, fb := finished(row.StateA), finished(row.StateB)
		if fa {
			r.FinishedA++
		}
		if fb {
			r.FinishedB++
		}
		switch {
		case fa && !fb:
			r.OnlyA = append(r.OnlyA, row.ID)
		case fb && !fa:
			r.OnlyB = append(r.OnlyB, row.ID)
		}
		if row.StateA != row.StateB {
			r.StateDiff++
		}
	}
	r.RankCorr, r.Admitted, r.MedianRank = rankAgreement(r.Rows)
	ga, gb := all(&a.Summary), all(&b.Summary)
	if ga == nil || gb == nil {
		return nil, errors.New("compare: a summary.json has no \"all\" group")
	}
	r.Metrics = []Metric{
		metric("median JCT (s)", q(ga.JCTSec.P50), q(gb.JCTSec.P50), tol.JCTP50),
		metric("TTA p50 (s)", q(ga.TimeToAdmissionSec.P50), q(gb.TimeToAdmissionSec.P50), tol.TTAP50),
		metric("TTA p95 (s)", q(ga.TimeToAdmissionSec.P95), q(gb.TimeToAdmissionSec.P95), tol.TTAP95),
		metric("preemptions", float64(ga.Preemptions), float64(gb.Preemptions), tol.Preemptions),
		metric("GPU allocation", ga.GPUAllocation, gb.GPUAllocation, tol.GPUAllocation),
	}
	return r, nil
}

// Agree reports whether the same workloads finished and every metric is within its tolerance.
func (r *Report) Agree() bool {
	if len(r.OnlyA) > 0 || len(r.OnlyB) > 0 || r.Missing > 0 {
		return false
	}
	for _, m := range r.Metrics {
		if !m.Agree {
			return false
		}
	}
	return true
}

func metric(name string, a, b float64, t Tolerance) Metric {
	m := Metric{Name: name, A: a, B: b, Tol: t}
	m.Agree = !math.IsNaN(a) && !math.IsNaN(b) && math.Abs(b-a) <= math.Max(t.Rel*math.Abs(a), t.Abs)
	return m
}

func all(s *results.Summary) *results.Group {
	for i := range s.Groups {
		if s.Groups[i].Scope == "all" {
			return &s.Groups[i]
		}
	}
	return nil
}

func q(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func opt(v float64, ok bool) *float64 {
	if !ok {
		return nil
	}
	return &v
}

func finished(state string) bool {
	return state == results.StateSucceeded || state == results.StateFailed
}

// admissionRanks numbers the admitted workloads by admission time (ties by id).
func admissionRanks(recs []results.Record) map[string]int {
	var adm []*results.Record
	for i := range recs {
		if recs[i].Admitted != nil {
			adm = append(adm, &recs[i])
		}
	}
	slices.SortFunc(adm, func(x, y *results.Record) int {
		return cmp.Or(cmp.Compare(*x.Admitted, *y.Admitted), cmp.Compare(x.ID, y.ID))
	})
	out := make(map[string]int, len(adm))
	for i, x := range adm {
		out[x.ID] = i + 1
	}
	return out
}

// rankAgreement is Spearman's correlation between the two admission orders, re-ranked over the
// workloads admitted in both, and the median absolute rank difference.
func rankAgreement(rows []Row) (corr float64, n int, median float64) {
	type pair struct{ a, b int }
	var ps []pair
	for _, r := range rows {
		if r.AdmitA > 0 && r.AdmitB > 0 {
			ps = append(ps, pair{r.AdmitA, r.AdmitB})
		}
	}
	n = len(ps)
	if n < 2 {
		return math.NaN(), n, 0
	}
	rerank := func(get func(pair) int) []int {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(i, j int) bool { return get(ps[idx[i]]) < get(ps[idx[j]]) })
		r := make([]int, n)
		for rank, i := range idx {
			r[i] = rank
		}
		return r
	}
	ra, rb := rerank(func(p pair) int { return p.a }), rerank(func(p pair) int { return p.b })
	var d2 float64
	diffs := make([]float64, n)
	for i := range ps {
		d := float64(ra[i] - rb[i])
		d2 += d * d
		diffs[i] = math.Abs(d)
	}
	sort.Float64s(diffs)
	fn := float64(n)
	return 1 - 6*d2/(fn*(fn*fn-1)), n, diffs[n/2]
}

// WriteText prints the comparison: the agreement table, what differs, and the workloads whose
// JCT differs most (up to top).
func (r *Report) WriteText(w io.Writer, top int) error {
	fmt.Fprintf(w, "A: %s (%s engine)\nB: %s (%s engine)\n\n", r.A, cmp.Or(r.EngineA, "?"), r.B, cmp.Or(r.EngineB, "?"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "metric\tA\tB\tΔ\ttolerance\tagree\t")
	for _, m := range r.Metrics {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Name, num(m.A), num(m.B), pct(m.Delta()), tolString(m.Tol), yes(m.Agree))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nworkloads: %d; finished %d in A, %d in B; %d finished in A only, %d in B only; %d end in another state; %d in one run only\n",
		len(r.Rows), r.FinishedA, r.FinishedB, len(r.OnlyA), len(r.OnlyB), r.StateDiff, r.Missing)
	if len(r.OnlyA) > 0 {
		fmt.Fprintf(w, "  finished in A only: %v\n", head(r.OnlyA, 10))
	}
	if len(r.OnlyB) > 0 {
		fmt.Fprintf(w, "  finished in B only: %v\n", head(r.OnlyB, 10))
	}
	fmt.Fprintf(w, "admission order: %d admitted in both, Spearman correlation %s, median rank difference %g\n",
		r.Admitted, strconv.FormatFloat(r.RankCorr, 'f', 4, 64), r.MedianRank)
	preDiff := 0
	for _, row := range r.Rows {
		if row.PreemptA != row.PreemptB {
			preDiff++
		}
	}
	fmt.Fprintf(w, "preemptions: %d workloads preempted a different number of times\n", preDiff)
	if top > 0 {
		rows := slices.Clone(r.Rows)
		slices.SortStableFunc(rows, func(x, y Row) int { return cmp.Compare(absDiff(y.JCTA, y.JCTB), absDiff(x.JCTA, x.JCTB)) })
		fmt.Fprintf(w, "\nlargest JCT differences:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tfamily\tqueue\tstate A\tstate B\tadmit# A\tadmit# B\tTTA A\tTTA B\tJCT A\tJCT B\tpreempt A\tpreempt B\t")
		for i, row := range rows {
			if i >= top || absDiff(row.JCTA, row.JCTB) == 0 {
				break
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t\n", row.ID, row.Family, row.Queue, row.StateA, row.StateB,
				row.AdmitA, row.AdmitB, optNum(row.TTAA), optNum(row.TTAB), optNum(row.JCTA), optNum(row.JCTB), row.PreemptA, row.PreemptB)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	verdict := "AGREE"
	if !r.Agree() {
		verdict = "DIFFER"
	}
	_, err := fmt.Fprintf(w, "\n%s\n", verdict)
	return err
}

// WriteCSV writes one row per workload, both runs side by side.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"id", "family", "queue", "state_a", "state_b", "admit_rank_a", "admit_rank_b",
		"tta_a_sec", "tta_b_sec", "jct_a_sec", "jct_b_sec", "preemptions_a", "preemptions_b"}); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if err := cw.Write([]string{row.ID, row.Family, row.Queue, row.StateA, row.StateB, rank(row.AdmitA), rank(row.AdmitB),
			optNum(row.TTAA), optNum(row.TTAB), optNum(row.JCTA), optNum(row.JCTB),
			strconv.Itoa(row.PreemptA), strconv.Itoa(row.PreemptB)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func absDiff(a, b *float64) float64 {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil || b == nil:
		return math.Inf(1)
	}
	return math.Abs(*b - *a)
}

func rank(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func optNum(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', 1, 64)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	if math.Abs(v) < 10 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

func tolString(t Tolerance) string {
	s := fmt.Sprintf("±%g%%", 100*t.Rel)
	if t.Abs > 0 {
		s += fmt.Sprintf(" or ±%g", t.Abs)
	}
	return s
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func head(s []string, n int) []string {
	if len(s) > n {
		return append(slices.Clone(s[:n]), "…")
	}
	return s
}
