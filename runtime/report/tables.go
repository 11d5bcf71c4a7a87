package report

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Report is the comparison: one table per metric and scope.
type Report struct {
	Name     string   `json:"name"`
	Baseline string   `json:"baseline"`
	Variants []string `json:"variants"`
	Repeats  []int    `json:"repeats"` // finished repeats per variant
	// Ran says per variant what decided: the engine and the Kueue version its runs' summaries
	// name, e.g. "cluster engine, Kueue v0.19.2" (runs that differ are listed apart).
	Ran    []string `json:"ran"`
	Tables []Table  `json:"tables"`
}

// Table is one metric (in one scope: all workloads, a queue or a family) across the variants.
type Table struct {
	Metric string `json:"metric"`
	Scope  string `json:"scope"` // "all", "queue <name>", "family <name>", "mig <profile>" or "flavor <name>"
	Unit   string `json:"unit"`
	Rows   []Row  `json:"rows"`
}

// Row is one variant's value: the mean over repeats with the half-width of its 95% confidence
// interval (t-distribution; nil with one repeat), and the delta against the baseline's mean with
// the half-width of the paired 95% interval of the per-repeat differences (repeat k of every
// variant replays the same trace).
type Row struct {
	Variant  string    `json:"variant"`
	Values   []float64 `json:"values"`
	Mean     *float64  `json:"mean"`
	CI95     *float64  `json:"ci95"`
	Delta    *float64  `json:"delta"`
	DeltaPct *float64  `json:"deltaPct"`
	DeltaCI  *float64  `json:"deltaCI95"`
}

// metric extracts one value from a run; ok is false when the run has none (e.g. no workload of
// that queue was admitted).
type metric struct {
	name, unit string
	value      func(r Run, scope, name string) (float64, bool)
}

func group(r Run, scope, name string) *results.Group {
	for i := range r.Summary.Groups {
		if g := &r.Summary.Groups[i]; g.Scope == scope && g.Name == name {
			return g
		}
	}
	return nil
}

func quantile(pick func(g *results.Group) *float64) func(r Run, scope, name string) (float64, bool) {
	return func(r Run, scope, name string) (float64, bool) {
		g := group(r, scope, name)
		if g == nil || pick(g) == nil {
			return 0, false
		}
		return *pick(g), true
	}
}

func field(pick func(g *results.Group) float64) func(r Run, scope, name string) (float64, bool) {
	return func(r Run, scope, name string) (float64, bool) {
		g := group(r, scope, name)
		if g == nil {
			return 0, false
		}
		return pick(g), true
	}
}

// meanTTA is the mean time-to-admission of the scope's admitted workloads.
func meanTTA(r Run, scope, name string) (float64, bool) {
	var sum float64
	n := 0
	for i := range r.Workloads {
		w := &r.Workloads[i]
		if scope == "queue" && w.Queue != name {
			continue
		}
		if v, ok := w.TimeToAdmission(); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

var (
	ttaP50   = metric{"time-to-admission p50", "s", quantile(func(g *results.Group) *float64 { return g.TimeToAdmissionSec.P50 })}
	ttaP95   = metric{"time-to-admission p95", "s", quantile(func(g *results.Group) *float64 { return g.TimeToAdmissionSec.P95 })}
	ttaMean  = metric{"time-to-admission mean", "s", meanTTA}
	jctP50   = metric{"JCT p50", "s", quantile(func(g *results.Group) *float64 { return g.JCTSec.P50 })}
	slowP50  = metric{"slowdown p50", "×", quantile(func(g *results.Group) *float64 { return g.Slowdown.P50 })}
	gpuAlloc = metric{"GPU allocation", "%", field(func(g *results.Group) float64 { return 100 * g.GPUAllocation })}
	gpuEff   = metric{"GPU effective utilisation", "%", field(func(g *results.Group) float64 { return 100 * g.GPUEffective })}
	energy   = metric{"energy", "kWh", field(func(g *results.Group) float64 { return g.EnergyKWh })}
	makespan = metric{"makespan", "s", field(func(g *results.Group) float64 { return g.MakespanSec })}
	preempt  = metric{"preemptions", "", field(func(g *results.Group) float64 { return float64(g.Preemptions) })}
	unfin    = metric{"unfinished", "", field(func(g *results.Group) float64 { return float64(g.Unfinished) })}

	sliceHours = metric{"slice-hours", "slice-h", field(func(g *results.Group) float64 { return g.SliceHours })}
	sliceUtil  = metric{"slice utilisation", "%", field(func(g *results.Group) float64 { return 100 * g.DeviceUtilization })}
	migAlloc   = metric{"MIG-partitioned GPUs allocated", "%", partValue(slicesOf, func(s *results.Slices) float64 { return 100 * s.Allocation })}
	migEff     = metric{"MIG-partitioned GPUs effective utilisation", "%", partValue(slicesOf, func(s *results.Slices) float64 { return 100 * s.Effective })}
	migEnergy  = metric{"energy on slices per partitioned GPU", "kWh", partValue(slicesOf, func(s *results.Slices) float64 { return s.EnergyKWhPerGPU })}
	tsAlloc    = metric{"time-sliced GPUs allocated", "%", partValue(timeSlicedOf, func(s *results.TimeSliced) float64 { return 100 * s.Allocation })}
	tsEff      = metric{"time-sliced GPUs effective utilisation", "%", partValue(timeSlicedOf, func(s *results.TimeSliced) float64 { return 100 * s.Effective })}

	idleGPUh    = metric{"quota held idle", "GPU-h", idleValue(func(g results.IdleGroup) float64 { return g.GPUHours })}
	idleOver    = metric{"workloads waiting admitted > " + strconv.Itoa(results.DefaultIdleThresholdSec/60) + " min", "", idleValue(func(g results.IdleGroup) float64 { return float64(g.OverThreshold) })}
	idleLongest = metric{"longest wait admitted", "s", idleValue(func(g results.IdleGroup) float64 { return g.LongestSec })}
)

// The parts of a summary some clusters have: what the MIG-partitioned and the time-sliced GPUs did.
func slicesOf(s *results.Summary) *results.Slices         { return s.Slices }
func timeSlicedOf(s *results.Summary) *results.TimeSliced { return s.TimeSliced }

// partValue reads a value of a part of a run's summary; no value for a run whose cluster has no
// such part.
func partValue[T any](part func(*results.Summary) *T, pick func(*T) float64) func(r Run, scope, name string) (float64, bool) {
	return func(r Run, _, _ string) (float64, bool) {
		x := part(&r.Summary)
		if x == nil {
			return 0, false
		}
		return pick(x), true
	}
}

// idleValue reads the quota held idle of a run (results.Idle): the whole run's, a queue's or a
// flavor's; 0 for a queue or flavor with no reservation; no value for a run without it.
func idleValue(pick func(results.IdleGroup) float64) func(r Run, scope, name string) (float64, bool) {
	return func(r Run, scope, name string) (float64, bool) {
		idle := r.Summary.ReservedIdle
		if idle == nil {
			return 0, false
		}
		groups := idle.Queues
		switch scope {
		case "all":
			all := results.IdleGroup{GPUHours: idle.GPUHours, OverThreshold: idle.OverThreshold}
			if idle.Longest != nil {
				all.LongestSec = idle.Longest.LongestSec
			}
			return pick(all), true
		case "flavor":
			groups = idle.Flavors
		}
		for _, g := range groups {
			if g.Name == name {
				return pick(g), true
			}
		}
		return 0, true
	}
}

// idleFlavors lists the flavors any run held GPU quota idle on, sorted.
func idleFlavors(in *Input) []string {
	set := map[string]bool{}
	for _, v := range in.Variants {
		for _, run := range v.Runs {
			if idle := run.Summary.ReservedIdle; idle != nil {
				for _, g := range idle.Flavors {
					if g.GPUHours > 0 {
						set[g.Name] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Compute builds the tables: time-to-admission (p50, p95, mean) per queue and overall, JCT p50
// and slowdown p50 overall and per family, GPU allocation and effective utilisation, energy,
// makespan, preemptions, unfinished workloads, what the MIG-partitioned and the time-sliced GPUs
// did and, per MIG profile, the wait, JCT, slice-hours, slice utilisation and energy, and quota
// held idle (GPU-hours overall, per queue and per flavor; workloads that waited admitted over the
// threshold; the longest such wait).
func Compute(in *Input) *Report {
	r := &Report{Name: in.Name, Baseline: in.Baseline}
	for _, v := range in.Variants {
		r.Variants = append(r.Variants, v.Name)
		r.Repeats = append(r.Repeats, len(v.Runs))
		r.Ran = append(r.Ran, ran(v))
	}
	queues, families := names(in, "queue"), names(in, "family")
	for _, m := range []metric{ttaP50, ttaP95, ttaMean} {
		r.add(in, m, "all", "")
		for _, q := range queues {
			r.add(in, m, "queue", q)
		}
	}
	r.add(in, jctP50, "all", "")
	for _, f := range families {
		r.add(in, jctP50, "family", f)
	}
	r.add(in, slowP50, "all", "")
	for _, f := range families {
		r.add(in, slowP50, "family", f)
	}
	for _, m := range []metric{gpuAlloc, gpuEff, energy, makespan, preempt, unfin} {
		r.add(in, m, "all", "")
	}
	if has(in, func(s *results.Summary) bool { return slicesOf(s) != nil }) {
		for _, m := range []metric{migAlloc, migEff, migEnergy} {
			r.add(in, m, "all", "")
		}
	}
	if has(in, func(s *results.Summary) bool { return timeSlicedOf(s) != nil }) {
		for _, m := range []metric{tsAlloc, tsEff} {
			r.add(in, m, "all", "")
		}
	}
	for _, p := range names(in, results.ScopeMIG) {
		for _, m := range []metric{ttaP50, jctP50, sliceHours, sliceUtil, energy} {
			r.add(in, m, results.ScopeMIG, p)
		}
	}
	for _, m := range []metric{idleGPUh, idleOver, idleLongest} {
		r.add(in, m, "all", "")
	}
	for _, q := range queues {
		r.add(in, idleGPUh, "queue", q)
	}
	for _, f := range idleFlavors(in) {
		r.add(in, idleGPUh, "flavor", f)
	}
	r.addFaultTables(in)
	return r
}

// has reports whether any run's summary satisfies f.
func has(in *Input, f func(*results.Summary) bool) bool {
	for _, v := range in.Variants {
		for _, run := range v.Runs {
			if f(&run.Summary) {
				return true
			}
		}
	}
	return false
}

// ran describes what decided v's runs: each distinct engine, Kueue version and control-plane
// model, in repeat order.
func ran(v *Variant) string {
	var seen []string
	for _, run := range v.Runs {
		d := cmp.Or(string(run.Summary.Engine), "unrecorded") + " engine"
		k := run.Summary.Kueue
		if k != nil && k.Version != "" {
			d += ", Kueue " + k.Version
		} else {
			d += ", Kueue version not recorded"
		}
		if k != nil && k.ControlPlane != nil {
			m := k.ControlPlane
			d += fmt.Sprintf(", control plane %s (client %g QPS, burst %d)", m.Name, m.QPS, m.Burst)
		} else {
			d += ", control plane none"
		}
		if !slices.Contains(seen, d) {
			seen = append(seen, d)
		}
	}
	return strings.Join(seen, "; ")
}

// names lists the queues or families any run has, sorted.
func names(in *Input, scope string) []string {
	set := map[string]bool{}
	for _, v := range in.Variants {
		for _, run := range v.Runs {
			for _, g := range run.Summary.Groups {
				if g.Scope == scope {
					set[g.Name] = true
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (r *Report) add(in *Input, m metric, scope, name string) {
	t := Table{Metric: m.name, Scope: scope, Unit: m.unit}
	if name != "" {
		t.Scope = scope + " " + name
	}
	byRepeat := make([]map[int]float64, len(in.Variants))
	base := -1
	for i, v := range in.Variants {
		byRepeat[i] = map[int]float64{}
		row := Row{Variant: v.Name, Values: []float64{}}
		for _, run := range v.Runs {
			if x, ok := m.value(run, scope, name); ok {
				row.Values = append(row.Values, x)
				byRepeat[i][run.Repeat] = x
			}
		}
		row.Mean, row.CI95 = meanCI(row.Values)
		t.Rows = append(t.Rows, row)
		if v.Name == in.Baseline {
			base = i
		}
	}
	for i := range t.Rows {
		row := &t.Rows[i]
		if base < 0 || row.Mean == nil || t.Rows[base].Mean == nil {
			continue
		}
		d := *row.Mean - *t.Rows[base].Mean
		row.Delta = &d
		if b := *t.Rows[base].Mean; b != 0 {
			pct := 100 * d / b
			row.DeltaPct = &pct
		}
		var diffs []float64
		for k, x := range byRepeat[i] {
			if y, ok := byRepeat[base][k]; ok {
				diffs = append(diffs, x-y)
			}
		}
		sort.Float64s(diffs) // map order must not change the sums' rounding
		if i != base {
			_, row.DeltaCI = meanCI(diffs)
		}
	}
	r.Tables = append(r.Tables, t)
}

// meanCI returns the mean of xs and the half-width of its 95% confidence interval, t_{0.975,n−1}
// × s / √n (nil with fewer than two values).
func meanCI(xs []float64) (mean, half *float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	m := stat.Mean(xs, nil)
	if len(xs) < 2 {
		return &m, nil
	}
	n := float64(len(xs))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Quantile(0.975)
	h := t * stat.StdDev(xs, nil) / math.Sqrt(n)
	return &m, &h
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteCSV writes one row per table and variant.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"metric", "scope", "unit", "variant", "n", "mean", "ci95", "delta", "delta_pct", "delta_ci95"}); err != nil {
		return err
	}
	num := func(p *float64) string {
		if p == nil {
			return ""
		}
		return strconv.FormatFloat(*p, 'g', 10, 64)
	}
	for _, t := range r.Tables {
		for _, row := range t.Rows {
			if err := cw.Write([]string{t.Metric, t.Scope, t.Unit, row.Variant, strconv.Itoa(len(row.Values)),
				num(row.Mean), num(row.CI95), num(row.Delta), num(row.DeltaPct), num(row.DeltaCI)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// Cells are a row formatted for display.
type Cells struct {
	Variant, N, Mean, CI, Delta, DeltaPct, DeltaCI string
	Baseline                                       bool
}

// Format formats a table's rows: values to 3 significant digits, "n/a" where a confidence
// interval needs more repeats, "-" where there is no value.
func (t *Table) Format(baseline string) []Cells {
	out := make([]Cells, len(t.Rows))
	for i, row := range t.Rows {
		c := Cells{Variant: row.Variant, N: strconv.Itoa(len(row.Values)), Mean: num(row.Mean), CI: "n/a",
			Delta: "-", DeltaPct: "-", DeltaCI: "-", Baseline: row.Variant == baseline}
		if row.CI95 != nil {
			c.CI = "±" + num(row.CI95)
		} else if row.Mean == nil {
			c.CI = "-"
		}
		if c.Baseline {
			c.Delta, c.DeltaPct, c.DeltaCI = "baseline", "", ""
		} else if row.Delta != nil {
			c.Delta = signed(*row.Delta)
			if row.DeltaPct != nil {
				c.DeltaPct = signed(*row.DeltaPct) + "%"
			}
			c.DeltaCI = "n/a"
			if row.DeltaCI != nil {
				c.DeltaCI = "±" + num(row.DeltaCI)
			}
		}
		out[i] = c
	}
	return out
}

func num(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmtNum(*p)
}

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func signed(v float64) string {
	if v > 0 {
		return "+" + fmtNum(v)
	}
	return fmtNum(v)
}

// Title is a table's heading.
func (t *Table) Title() string {
	s := t.Metric
	if t.Scope != "all" {
		s += " · " + t.Scope
	}
	if t.Unit != "" {
		s += " (" + t.Unit + ")"
	}
	return s
}

// WriteText prints every table.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "experiment %s: %d variants, baseline %s; mean over repeats, 95%% CI (t-distribution), delta vs baseline with paired 95%% CI\n",
		r.Name, len(r.Variants), r.Baseline)
	for i, v := range r.Variants {
		fmt.Fprintf(w, "  %s: %s\n", v, r.Ran[i])
	}
	for _, t := range r.Tables {
		fmt.Fprintf(w, "\n%s\n", t.Title())
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "variant\tn\tmean\t95% CI\tdelta\tdelta %\tdelta CI\t")
		for _, c := range t.Format(r.Baseline) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Variant, c.N, c.Mean, c.CI, c.Delta, c.DeltaPct, c.DeltaCI)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}
