package forecast

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// svgShape is a box, p50 tick or gridline of the page, with its x positions.
type svgShape struct {
	class, workload string
	x1, x2          float64
	label           string
}

// parsePage parses page as HTML, checks that its SVG is well-formed XML, and returns its
// shapes and its text.
func parsePage(t *testing.T, page []byte) ([]svgShape, string) {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatalf("the page does not parse as HTML: %v", err)
	}
	start, end := bytes.Index(page, []byte("<svg")), bytes.Index(page, []byte("</svg>"))
	if start < 0 || end < start {
		t.Fatal("the page has no inline SVG")
	}
	dec := xml.NewDecoder(bytes.NewReader(page[start : end+len("</svg>")]))
	for {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not well-formed: %v", err)
		}
	}
	var shapes []svgShape
	var text strings.Builder
	num := func(n *html.Node, key string) float64 {
		for _, a := range n.Attr {
			if a.Key == key {
				v, err := strconv.ParseFloat(a.Val, 64)
				if err != nil {
					t.Fatalf("<%s %s=%q>: %v", n.Data, key, a.Val, err)
				}
				return v
			}
		}
		return 0
	}
	attr := func(n *html.Node, key string) string {
		for _, a := range n.Attr {
			if a.Key == key {
				return a.Val
			}
		}
		return ""
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch {
		case n.Type == html.TextNode:
			text.WriteString(n.Data)
		case n.Type == html.ElementNode && n.Data == "script":
			t.Error("the page has a script")
		case n.Type == html.ElementNode && (n.Data == "link" || n.Data == "img"):
			t.Errorf("the page loads <%s>: it must be self-contained", n.Data)
		case n.Type == html.ElementNode && n.Data == "rect" && strings.HasPrefix(attr(n, "class"), "box"):
			x := num(n, "x")
			shapes = append(shapes, svgShape{class: "box", workload: attr(n, "data-workload"), x1: x, x2: x + num(n, "width")})
		case n.Type == html.ElementNode && n.Data == "line" && attr(n, "class") == "p50":
			shapes = append(shapes, svgShape{class: "p50", workload: attr(n, "data-workload"), x1: num(n, "x1"), x2: num(n, "x2")})
		case n.Type == html.ElementNode && n.Data == "line" && (attr(n, "class") == "grid" || attr(n, "class") == "edge"):
			label := ""
			if s := n.NextSibling; s != nil && s.Data == "text" && s.FirstChild != nil {
				label = s.FirstChild.Data
			}
			shapes = append(shapes, svgShape{class: "grid", x1: num(n, "x1"), x2: num(n, "x2"), label: label})
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return shapes, text.String()
}

func TestHTMLPlotsTheETAs(t *testing.T) {
	etas := func(xs ...float64) []float64 { return xs }
	rep := &Report{State: "snap", Source: "kubeconfig k", NowSec: 7200, Repeats: 5, HorizonSec: 7 * 24 * 3600, Arrivals: "history", Known: 3, Drawn: 2, History: 40,
		ArrivalFit: &ArrivalFit{Seen: 45, DayShape: "generator prior", Queues: []QueueArrivals{{Queue: "team-a", Seen: 40, PerHour: 12.5}, {Queue: "team-b", Seen: 5, PerHour: 1.25, Pooled: true}}},
		Workloads: []Workload{
			{ID: "team-a-job-slow", Namespace: "team-a", Queue: "q", WaitedSec: 600, P10: ptr(5000), P50: ptr(20000), P90: ptr(90000), ETAs: etas(5000, 9000, 20000, 40000, 90000)},
			{ID: "team-b-job-fast", Namespace: "team-b", Queue: "q", WaitedSec: 60, P10: ptr(30), P50: ptr(3600), P90: ptr(4000), ETAs: etas(30, 100, 3600, 3900, 4000)},
			{ID: "team-a-job-new", Namespace: "team-a", Queue: "q", Manifest: "job.yaml/new", P10: ptr(900), P50: ptr(7000), ETAs: etas(900, 1000, 7000, -1, -1), NotAdmitted: 0.4},
			{ID: "team-c-job-never", Namespace: "team-c", Queue: "q", WaitedSec: 86400, ETAs: etas(-1, -1, -1, -1, -1), NotAdmitted: 1},
		}}
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	shapes, text := parsePage(t, b.Bytes())
	for _, want := range []string{"team-a-job-slow", "team-b-job-fast", "job.yaml/new (submitted now)", "team-c-job-never", "snap", "5 runs", "3 known, 2 drawn from 40 finished workloads",
		"Arrivals fitted to the 45 workloads seen (day shape: generator prior): team-a 12.50/h (40 seen), team-b 1.25/h (5 seen)"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	grid := map[string]float64{}
	boxes, p50s := map[string]svgShape{}, map[string]svgShape{}
	for _, s := range shapes {
		switch s.class {
		case "grid":
			grid[s.label] = s.x1
		case "box":
			if _, dup := boxes[s.workload]; dup {
				t.Errorf("%s: two boxes", s.workload)
			}
			boxes[s.workload] = s
		case "p50":
			p50s[s.workload] = s
		}
	}
	for _, g := range []string{"15m", "1h", "4h", "24h"} {
		if _, ok := grid[g]; !ok {
			t.Errorf("no %s gridline", g)
		}
	}
	if !(grid["15m"] < grid["1h"] && grid["1h"] < grid["4h"] && grid["4h"] < grid["24h"]) {
		t.Errorf("gridlines out of order: %v", grid)
	}
	// A log axis: 15m→1h and 1h→4h are both a factor of 4, so equally wide.
	if d1, d2 := grid["1h"]-grid["15m"], grid["4h"]-grid["1h"]; d1 <= 0 || d2/d1 < 0.99 || d2/d1 > 1.01 {
		t.Errorf("15m→1h is %g wide, 1h→4h %g: not a log axis", d1, d2)
	}
	// team-b's p50 is exactly an hour: its tick is on the 1h gridline.
	if got := p50s["team-b-job-fast"].x1; got < grid["1h"]-0.2 || got > grid["1h"]+0.2 {
		t.Errorf("p50 of 1h drawn at x %g, the 1h gridline at %g", got, grid["1h"])
	}
	withBox := 0
	for _, w := range rep.Workloads {
		bx, ok := boxes[w.ID]
		if (w.P10 != nil) != ok {
			t.Errorf("%s: box %v with p10 %v", w.ID, ok, w.P10)
			continue
		}
		if !ok {
			continue
		}
		withBox++
		if p := p50s[w.ID].x1; !(bx.x1 <= p && p <= bx.x2) {
			t.Errorf("%s: p50 at %g outside its box %g-%g", w.ID, p, bx.x1, bx.x2)
		}
		// The positions order as the values do, pair by pair.
		for _, v := range rep.Workloads {
			by, ok := boxes[v.ID]
			if !ok {
				continue
			}
			if a, b := cmp.Compare(*w.P10, *v.P10), cmp.Compare(bx.x1, by.x1); a != b {
				t.Errorf("p10 %s vs %s compare %d, their boxes' left edges %d", w.ID, v.ID, a, b)
			}
			if a, b := cmp.Compare(*w.P50, *v.P50), cmp.Compare(p50s[w.ID].x1, p50s[v.ID].x1); a != b {
				t.Errorf("p50 %s vs %s compare %d, their ticks %d", w.ID, v.ID, a, b)
			}
			if w.P90 != nil && v.P90 != nil {
				if a, b := cmp.Compare(*w.P90, *v.P90), cmp.Compare(bx.x2, by.x2); a != b {
					t.Errorf("p90 %s vs %s compare %d, their boxes' right edges %d", w.ID, v.ID, a, b)
				}
			}
		}
	}
	if withBox != 3 || len(boxes) != 3 {
		t.Errorf("%d boxes for %d workloads admitted in a run", len(boxes), withBox)
	}
	// A p90 among the runs that did not admit: the box reaches the horizon's edge.
	if open, right := boxes["team-a-job-new"].x2, boxes["team-a-job-slow"].x2; open <= right {
		t.Errorf("an open box ends at %g, before the p90 of 25h at %g", open, right)
	}
	if n := strings.Count(b.String(), `class="never"`); n != 2 {
		t.Errorf("%d not-admitted markers, want 2 (the new job's and the one never admitted)", n)
	}
}

// TestHTMLOfAForecast: the page of a real forecast names every pending workload, the -f jobs
// too.
func TestHTMLOfAForecast(t *testing.T) {
	dir := emptyState(t)
	path := filepath.Join(t.TempDir(), "jobs.yaml")
	if err := os.WriteFile(path, []byte(job()+"---\n"+job("name: train", "name: eval")), 0o644); err != nil {
		t.Fatal(err)
	}
	jobs, err := ReadJobs([]string{path}, "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 3, Seed: 1, Jobs: jobs})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, rep); err != nil {
		t.Fatal(err)
	}
	shapes, text := parsePage(t, b.Bytes())
	for _, w := range rep.Workloads {
		if !strings.Contains(text, w.Manifest) || w.Manifest == "" {
			t.Errorf("%s (%q): not named on the page", w.ID, w.Manifest)
		}
	}
	boxes := 0
	for _, s := range shapes {
		if s.class == "box" {
			boxes++
		}
	}
	if len(rep.Workloads) != 2 || boxes != 2 {
		t.Errorf("%d workloads, %d boxes: want the two jobs, a box each", len(rep.Workloads), boxes)
	}
}
