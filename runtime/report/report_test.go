package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/results"
)

var update = flag.Bool("update", false, "rewrite golden files")

func ptr(v float64) *float64 { return &v }

// synthRecords makes n workloads on queues qa and qb; wait scales queue qa's time-to-admission.
func synthRecords(rng *rand.Rand, n int, wait float64) []results.Record {
	fams := []trace.Family{"distributed_training", "single_gpu_training", "cpu_preprocess"}
	var recs []results.Record
	for i := 0; i < n; i++ {
		q := "qa"
		w := wait
		if i%3 == 0 {
			q, w = "qb", 60
		}
		sub := float64(i) * 120
		tta := w * (0.5 + rng.Float64())
		ideal := 600 + 600*rng.Float64()
		fin := sub + tta + ideal*(1+0.1*rng.Float64())
		r := results.Record{ID: fmt.Sprintf("w%03d", i), Namespace: q, Family: fams[i%3], Intent: "standard",
			LocalQueue: q + "-lq", Queue: q + "-cq", Pods: 1, GPUs: 8, IdealSec: ideal, GPUUtil: 0.8,
			SubmitOffsetSec: sub, Submitted: ptr(sub), WorkloadCreated: ptr(sub), QuotaReserved: ptr(sub + tta),
			Admitted: ptr(sub + tta), FirstPodRunning: ptr(sub + tta + 1), AllPodsRunning: ptr(sub + tta + w/10),
			Finished: ptr(fin), State: results.StateSucceeded, EnergyJ: 8 * 500 * (fin - sub - tta), GPUSeconds: 8 * (fin - sub - tta)}
		if i == n-1 {
			r.Finished, r.State = nil, results.StateUnfinished
		}
		recs = append(recs, r)
	}
	return recs
}

// writeRun writes a results directory as the runner would, with a done marker.
func writeRun(t *testing.T, dir string, recs []results.Record, variant string, rep int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The small variant is an upgrade what-if's other side: it ran an older Kueue.
	kueueVersion := "v0.19.2"
	if variant == "small" {
		kueueVersion = "v0.15.0"
	}
	kueue := &results.KueueMeta{Version: kueueVersion}
	if variant == "big" && rep == 2 {
		// One repeat of big ran with a control-plane model: the report lists it apart.
		kueue.ControlPlane = &controlplane.Model{Name: "kueue-perf-harness", QPS: 50, Burst: 100}
	}
	sum := results.Summarize(recs, results.Meta{Trace: "t.jsonl", Cluster: "c.yaml", Speedup: 1000, GPUCapacity: 64,
		Engine: results.EngineSim, Kueue: kueue})
	var b bytes.Buffer
	if err := sum.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(results.SummaryFile, b.Bytes())
	b.Reset()
	if err := results.WriteWorkloadsCSV(&b, recs); err != nil {
		t.Fatal(err)
	}
	write(results.WorkloadsFile, b.Bytes())
	// The events the quota held idle is computed from (results.Load does, without idle.csv).
	log, err := results.CreateEventLog(filepath.Join(dir, results.EventsFile), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		for _, e := range []results.Event{{T: *r.QuotaReserved, Type: results.EvQuotaReserved, Flavors: map[string]string{"main": "h100-sxm"}},
			{T: *r.AllPodsRunning, Type: results.EvAllPodsRunning}} {
			e.Workload = r.ID
			if err := log.Write(&e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	sw, err := results.CreateSeries(filepath.Join(dir, results.TimeSeriesFile))
	if err != nil {
		t.Fatal(err)
	}
	for ts := 0.0; ts <= 4*3600; ts += 600 {
		var inUse, reserved, pending int64
		for _, r := range recs {
			if *r.QuotaReserved <= ts && (r.Finished == nil || *r.Finished > ts) {
				reserved += r.GPUs
			}
			if *r.AllPodsRunning <= ts && (r.Finished == nil || *r.Finished > ts) {
				inUse += r.GPUs
			}
			if *r.Submitted <= ts && *r.Admitted > ts {
				pending++
			}
		}
		if err := sw.Write([]results.Sample{
			{T: ts, Scope: results.ScopeFlavor, Name: "h100-sxm", Reserved: reserved, InUse: inUse, NodePowerW: math.NaN()},
			{T: ts, Scope: results.ScopeClusterQueue, Name: "qa-cq", Pending: int(pending), NodePowerW: math.NaN()},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sw.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := json.Marshal(experiment.DoneMarker{Variant: variant, Repeat: rep, Summary: sum, FinishedAt: time.Unix(0, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	write(experiment.DoneFile, m)
}

// synthExperiment lays out an experiment output dir: 3 variants × 3 repeats, plus an
// unfinished repeat (no done marker) the report must ignore.
func synthExperiment(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	variants := []struct {
		name string
		wait float64
	}{{"small", 1800}, {"base", 900}, {"big", 300}}
	man := experiment.Manifest{Name: "synthetic", Baseline: "base", Repeats: 3}
	for vi, v := range variants {
		man.Variants = append(man.Variants, v.name)
		for k := 0; k < 3; k++ {
			rng := rand.New(rand.NewPCG(uint64(vi), uint64(k)))
			writeRun(t, filepath.Join(out, v.name, fmt.Sprintf("r%d", k)), synthRecords(rng, 30, v.wait), v.name, k)
		}
	}
	if err := os.MkdirAll(filepath.Join(out, "big", "r3"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(out, experiment.ManifestFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestReportGolden(t *testing.T) {
	in, err := Load([]string{synthExperiment(t)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if in.Baseline != "base" || len(in.Variants) != 3 || len(in.Variants[2].Runs) != 3 {
		t.Fatalf("loaded %s baseline %s, %d variants", in.Name, in.Baseline, len(in.Variants))
	}
	r := Compute(in)
	if want := []string{"sim engine, Kueue v0.15.0, control plane none", "sim engine, Kueue v0.19.2, control plane none",
		"sim engine, Kueue v0.19.2, control plane none; sim engine, Kueue v0.19.2, control plane kueue-perf-harness (client 50 QPS, burst 100)"}; !slices.Equal(r.Ran, want) {
		t.Errorf("what decided each variant: %q, want %q", r.Ran, want)
	}
	var got bytes.Buffer
	if err := r.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "report.golden.json")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("report tables differ from %s (rerun with -update to accept):\n%s", golden, got.String())
	}
	// Less waiting is what the synthetic variants were built with.
	for _, tb := range r.Tables {
		if tb.Metric == "time-to-admission mean" && tb.Scope == "queue qa-cq" {
			if !(*tb.Rows[0].Mean > *tb.Rows[1].Mean && *tb.Rows[1].Mean > *tb.Rows[2].Mean) {
				t.Errorf("mean TTA not decreasing with quota: %+v", tb.Rows)
			}
			if tb.Rows[1].Delta == nil || *tb.Rows[1].Delta != 0 || tb.Rows[0].DeltaCI == nil {
				t.Errorf("baseline delta / paired CI: %+v", tb.Rows)
			}
		}
	}
}

func TestMeanCIByHand(t *testing.T) {
	// t(0.975, 2) = (2p−1)·√(2 / (4p(1−p))) for 2 degrees of freedom = 4.302652729749461; s = 1.
	m, h := meanCI([]float64{1, 2, 3})
	if *m != 2 || math.Abs(*h-4.302652729749461/math.Sqrt(3)) > 1e-9 {
		t.Errorf("mean %v ± %v, want 2 ± 2.48413771175", *m, *h)
	}
	m, h = meanCI([]float64{5})
	if *m != 5 || h != nil {
		t.Errorf("one value: %v %v, want 5 and no interval", *m, h)
	}
	tb := Table{Rows: []Row{{Variant: "a", Values: []float64{5}, Mean: ptr(5)}}}
	if c := tb.Format("b")[0]; c.CI != "n/a" {
		t.Errorf("one repeat shows CI %q, want n/a", c.CI)
	}
}

func TestHTMLAndPlots(t *testing.T) {
	dir := synthExperiment(t)
	in, err := Load([]string{dir}, "big")
	if err != nil {
		t.Fatal(err)
	}
	r := Compute(in)
	plots, err := Plots(in, r)
	if err != nil {
		t.Fatal(err)
	}
	// One CDF per queue (2), GPU over time, reserved vs running, pending over time, energy, slowdown.
	if len(plots) != 7 {
		t.Fatalf("%d plots", len(plots))
	}
	for _, p := range plots {
		if !bytes.HasPrefix(p.PNG, []byte("\x89PNG")) {
			t.Errorf("%s: not a PNG", p.Title)
		}
		if dump := os.Getenv("KUEUELAB_REPORT_PNG_DIR"); dump != "" {
			name := strings.NewReplacer(" ", "_", "·", "", "/", "_").Replace(p.Title) + ".png"
			if err := os.WriteFile(filepath.Join(dump, name), p.PNG, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r, plots, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	if n := strings.Count(html, "<img "); n != len(plots) {
		t.Errorf("%d <img> for %d plots", n, len(plots))
	}
	if strings.Count(html, `src="data:image/png;base64,`) != len(plots) || strings.Contains(html, "http://") || strings.Contains(html, "https://") {
		t.Error("plots not embedded as data URIs, or the page references the network")
	}
	if !strings.Contains(html, `<tr class="baseline"><td>big</td>`) {
		t.Error("baseline row not marked")
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "time-to-admission mean · queue qa-cq (s)") {
		t.Errorf("text tables:\n%s", txt.String())
	}
	var csv bytes.Buffer
	if err := r.WriteCSV(&csv); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(csv.String(), "\n"); lines != 1+3*len(r.Tables) {
		t.Errorf("csv: %d lines for %d tables", lines, len(r.Tables))
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load([]string{dir}, ""); err == nil || !strings.Contains(err.Error(), "holds no results") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := Load([]string{synthExperiment(t)}, "nope"); err == nil || !strings.Contains(err.Error(), `--baseline "nope": no such variant (have small, base, big)`) {
		t.Errorf("bad baseline: %v", err)
	}
}

// A variant with MIG-partitioned GPUs gets their tables and one per profile, one with time-sliced
// GPUs theirs; a variant without them has no value there, not a zero.
func TestSliceTables(t *testing.T) {
	at := func(v float64) *float64 { return &v }
	recs := []results.Record{
		{ID: "a", Family: "debug_eval", Queue: "q", State: results.StateSucceeded, MIGProfile: "2g.20gb", SliceShare: 2.0 / 7,
			Submitted: at(0), Admitted: at(60), Finished: at(3600), GPUSeconds: 2.0 / 7 * 3540, GPUUtil: 0.9, EnergyJ: 3.6e6},
	}
	whole := []results.Record{
		{ID: "a", Family: "debug_eval", Queue: "q", State: results.StateSucceeded, GPUs: 1,
			Submitted: at(0), Admitted: at(0), Finished: at(3600), GPUSeconds: 3600, GPUUtil: 0.6, EnergyJ: 3.6e6},
	}
	// A pod on a replica of 4 (a quarter of a GPU) for an hour that used 0.6 of its GPU.
	shared := []results.Record{
		{ID: "a", Family: "debug_eval", Queue: "q", State: results.StateSucceeded, GPUs: 1,
			Submitted: at(0), Admitted: at(0), Finished: at(3600), GPUSeconds: 900, TimeSlicedGPUSeconds: 900, BusyGPUSeconds: 0.6 * 3600, GPUUtil: 0.6},
	}
	run := func(recs []results.Record, partitioned, timeSliced int64) Run {
		s := results.Summarize(recs, results.Meta{GPUCapacity: 16, PartitionedGPUs: partitioned, TimeSlicedGPUs: timeSliced, Engine: results.EngineSim})
		return Run{Repeat: 1, Dir: &results.Dir{Summary: s, Workloads: recs}}
	}
	in := &Input{Name: "mig", Baseline: "whole", Variants: []*Variant{
		{Name: "whole", Runs: []Run{run(whole, 0, 0)}},
		{Name: "mig", Runs: []Run{run(recs, 8, 0)}},
		{Name: "shared", Runs: []Run{run(shared, 0, 2)}},
	}}
	r := Compute(in)
	value := func(metric, scope, variant string) (float64, bool) {
		for _, tb := range r.Tables {
			if tb.Metric == metric && tb.Scope == scope {
				for _, row := range tb.Rows {
					if row.Variant == variant && row.Mean != nil {
						return *row.Mean, true
					}
				}
				return 0, false
			}
		}
		t.Fatalf("no table %q in scope %q", metric, scope)
		return 0, false
	}
	for _, tc := range []struct {
		metric, scope string
		want          float64
	}{
		{"MIG-partitioned GPUs allocated", "all", 100 * (2.0 / 7 * 3540) / (8 * 3600)},
		{"MIG-partitioned GPUs effective utilisation", "all", 100 * 0.9 * (2.0 / 7 * 3540) / (8 * 3600)},
		{"energy on slices per partitioned GPU", "all", 1.0 / 8},
		{"slice-hours", "mig 2g.20gb", 3540.0 / 3600},
		{"slice utilisation", "mig 2g.20gb", 90},
		{"time-to-admission p50", "mig 2g.20gb", 60},
	} {
		got, ok := value(tc.metric, tc.scope, "mig")
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s (%s): %v %v, want %v", tc.metric, tc.scope, got, ok, tc.want)
		}
		if _, ok := value(tc.metric, tc.scope, "whole"); ok {
			t.Errorf("%s (%s): the variant without MIG has a value", tc.metric, tc.scope)
		}
	}
	// On 2 time-sliced GPUs for an hour: a quarter GPU-hour held, 0.6 GPU-hour used.
	for metric, want := range map[string]float64{"time-sliced GPUs allocated": 100 * 900 / (2 * 3600.0), "time-sliced GPUs effective utilisation": 100 * 0.6 / 2} {
		if got, ok := value(metric, "all", "shared"); !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v %v, want %v", metric, got, ok, want)
		}
		if _, ok := value(metric, "all", "mig"); ok {
			t.Errorf("%s: the variant without time-sliced GPUs has a value", metric)
		}
	}
	// Effective utilisation counts the compute used on a replica, not the profile times the quarter held.
	if got, _ := value("GPU effective utilisation", "all", "shared"); math.Abs(got-100*0.6*3600/(16*3600)) > 1e-9 {
		t.Errorf("GPU effective utilisation %v%%, want %v%%", got, 100*0.6/16)
	}
}
