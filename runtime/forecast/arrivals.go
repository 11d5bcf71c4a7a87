package forecast

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
)

// ArrivalsHistory is the Options.Arrivals value that adds arrivals drawn from a process fitted to
// the state's history: what a forecast of a live cluster has, where nobody recorded the future.
const ArrivalsHistory = "history"

// minWindowSec is the shortest window a rate is fitted over.
const minWindowSec = 3600

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
// submitted in the window (finished or alive; the first workload seen opens the window and is not
// counted) over the window's shape-weighted exposure. No hour is below 1 % of the busiest. Every
// run draws a level from that posterior (the rate's own uncertainty), then the arrivals; each is
// a copy of a workload the queue submitted in the window (every queue's when it has fewer than
// minGroup), its work drawn from the run's duration curve like a pending workload's.
type ArrivalFit struct {
	// WindowSec is the span of the evidence: from the first workload seen to the state's instant.
	WindowSec float64 `json:"windowSec"`
	// Seen counts the workloads the window holds (finished, admitted and pending), the first of
	// which opens it and is not counted as an arrival; Unmapped those of namespaces that map to
	// no queue of the spec (left out).
	Seen     int `json:"seen"`
	Unmapped int `json:"unmapped,omitempty"`
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
	// prefix starts the drawn arrivals' ids (no workload of the state has it).
	prefix string
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
	m := &arrivalModel{nowSec: now, jobs: in.tr.Jobs, prefix: arrivalPrefix(seen, in.tr.Workloads)}
	queueOf := map[*trace.Workload]string{}
	var first *trace.Workload
	byQueue := map[string][]*trace.Workload{}
	for _, t := range in.spec.Teams {
		byQueue[t.Name] = nil
	}
	for _, w := range seen {
		q, err := in.spec.TeamOf(w.Namespace)
		if err != nil {
			m.fit.Unmapped++ // a queue the spec does not have: it submits nothing more here
			continue
		}
		queueOf[w] = q
		byQueue[q] = append(byQueue[q], w)
		if first == nil || w.SubmitTimeOffsetSec < first.SubmitTimeOffsetSec ||
			(w.SubmitTimeOffsetSec == first.SubmitTimeOffsetSec && w.WorkloadID < first.WorkloadID) {
			first = w
		}
	}
	if first == nil {
		return nil, fmt.Errorf("forecast: --arrivals history: the state %s has seen no workload of its queues to fit arrivals to: use --arrivals none", in.st.Trace)
	}
	// The window opens at the first workload seen, which is not counted in it (a Poisson
	// process's count over (first, now]), so that a short history does not make a burst.
	start := first.SubmitTimeOffsetSec
	if now-start < minWindowSec {
		return nil, fmt.Errorf("forecast: --arrivals history: the state has seen workloads over %s only (from the first one, %s, to now): a rate needs an hour at least; use --arrivals none",
			time.Duration((now-start)*float64(time.Second)).Round(time.Second), first.WorkloadID)
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
	counted := map[string]int{}
	for w, q := range queueOf {
		if w != first {
			count[gen.HourOf(w.SubmitTimeOffsetSec+m.offset)]++
			counted[q]++
		}
	}
	m.fit.WindowSec, m.fit.Seen, m.fit.DayShape = now-start, len(queueOf), "generator prior"
	copy(m.shape[:], p.Arrival.HourlyMultipliers)
	if m.fit.WindowSec >= minShapeDays*day {
		m.fit.DayShape = "history"
		for h := range m.shape {
			m.shape[h] = count[h] / exposure[h]
		}
	}
	// No hour without arrivals at all (an hour the window saw none in may still see one), then
	// mean 1 over the day.
	peak := slices.Max(m.shape[:])
	mean := 0.0
	for h := range m.shape {
		m.shape[h] = math.Max(m.shape[h], 0.01*peak)
		mean += m.shape[h] / 24
	}
	for h := range m.shape {
		m.shape[h] /= mean
	}
	m.fit.HourlyMultipliers = m.shape[:]
	e := 0.0 // the window's exposure weighted by the shape
	for h := range exposure {
		e += exposure[h] * m.shape[h]
	}
	prior := 1 / (p.Arrival.MeanInterArrivalSec * float64(len(byQueue))) // a queue's level
	var all []*trace.Workload
	for w := range queueOf {
		all = append(all, w)
	}
	trace.SortWorkloads(all)
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		own := byQueue[q]
		qm := queueModel{name: q, alpha: 1 + float64(counted[q]), beta: 1/prior + e, pool: own}
		row := QueueArrivals{Queue: q, Seen: len(own), PerHour: qm.alpha / qm.beta * 3600, Shapes: len(own)}
		if len(own) < minGroup {
			qm.pool, row.Shapes, row.Pooled = all, len(all), true
		}
		m.fit.Queues = append(m.fit.Queues, row)
		m.queues = append(m.queues, qm)
	}
	return m, nil
}

// arrivalPrefix is a prefix for the drawn arrivals' ids that no workload of the lists ws has.
func arrivalPrefix(ws ...[]*trace.Workload) string {
	for n := 0; ; n++ {
		prefix := "arrival-"
		if n > 0 {
			prefix = fmt.Sprintf("arrival%d-", n)
		}
		taken := false
		for _, list := range ws {
			taken = taken || slices.ContainsFunc(list, func(w *trace.Workload) bool { return strings.HasPrefix(w.WorkloadID, prefix) })
		}
		if !taken {
			return prefix
		}
	}
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
			w.WorkloadID = fmt.Sprintf("%s%s-%d", m.prefix, q.name, k)
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
