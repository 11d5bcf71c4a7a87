package forecast

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/kueuelab/kueuelab/runtime/report"
)

// The plot's geometry, in SVG user units: a label column, then the time axis from axisLo to the
// horizon, then a column for the runs that did not admit the workload.
const (
	plotLabelW = 300.0
	plotAxisW  = 560.0
	plotNeverW = 90.0
	plotRowH   = 26.0
	plotTop    = 30.0
	plotBottom = 24.0
	// maxLabel is the most characters of a workload's name the label column holds.
	maxLabel = 46
	// axisLo is the left end of the log time axis: sooner admissions are drawn at it.
	axisLo = 60.0
)

var forecastPage = template.Must(template.New("forecast").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kueuelab forecast · {{.R.State}}</title>
<style>
{{.Style}}svg text { font-size: 11px; fill: #333; }
svg .grid { stroke: #ccc; } svg .edge { stroke: #888; }
svg .box { fill: #c6d7ee; stroke: #4a72b0; } svg .box.open { fill: url(#open); }
svg .p50 { stroke: #1b3d73; stroke-width: 2.5; } svg .run { fill: #4a72b0; fill-opacity: .55; }
svg .never { stroke: #b0413e; stroke-width: 1.5; } svg .manifest { font-weight: 600; }
</style>
</head>
<body>
<h1>When will each pending workload start?</h1>
<p class="meta">Forecast from <b>{{.R.State}}</b>{{if .R.Source}} ({{.R.Source}}){{end}} at {{.Now}}: {{.R.Repeats}} runs of Kueue's own scheduler to {{.Horizon}} past it, arrivals {{.R.Arrivals}}.
{{with .R.ArrivalFit}}Arrivals fitted to the {{.Seen}} workloads seen (day shape: {{.DayShape}}): {{range $i, $q := .Queues}}{{if $i}}, {{end}}{{$q.Queue}} {{printf "%.2f" $q.PerHour}}/h ({{$q.Seen}} seen){{end}}.
{{end}}Work left: {{.R.Known}} known, {{.R.Drawn}} drawn from {{.R.History}} finished workloads, {{.R.FromTrace}} from the trace.
{{len .R.Workloads}} pending workloads{{if .Manifests}}, {{.Manifests}} of them jobs of -f manifests as if submitted now (in bold){{end}}.</p>
<figure>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.W}}" height="{{.H}}" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-label="time to admission per pending workload">
<defs><pattern id="open" width="6" height="6" patternUnits="userSpaceOnUse"><rect width="6" height="6" fill="#c6d7ee"/><path d="M0 6 L6 0" stroke="#4a72b0"/></pattern></defs>
{{range .Ticks}}<line class="{{.Class}}" x1="{{.X}}" y1="{{$.Top}}" x2="{{.X}}" y2="{{$.AxisY}}"/><text x="{{.X}}" y="{{$.LabelY}}" text-anchor="middle">{{.Label}}</text>
{{end}}<text x="{{.NeverX}}" y="{{.LabelY}}" text-anchor="middle">not admitted</text>
{{range .Rows}}<g class="workload" data-workload="{{.ID}}">
<text x="4" y="{{.TextY}}"{{if .Manifest}} class="manifest"{{end}}><title>{{.Label}}</title>{{.Short}}</text>
{{if .Box}}<rect class="box{{if .Open}} open{{end}}" data-workload="{{.ID}}" x="{{.Box.X}}" y="{{.Box.Y}}" width="{{.Box.W}}" height="{{.Box.H}}"/>
{{end}}{{if .P50}}<line class="p50" data-workload="{{.ID}}" x1="{{.P50}}" y1="{{.Box.Y}}" x2="{{.P50}}" y2="{{.Box.Y2}}"/>
{{end}}{{range .Runs}}<circle class="run" cx="{{.X}}" cy="{{.Y}}" r="2.5"/>
{{end}}{{if .Never}}<path class="never" d="{{.NeverPath}}"/><text x="{{$.NeverTextX}}" y="{{.TextY}}">{{.Never}}</text>
{{end}}</g>
{{end}}</svg>
<figcaption>Time to admission of each pending workload over the runs, on a log axis (admissions within {{.Lo}} are drawn at its left edge).
Box: the 10th to 90th percentile (hatched where the 90th falls among runs that did not admit it); thick tick: the median; dots: one run each;
× at right: the share of runs that did not admit it within {{.Horizon}}.</figcaption>
</figure>
<table>
<tr><th>workload</th><th>namespace</th><th>queue</th><th>waited</th>{{range .Thresholds}}<th>≤{{.}}</th>{{end}}<th>p10</th><th>p50</th><th>p90</th><th>waits for (Kueue's last reason before admission, share of runs)</th></tr>
{{range .Rows}}<tr><td>{{.Label}}</td><td>{{.Namespace}}</td><td>{{.Queue}}</td><td>{{.Waited}}</td>{{range .Within}}<td>{{.}}</td>{{end}}<td>{{.P10s}}</td><td>{{.P50s}}</td><td>{{.P90s}}</td><td>{{range .Waits}}{{.}}<br>{{end}}</td></tr>
{{end}}</table>
</body>
</html>
`))

type plotTick struct {
	X            string
	Label, Class string
}

type plotBox struct{ X, Y, W, H, Y2 string }

type plotPoint struct{ X, Y string }

type plotRow struct {
	ID, Label, Short, Namespace, Queue string
	Waited                             string
	Manifest                           bool
	TextY                              string
	Box                                *plotBox
	Open                               bool
	P50                                string
	Runs                               []plotPoint
	Never                              string
	NeverPath                          string
	Within                             []string
	P10s, P50s, P90s                   string
	Waits                              []string
}

// WriteHTML writes the forecast as one self-contained HTML page: the header facts, a strip plot
// of every pending workload's runs (inline SVG, no script, nothing fetched) and the table.
func WriteHTML(w io.Writer, r *Report) error {
	hi := math.Max(r.HorizonSec, 10*axisLo)
	x := func(sec float64) float64 {
		f := (math.Log(math.Max(sec, axisLo)) - math.Log(axisLo)) / (math.Log(hi) - math.Log(axisLo))
		return plotLabelW + math.Min(f, 1)*plotAxisW
	}
	n := func(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }
	axisY := plotTop + plotRowH*float64(len(r.Workloads))
	data := struct {
		Style                    template.CSS
		R                        *Report
		Now, Horizon, Lo         string
		Manifests                int
		W, H, Top, AxisY, LabelY string
		NeverX, NeverTextX       string
		Ticks                    []plotTick
		Rows                     []plotRow
		Thresholds               []string
	}{Style: report.Style, R: r, Now: durText(r.NowSec), Horizon: durText(r.HorizonSec), Lo: durText(axisLo),
		W: n(plotLabelW + plotAxisW + plotNeverW), H: n(axisY + plotBottom), Top: n(plotTop - 6), AxisY: n(axisY), LabelY: n(plotTop - 10),
		NeverX: n(plotLabelW + plotAxisW + plotNeverW/2), NeverTextX: n(plotLabelW + plotAxisW + plotNeverW/2 + 10)}
	data.Ticks = append(data.Ticks, plotTick{X: n(x(axisLo)), Label: "≤" + axisText(axisLo), Class: "edge"})
	for _, th := range Thresholds {
		data.Thresholds = append(data.Thresholds, th.Name)
		if th.Sec < hi {
			data.Ticks = append(data.Ticks, plotTick{X: n(x(th.Sec)), Label: th.Name, Class: "grid"})
		}
	}
	data.Ticks = append(data.Ticks, plotTick{X: n(x(hi)), Label: axisText(hi), Class: "edge"})
	for i, wl := range r.Workloads {
		top := plotTop + plotRowH*float64(i)
		mid := top + plotRowH/2
		row := plotRow{ID: wl.ID, Label: wl.ID, Namespace: wl.Namespace, Queue: wl.Queue, Waited: durText(wl.WaitedSec), TextY: n(mid + 4),
			P10s: durPtr(wl.P10), P50s: durPtr(wl.P50), P90s: durPtr(wl.P90)}
		if wl.Manifest != "" {
			data.Manifests++
			row.Label, row.Manifest, row.Waited = wl.Manifest+" (submitted now)", true, "new"
			if wl.AltGPUs > 0 {
				row.Label = fmt.Sprintf("%s at %d GPUs (%s, submitted now)", wl.Manifest, wl.AltGPUs, wl.Resized)
			}
		}
		if wl.P10 != nil {
			right := x(hi)
			if wl.P90 != nil {
				right = x(*wl.P90)
			} else {
				row.Open = true
			}
			left := x(*wl.P10)
			row.Box = &plotBox{X: n(left), Y: n(top + 5), W: n(math.Max(right-left, 1)), H: n(plotRowH - 10), Y2: n(top + plotRowH - 5)}
			if wl.P50 != nil {
				row.P50 = n(x(*wl.P50))
			}
		}
		never := 0
		for k, e := range wl.ETAs {
			if e < 0 {
				never++
				continue
			}
			// A fixed spread across the row keeps equal ETAs apart without randomness.
			row.Runs = append(row.Runs, plotPoint{X: n(x(e)), Y: n(mid + float64(k%7-3)*2)})
		}
		if never > 0 {
			cx := plotLabelW + plotAxisW + plotNeverW/2
			row.NeverPath = fmt.Sprintf("M%s %s L%s %s M%s %s L%s %s", n(cx-4), n(mid-4), n(cx+4), n(mid+4), n(cx-4), n(mid+4), n(cx+4), n(mid-4))
			row.Never = fmt.Sprintf("%.0f%%", 100*wl.NotAdmitted)
		}
		for _, th := range Thresholds {
			row.Within = append(row.Within, fmt.Sprintf("%.0f%%", 100*wl.Within[th.Name]))
		}
		for _, wt := range wl.WaitsFor {
			row.Waits = append(row.Waits, fmt.Sprintf("%s (%.0f%%)", wt.Reason, 100*wt.Share))
		}
		row.Short = row.Label
		if r := []rune(row.Label); len(r) > maxLabel {
			row.Short = string(r[:maxLabel-1]) + "…"
		}
		data.Rows = append(data.Rows, row)
	}
	if err := forecastPage.Execute(w, data); err != nil {
		return fmt.Errorf("forecast: html: %w", err)
	}
	return nil
}

// durText prints seconds as a Go duration rounded to the second.
func durText(sec float64) string {
	if math.IsInf(sec, 0) || math.IsNaN(sec) {
		return "-"
	}
	return (time.Duration(math.Round(sec)) * time.Second).String()
}

// axisText prints seconds in the largest whole unit that fits: 1m, 4h, 7d.
func axisText(sec float64) string {
	s := int64(math.Round(sec))
	for _, u := range []struct {
		sec  int64
		unit string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}} {
		if s >= u.sec && s%u.sec == 0 {
			return strconv.FormatInt(s/u.sec, 10) + u.unit
		}
	}
	return durText(sec)
}

func durPtr(x *float64) string {
	if x == nil {
		return "-"
	}
	return durText(*x)
}
