package forecast

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
)

// ArrivalsHistory is the Options.Arrivals value that adds arrivals drawn from a process fitted to
// the state's history: what a forecast of a live cluster has, where nobody recorded the future.
const ArrivalsHistory = "history"

// minShapeDays is the shortest window whose own hourly counts make the day's shape (each hour
// seen at least twice); a shorter one takes the generator's.
const minShapeDays = 2

// ArrivalFit is the arrival process a forecast fitted to the history (Arrivals "history").
//
// Each queue (a team: one LocalQueue) submits by a Poisson process whose rate is its level times
// the hour of day's multiplier. The day's shape (multipliers of mean 1) is the window's own
// hourly rates when it spans minShapeDays or more, else the generator profile's. A queue's level
// has a Gamma posterior: the prior one arrival's worth of the generator's rate split evenly over
// the queues (so a queue never seen still submits now and then), the evidence the workloads it
// submitted in the window (finished or alive) over the window's shape-weighted exposure. Every
// run draws a level from that posterior (the rate's own uncertainty), then the arrivals; each is
// a copy of a workload the queue submitted in the window (every queue's when it has fewer than
// minGroup), its work drawn from the run's duration curve like a pending workload's.
type ArrivalFit struct {
	// WindowSec is the span of the evidence: from the first workload seen to the state's instant.
	WindowSec float64 `json:"windowSec"`
	// Seen counts the workloads the window holds (finished, admitted and pending).
	Seen int `json:"seen"`
	// DayShape says where the hourly shape comes from: "history" or "generator prior".
	DayShape string `json:"dayShape"`
	// HourlyMultipliers is the shape, hour 0 first (UTC for a cluster's snapshot, trace hours for
	// a replay's).
	HourlyMultipliers []float64       `json:"hourlyMultipliers"`
	Queues            []QueueArrivals `json:"queues"`
}

// QueueArrivals is one queue's fitted arrivals.
type QueueArrivals struct {
	// Queue is the team: the trace namespace whose LocalQueue it is.
	Queue string `json:"queue"`
	// Seen counts the workloads it submitted in the window.
	Seen int `json:"seen"`
	// PerHour is the posterior mean of its arrivals an hour over a day.
	PerHour float64 `json:"perHour"`
	// Shapes counts the workloads its arrivals are copies of; Pooled says they are every queue's
	// (its own are fewer than minGroup).
	Shapes int  `json:"shapes"`
	Pooled bool `json:"pooled,omitempty"`
}

// arrivalModel is an ArrivalFit with what its runs draw from.
type arrivalModel struct {
	fit   ArrivalFit
	shape [24]float64
	// offset puts a time of the state's clock on a clock whose 0 is a midnight, ≥ 0 over the
	// window and after it.
	offset float64
	nowSec float64
	queues []queueModel
	// jobs are the job records of the workloads the arrivals copy (the live ones have them; a
	// history's finished ones need none: their shape is their pod groups).
	jobs map[string][]*trace.Job
}

type queueModel struct {
	name        string
	alpha, beta float64 // the level's Gamma posterior (arrivals a second at multiplier 1)
	pool        []*trace.Workload
}

// fitArrivals fits the arrival process of in's history and live workloads.
func (in *input) fitArrivals() (*arrivalModel, error) {
	p, err := gen.DefaultProfile()
	if err != nil {
		return nil, err
	}
	now := in.st.NowSec
	seen := slices.Clone(in.finished)
	for _, w := range in.st.Workloads {
		if tw := in.byID[w.ID]; tw != nil {
			seen = append(seen, tw)
		}
	}
	m := &arrivalModel{nowSec: now, jobs: in.tr.Jobs}
	start := now
	byQueue := map[string][]*trace.Workload{}
	for _, w := range seen {
		start = math.Min(start, w.SubmitTimeOffsetSec)
		q, err := in.spec.TeamOf(w.Namespace)
		if err != nil {
			return nil, fmt.Errorf("forecast: arrivals: workload %s: %w", w.WorkloadID, err)
		}
		byQueue[q] = append(byQueue[q], w)
	}
	for _, t := range in.spec.Teams {
		if _, ok := byQueue[t.Name]; !ok {
			byQueue[t.Name] = nil
		}
	}
	// The clock's 0 as a time of day: a cluster's origin in UTC, else a midnight.
	if in.st.ClockOrigin != "" {
		o, err := time.Parse(time.RFC3339Nano, in.st.ClockOrigin)
		if err != nil {
			return nil, fmt.Errorf("forecast: clockOrigin: %w", err)
		}
		o = o.UTC()
		m.offset = float64(o.Hour()*3600+o.Minute()*60+o.Second()) + float64(o.Nanosecond())/1e9
	}
	const day = 24 * 3600
	if start+m.offset < 0 {
		m.offset += day * math.Ceil(-(start+m.offset)/day)
	}
	var count, exposure [24]float64
	gen.AddExposure(&exposure, start+m.offset, now+m.offset)
	for _, w := range seen {
		count[gen.HourOf(w.SubmitTimeOffsetSec+m.offset)]++
	}
	m.fit = ArrivalFit{WindowSec: now - start, Seen: len(seen), DayShape: "generator prior"}
	copy(m.shape[:], p.Arrival.HourlyMultipliers)
	if m.fit.WindowSec >= minShapeDays*day {
		m.fit.DayShape = "history"
		for h := range m.shape {
			m.shape[h] = count[h] / exposure[h]
		}
	}
	// Mean 1 over the day, and no hour without arrivals at all: an hour the window saw none in
	// may still see one.
	mean := 0.0
	for _, x := range m.shape {
		mean += x / 24
	}
	for h := range m.shape {
		m.shape[h] = math.Max(m.shape[h]/mean, 0.01)
	}
	m.fit.HourlyMultipliers = m.shape[:]
	e := 0.0 // the window's exposure weighted by the shape
	for h := range exposure {
		e += exposure[h] * m.shape[h]
	}
	prior := 1 / (p.Arrival.MeanInterArrivalSec * float64(len(byQueue))) // a queue's level
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		own := byQueue[q]
		qm := queueModel{name: q, alpha: 1 + float64(len(own)), beta: 1/prior + e, pool: own}
		row := QueueArrivals{Queue: q, Seen: len(own), PerHour: qm.alpha / qm.beta * 3600, Shapes: len(own)}
		if len(own) < minGroup {
			qm.pool, row.Shapes, row.Pooled = seen, len(seen), true
		}
		m.fit.Queues = append(m.fit.Queues, row)
		m.queues = append(m.queues, qm)
	}
	return m, nil
}

// draw is one run's arrivals from the state's instant to until: their workloads, sorted by
// submission, and job records. hist draws their work (none: a copy keeps its workload's).
func (m *arrivalModel) draw(until float64, hist *durations, rng *rand.Rand) ([]*trace.Workload, map[string][]*trace.Job) {
	var out []*trace.Workload
	jobs := map[string][]*trace.Job{}
	peak := slices.Max(m.shape[:])
	for _, q := range m.queues {
		if len(q.pool) == 0 {
			continue
		}
		level := distuv.Gamma{Alpha: q.alpha, Beta: q.beta, Src: rng}.Rand()
		// Thinning: candidates at the peak rate, each kept with its hour's share of the peak.
		for t, k := m.nowSec, 0; ; {
			t += rng.ExpFloat64() / (level * peak)
			if t > until {
				break
			}
			if rng.Float64()*peak >= m.shape[gen.HourOf(t+m.offset)] {
				continue
			}
			src := q.pool[rng.IntN(len(q.pool))]
			d := src.DurationSec
			if hist.n() > 0 {
				d = hist.remaining(src, 0, rng)
			}
			scaled, srcJobs := trace.WithDuration(src, m.jobs[src.WorkloadID], d)
			w := *scaled
			k++
			w.WorkloadID = fmt.Sprintf("arrival-%s-%d", q.name, k)
			w.Namespace, w.SubmitTimeOffsetSec = q.name, t
			js := make([]*trace.Job, len(srcJobs))
			for i, j := range srcJobs {
				c := *j
				c.JobID = fmt.Sprintf("%s-%d", w.WorkloadID, i)
				c.WorkloadID, c.Namespace, c.SubmitTimeOffsetSec = w.WorkloadID, q.name, t
				js[i] = &c
			}
			out = append(out, &w)
			if len(js) > 0 {
				jobs[w.WorkloadID] = js
			}
		}
	}
	trace.SortWorkloads(out)
	return out, jobs
}
