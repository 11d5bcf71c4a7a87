package report

import (
	"encoding/base64"
	"html/template"
	"io"
	"time"
)

// Style is the style sheet of kueuelab's HTML pages (this report, a forecast's plot).
const Style template.CSS = `body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1em; margin: 1.5em 0 .3em; }
table { border-collapse: collapse; margin-bottom: 1em; }
th, td { padding: .2em .8em; text-align: right; border-bottom: 1px solid #ddd; font-variant-numeric: tabular-nums; }
th:first-child, td:first-child { text-align: left; }
tr.baseline td { font-weight: 600; background: #f4f6fa; }
figure { margin: 1.5em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: .9em; }
.meta { color: #555; }
`

var page = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>kueuelab report · {{.R.Name}}</title>
<style>
{{.Style}}</style>
</head>
<body>
<h1>kueuelab report · {{.R.Name}}</h1>
<p class="meta">Generated {{.Generated}}. Baseline: <b>{{.R.Baseline}}</b>.
Variants (finished repeats; what decided): {{range $i, $v := .R.Variants}}{{if $i}}, {{end}}{{$v}} ({{index $.R.Repeats $i}}; {{index $.R.Ran $i}}){{end}}.
Each value is the mean over repeats with its 95% confidence interval (t-distribution; n/a with one repeat);
deltas are against the baseline, with the paired 95% interval of the per-repeat differences (repeat k of every variant replays the same trace).
Times are trace time.</p>
<h2>Plots</h2>
{{range .Plots}}<figure><img alt="{{.Title}}" src="{{.URI}}"><figcaption>{{.Caption}}</figcaption></figure>
{{end}}
<h2>Tables</h2>
{{range .Tables}}<h3>{{.Title}}</h3>
<table>
<tr><th>variant</th><th>n</th><th>mean</th><th>95% CI</th><th>delta</th><th>delta %</th><th>delta 95% CI</th></tr>
{{range .Cells}}<tr{{if .Baseline}} class="baseline"{{end}}><td>{{.Variant}}</td><td>{{.N}}</td><td>{{.Mean}}</td><td>{{.CI}}</td><td>{{.Delta}}</td><td>{{.DeltaPct}}</td><td>{{.DeltaCI}}</td></tr>
{{end}}</table>
{{end}}
</body>
</html>
`))

// WriteHTML writes the report as one HTML file with the plots embedded as data URIs, so it opens
// from disk without a server.
func WriteHTML(w io.Writer, r *Report, plots []Plot, generated time.Time) error {
	type fig struct {
		Title, Caption string
		URI            template.URL
	}
	type tab struct {
		Title string
		Cells []Cells
	}
	data := struct {
		Style     template.CSS
		R         *Report
		Generated string
		Plots     []fig
		Tables    []tab
	}{Style: Style, R: r, Generated: generated.UTC().Format(time.RFC3339)}
	for _, p := range plots {
		// The URI is built here from PNG bytes only, so marking it safe cannot inject markup.
		data.Plots = append(data.Plots, fig{Title: p.Title, Caption: p.Caption,
			URI: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(p.PNG))})
	}
	for i := range r.Tables {
		t := &r.Tables[i]
		data.Tables = append(data.Tables, tab{Title: t.Title(), Cells: t.Format(r.Baseline)})
	}
	return page.Execute(w, data)
}
