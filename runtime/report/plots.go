package report

import (
	"bytes"
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Plot is one rendered figure.
type Plot struct {
	Title   string
	Caption string
	PNG     []byte
}

const (
	plotW = 7 * vg.Inch
	plotH = 4 * vg.Inch
)

// Plots renders the figures: a CDF of time-to-admission per queue (one line per variant, all
// repeats pooled), GPU utilisation, reserved vs running GPUs and pending workloads over trace
// time (repeat 0 of each variant), energy per variant (mean with 95% CI), and the median
// slowdown per family.
func Plots(in *Input, r *Report) ([]Plot, error) {
	var out []Plot
	for _, q := range names(in, "queue") {
		p, err := ttaCDF(in, q)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	for _, f := range []func(*Input) (Plot, error){gpuOverTime, reservedVsRunning, pendingOverTime} {
		p, err := f(in)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	p, err := energyBars(r)
	if err != nil {
		return nil, err
	}
	out = append(out, p)
	p, err = slowdownBars(in)
	if err != nil {
		return nil, err
	}
	return append(out, p), nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p
}

func render(p *plot.Plot, title, caption string) (Plot, error) {
	wt, err := p.WriterTo(plotW, plotH, "png")
	if err != nil {
		return Plot{}, fmt.Errorf("plot %s: %w", title, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return Plot{}, fmt.Errorf("plot %s: %w", title, err)
	}
	return Plot{Title: title, Caption: caption, PNG: b.Bytes()}, nil
}

func styled(l *plotter.Line, i int) {
	l.Color = plotutil.Color(i)
	l.Width = vg.Points(1.5)
	l.Dashes = plotutil.Dashes(i)
}

// ttaCDF is the empirical CDF of time-to-admission, in trace minutes, of queue q's workloads.
func ttaCDF(in *Input, q string) (Plot, error) {
	title := "Time-to-admission CDF · " + q
	p := newPlot(title, "time to admission (trace minutes)", "fraction of admitted workloads")
	p.Y.Min, p.Y.Max = 0, 1
	for i, v := range in.Variants {
		var xs []float64
		for _, run := range v.Runs {
			for j := range run.Workloads {
				w := &run.Workloads[j]
				if t, ok := w.TimeToAdmission(); ok && w.Queue == q {
					xs = append(xs, t/60)
				}
			}
		}
		if len(xs) == 0 {
			continue
		}
		sort.Float64s(xs)
		pts := make(plotter.XYs, 0, 2*len(xs))
		for k, x := range xs {
			pts = append(pts, plotter.XY{X: x, Y: float64(k) / float64(len(xs))}, plotter.XY{X: x, Y: float64(k+1) / float64(len(xs))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return Plot{}, err
		}
		styled(l, i)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", v.Name, len(xs)), l)
	}
	p.Legend.Left, p.Legend.Top = false, false
	return render(p, title, "Empirical CDF of Admitted − Submitted for the workloads of "+q+"; all repeats pooled. Further left is better.")
}

// seriesPlot draws one line per variant of a per-time aggregate of repeat 0's time series.
func seriesPlot(in *Input, title, y, caption string, agg func(s results.Sample) (float64, bool), norm func(run Run) float64) (Plot, error) {
	p := newPlot(title, "trace time (hours)", y)
	for i, v := range in.Variants {
		if len(v.Runs) == 0 || len(v.Runs[0].Series) == 0 {
			continue
		}
		run := v.Runs[0]
		sums := map[float64]float64{}
		for _, s := range run.Series {
			if x, ok := agg(s); ok {
				sums[s.T] += x
			}
		}
		ts := make([]float64, 0, len(sums))
		for t := range sums {
			ts = append(ts, t)
		}
		sort.Float64s(ts)
		d := norm(run)
		pts := make(plotter.XYs, len(ts))
		for k, t := range ts {
			pts[k] = plotter.XY{X: t / 3600, Y: sums[t] / d}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return Plot{}, err
		}
		styled(l, i)
		p.Add(l)
		p.Legend.Add(v.Name, l)
	}
	p.Y.Min = 0
	return render(p, title, caption)
}

func gpuOverTime(in *Input) (Plot, error) {
	return seriesPlot(in, "GPU utilisation over trace time", "GPUs in use (% of capacity)",
		"GPUs held by Running pods over every flavor, as a share of the cluster's GPUs (repeat 0 of each variant).",
		func(s results.Sample) (float64, bool) { return float64(s.InUse), s.Scope == results.ScopeFlavor },
		func(run Run) float64 { return math.Max(1, float64(run.Summary.GPUCapacity)) / 100 })
}

// reservedVsRunning draws, per variant, the GPUs Kueue holds quota for (solid) and the GPUs of
// Running pods (dashed) over every flavor: the gap is quota held while pods cannot run.
func reservedVsRunning(in *Input) (Plot, error) {
	title := "Reserved vs running GPUs over trace time"
	p := newPlot(title, "trace time (hours)", "GPUs")
	for i, v := range in.Variants {
		if len(v.Runs) == 0 || len(v.Runs[0].Series) == 0 {
			continue
		}
		reserved, running := map[float64]float64{}, map[float64]float64{}
		for _, s := range v.Runs[0].Series {
			if s.Scope == results.ScopeFlavor {
				reserved[s.T] += float64(s.Reserved)
				running[s.T] += float64(s.InUse)
			}
		}
		for k, series := range []struct {
			name string
			at   map[float64]float64
		}{{"reserved", reserved}, {"running", running}} {
			ts := make([]float64, 0, len(series.at))
			for t := range series.at {
				ts = append(ts, t)
			}
			sort.Float64s(ts)
			pts := make(plotter.XYs, len(ts))
			for j, t := range ts {
				pts[j] = plotter.XY{X: t / 3600, Y: series.at[t]}
			}
			if len(pts) == 0 {
				continue
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return Plot{}, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.5)
			if k == 1 {
				l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(v.Name+" "+series.name, l)
		}
	}
	p.Y.Min = 0
	return render(p, title, "GPUs of the workloads Kueue holds quota for (solid) and GPUs of Running pods (dashed), over every flavor (repeat 0 of each variant). "+
		"The gap is quota held while the pods are not running: waiting for a node the scheduler cannot find, or starting; summary.json's reservedIdle totals it per workload.")
}

func pendingOverTime(in *Input) (Plot, error) {
	return seriesPlot(in, "Pending workloads over trace time", "workloads waiting for quota",
		"Workloads waiting for quota, summed over every ClusterQueue (repeat 0 of each variant).",
		func(s results.Sample) (float64, bool) {
			return float64(s.Pending), s.Scope == results.ScopeClusterQueue
		},
		func(Run) float64 { return 1 })
}

// errBars are bar tops with their confidence intervals.
type errBars struct {
	plotter.XYs
	plotter.YErrors
}

func energyBars(r *Report) (Plot, error) {
	title := "Energy per variant"
	p := newPlot(title, "", "energy (kWh)")
	var t *Table
	for i := range r.Tables {
		if r.Tables[i].Metric == energy.name && r.Tables[i].Scope == "all" {
			t = &r.Tables[i]
		}
	}
	vals := make(plotter.Values, len(t.Rows))
	eb := errBars{XYs: make(plotter.XYs, len(t.Rows)), YErrors: make(plotter.YErrors, len(t.Rows))}
	withCI := false
	for i, row := range t.Rows {
		if row.Mean != nil {
			vals[i] = *row.Mean
		}
		eb.XYs[i] = plotter.XY{X: float64(i), Y: vals[i]}
		if row.CI95 != nil {
			eb.YErrors[i] = struct{ Low, High float64 }{*row.CI95, *row.CI95}
			withCI = true
		}
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return Plot{}, err
	}
	bars.Color = plotutil.Color(0)
	bars.LineStyle.Width = 0
	p.Add(bars)
	if withCI {
		e, err := plotter.NewYErrorBars(eb)
		if err != nil {
			return Plot{}, err
		}
		p.Add(e)
	}
	p.NominalX(r.Variants...)
	padBars(p, len(r.Variants))
	return render(p, title, "Energy of every workload's pods in trace time, mean over repeats; error bars are 95% confidence intervals (with 2+ repeats).")
}

// slowdownBars groups bars by family: the median slowdown (JCT ÷ ideal duration) of each
// variant, mean over repeats.
func slowdownBars(in *Input) (Plot, error) {
	title := "JCT slowdown by family"
	p := newPlot(title, "", "median slowdown (JCT ÷ ideal duration)")
	fams := names(in, "family")
	n := len(in.Variants)
	w := vg.Points(math.Max(4, math.Min(18, 300/float64(max(1, n*len(fams))))))
	for i, v := range in.Variants {
		vals := make(plotter.Values, len(fams))
		for j, f := range fams {
			var xs []float64
			for _, run := range v.Runs {
				if x, ok := slowP50.value(run, "family", f); ok {
					xs = append(xs, x)
				}
			}
			if m, _ := meanCI(xs); m != nil {
				vals[j] = *m
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return Plot{}, err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(b)
		p.Legend.Add(v.Name, b)
	}
	short := make([]string, len(fams))
	for i, f := range fams {
		short[i] = abbreviate(f)
	}
	p.NominalX(short...)
	p.X.Tick.Label.Rotation = 0.35
	p.X.Tick.Label.XAlign = draw.XRight
	padBars(p, len(fams))
	return render(p, title, "Median JCT (submitted to finished, queueing included) ÷ ideal duration per workload family, mean over repeats; 1 is a workload that ran at once at full speed.")
}

// abbreviate shortens long family names for axis labels.
func abbreviate(f string) string {
	switch f {
	case "parameter_server_training":
		return "ps_training"
	case "distributed_training":
		return "distributed"
	case "single_gpu_training":
		return "single_gpu"
	}
	return f
}

// padBars keeps the outer bars inside the plot and leaves room above them for the legend.
func padBars(p *plot.Plot, n int) {
	p.X.Min, p.X.Max = -0.6, float64(n)-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.25
}
