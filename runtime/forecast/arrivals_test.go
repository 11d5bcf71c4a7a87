package forecast

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// arrivalInput is an input on small (three teams) whose history is workloads of team-a submitted
// at the offsets ats and whose state, at now, holds one pending workload of team-b submitted at
// liveAt.
func arrivalInput(t *testing.T, origin string, now, liveAt float64, ats ...float64) *input {
	t.Helper()
	spec, err := rcluster.Parse("small.yaml", []byte(small))
	if err != nil {
		t.Fatal(err)
	}
	in := &input{spec: spec, tr: &trace.Trace{}, byID: map[string]*trace.Workload{}}
	for i, at := range ats {
		in.finished = append(in.finished, &trace.Workload{WorkloadID: fmt.Sprint("h", i), Namespace: "team-a", SubmitTimeOffsetSec: at, DurationSec: 100, WorkloadType: trace.SingleGPUTraining})
	}
	live := &trace.Workload{WorkloadID: "p", Namespace: "team-b", SubmitTimeOffsetSec: liveAt, DurationSec: 50, WorkloadType: trace.DebugEval}
	in.tr.Workloads, in.byID["p"] = []*trace.Workload{live}, live
	in.tr.Jobs = map[string][]*trace.Job{"p": {{JobID: "p-0", WorkloadID: "p", Namespace: "team-b", Work: trace.Work{GPUUnits: 10}}}}
	in.st = &state.State{NowSec: now, ClockOrigin: origin, Workloads: []state.Workload{{ID: "p", Phase: state.Pending, CreatedSec: liveAt}}}
	return in
}

// TestFitArrivals derives each fit by hand: a queue's rate is (1 + what it submitted after the
// first workload seen, which opens the window) over (the prior's exposure, 30 s x 3 queues, + the
// window's exposure weighted by the day's shape).
func TestFitArrivals(t *testing.T) {
	p, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	prior := p.Arrival.HourlyMultipliers
	mean := 0.0
	for _, m := range prior {
		mean += m / 24
	}

	t.Run("ten hours: the generator's day shape", func(t *testing.T) {
		var ats []float64
		for i := range 30 {
			ats = append(ats, float64(i)*1200) // 0 .. 34,800 s
		}
		m, err := arrivalInput(t, "", 36000, 36000, ats...).fitArrivals()
		if err != nil {
			t.Fatal(err)
		}
		e := 0.0 // hours 0-9 of trace time, whole
		for h := range 10 {
			e += 3600 * prior[h] / mean
		}
		want := map[string]QueueArrivals{
			"team-a": {Queue: "team-a", Seen: 30, PerHour: 30 / (90 + e) * 3600, Shapes: 30}, // h0 opens the window
			"team-b": {Queue: "team-b", Seen: 1, PerHour: 2 / (90 + e) * 3600, Shapes: 31, Pooled: true},
			"team-c": {Queue: "team-c", Seen: 0, PerHour: 1 / (90 + e) * 3600, Shapes: 31, Pooled: true},
		}
		if m.fit.DayShape != "generator prior" || m.fit.WindowSec != 36000 || m.fit.Seen != 31 || len(m.fit.Queues) != 3 {
			t.Fatalf("fit %+v", m.fit)
		}
		for _, q := range m.fit.Queues {
			w := want[q.Queue]
			if q.Seen != w.Seen || q.Shapes != w.Shapes || q.Pooled != w.Pooled || math.Abs(q.PerHour-w.PerHour) > 1e-9 {
				t.Errorf("%s: %+v, want %+v", q.Queue, q, w)
			}
		}
	})

	t.Run("three days from 09:30 UTC: the window's own shape", func(t *testing.T) {
		// The live workload (team-b) opens the window at the clock's 0, 09:30 UTC; team-a submits
		// once in each of the hours 09:00-16:59 of three days (the first at 09:50). The window's
		// three days cover every hour of the day for three hours.
		var ats []float64
		for d := range 3 {
			for h := 9; h < 17; h++ {
				ats = append(ats, float64(d*86400)+float64(h-9)*3600+1200)
			}
		}
		m, err := arrivalInput(t, "2026-12-07T09:30:00Z", 3*86400, 0, ats...).fitArrivals()
		if err != nil {
			t.Fatal(err)
		}
		if m.fit.DayShape != "history" {
			t.Fatalf("day shape from %s", m.fit.DayShape)
		}
		// Eight hours at one rate r, sixteen at none, raised to the floor 0.01 r: the day's mean
		// is (8 + 16 x 0.01) r / 24 = 0.34 r, so the multipliers are 1/0.34 and 0.01/0.34.
		for h, x := range m.fit.HourlyMultipliers {
			want := 0.01 / 0.34
			if h >= 9 && h < 17 {
				want = 1 / 0.34
			}
			if math.Abs(x-want) > 1e-12 {
				t.Errorf("hour %02d: multiplier %g, want %g", h, x, want)
			}
		}
		e := 3 * 3600 * 24.0 // every hour three times, the multipliers summing to 24
		if q := m.fit.Queues[0]; q.Queue != "team-a" || q.Seen != 24 || math.Abs(q.PerHour-25/(90+e)*3600) > 1e-9 {
			t.Errorf("team-a: %+v, want %g/h", q, 25/(90+e)*3600)
		}
		if q := m.fit.Queues[1]; q.Queue != "team-b" || q.Seen != 1 || math.Abs(q.PerHour-1/(90+e)*3600) > 1e-9 {
			t.Errorf("team-b: %+v, want %g/h: its one workload opened the window", q, 1/(90+e)*3600)
		}
	})

	t.Run("too short a window", func(t *testing.T) {
		if _, err := arrivalInput(t, "", 1800, 1800, 0, 600).fitArrivals(); err == nil || !strings.Contains(err.Error(), "over 30m0s only") {
			t.Errorf("a 30-minute window: %v, want a refusal", err)
		}
	})
}

// TestArrivalDraws: over many runs the arrivals of a queue number what the fitted process says
// (a Poisson count whose rate is Gamma: mean a/b x S, variance that plus a/b^2 x S^2, S the
// day's shape integrated over the horizon), fall in the hours it says, and are whole workloads of
// their queue with job records of their own.
func TestArrivalDraws(t *testing.T) {
	var ats []float64
	for i := range 30 {
		ats = append(ats, float64(i)*1200)
	}
	in := arrivalInput(t, "", 36000, 36000, ats...)
	m, err := in.fitArrivals()
	if err != nil {
		t.Fatal(err)
	}
	q := m.queues[0]
	const runs, horizon = 1000, 86400.0 // a whole day: S = 86,400 s x the shape's mean, 1
	mu := q.alpha / q.beta * horizon
	sd := math.Sqrt((mu + q.alpha/(q.beta*q.beta)*horizon*horizon) / runs)
	rng := rand.New(rand.NewPCG(7, 8))
	hist := newDurations(in.finished, nil)
	var byHour [24]float64
	total := 0.0
	for r := range runs {
		ws, jobs := m.draw(36000+horizon, hist, rng)
		seen := map[string]bool{}
		for _, w := range ws {
			if w.SubmitTimeOffsetSec <= 36000 || w.SubmitTimeOffsetSec > 36000+horizon || seen[w.WorkloadID] || w.DurationSec != 100 {
				t.Fatalf("run %d: arrival %+v", r, w)
			}
			seen[w.WorkloadID] = true
			if w.Namespace == "team-a" {
				total++
				byHour[gen.HourOf(w.SubmitTimeOffsetSec)]++
			}
			if w.WorkloadType == trace.DebugEval { // a copy of the live workload: its jobs, rewritten
				js := jobs[w.WorkloadID]
				if len(js) != 1 || js[0].WorkloadID != w.WorkloadID || js[0].Namespace != w.Namespace || js[0].Work.GPUUnits != 10*100/50.0 {
					t.Fatalf("run %d: jobs of %s: %+v", r, w.WorkloadID, js)
				}
			}
		}
	}
	if got := total / runs; math.Abs(got-mu) > 4*sd {
		t.Errorf("team-a: %.2f arrivals a day on average, want %.2f ± %.2f", got, mu, 4*sd)
	}
	// Every hour's share of the arrivals is its multiplier's share of the day (within 15%).
	for h, x := range byHour {
		want := m.shape[h] / 24
		if got := x / total; math.Abs(got-want) > 0.15*want {
			t.Errorf("hour %02d: %.4f of the arrivals, want %.4f", h, got, want)
		}
	}
}

// TestForecastWithHistoryArrivals: a standard job waits for a 16-GPU job to end at 37,000 s;
// its team submitted a performance job every 20 minutes all day. With arrivals none it starts
// when the holder ends, 1,000 s after the state; with arrivals from the history, a performance
// job arriving meanwhile goes first (Kueue orders by priority; no preemption here), so it starts
// then or later, and later in a share of the runs.
func TestForecastWithHistoryArrivals(t *testing.T) {
	perf := func(line string) string {
		return strings.Replace(line, `"intentClass":"standard"`, `"intentClass":"performance"`, 1)
	}
	var lines []string
	for i := range 29 {
		lines = append(lines, perf(handWorkload(fmt.Sprint("perf-", i), "distributed_training", float64(i)*1200, 100, 2, 8)))
	}
	lines = append(lines, handWorkload("holder", "distributed_training", 35000, 2000, 2, 8), handWorkload("waiting", "distributed_training", 35500, 600, 2, 8))
	noPreemption := strings.Replace(small, "  preemption: {withinClusterQueue: LowerPriority}\n", "", 1)
	dir := handStateOn(t, noPreemption, 36000, lines...)
	base, err := Run(context.Background(), Options{Dir: dir, Repeats: 2, Seed: 1, Arrivals: state.ArrivalsNone})
	if err != nil {
		t.Fatal(err)
	}
	if len(base.Workloads) != 1 || base.Workloads[0].P50 == nil || math.Abs(*base.Workloads[0].P50-1000) > 2 {
		t.Fatalf("without arrivals: %+v, want the waiting job at 1,000 s", base.Workloads)
	}
	rep, err := Run(context.Background(), Options{Dir: dir, Repeats: 20, Seed: 1, Arrivals: ArrivalsHistory})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Arrivals != ArrivalsHistory || rep.ArrivalFit == nil || rep.ArrivalFit.Queues[0].Seen != 31 {
		t.Fatalf("arrivals %s, fit %+v: want team-a's 29 finished and 2 live workloads", rep.Arrivals, rep.ArrivalFit)
	}
	w := rep.Workloads[0]
	later := 0
	for _, eta := range w.ETAs {
		if eta >= 0 && eta < *base.Workloads[0].P50-1 {
			t.Errorf("a run admitted it at %g s, before the holder ends", eta)
		}
		if eta < 0 || eta > *base.Workloads[0].P50+50 {
			later++
		}
	}
	if later < 4 {
		t.Errorf("ETAs %v: a performance job arrives within 1,000 s in about half the runs (31 in 10 h), yet %d of 20 runs are later", w.ETAs, later)
	}
	t.Logf("team-a %.2f/h; ETAs %v", rep.ArrivalFit.Queues[0].PerHour, w.ETAs)
}
