package forecast

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/kueuelab/kueuelab/model/trace"
)

// minGroup is the fewest observations a family needs before its durations are drawn from it
// alone rather than from every workload's.
const minGroup = 10

// obs is one duration: seen whole (a finished workload) or only its first part (a running one,
// censored at what it has run so far).
type obs struct {
	sec      float64
	censored bool
}

// durations is the Kaplan–Meier estimate of how long workloads run, per family and in all, from
// the finished workloads of a history and the running ones of the state. The running ones
// matter: at any instant the finished ones are the short ones, and durations drawn from them
// alone would be too short.
type durations struct {
	all      *km
	byFamily map[trace.Family]*km
	finished int
}

// km is a Kaplan–Meier survival curve: S(t[i]) = s[i], a step down at each finished duration.
type km struct {
	t, s []float64
	max  float64 // the longest observation, finished or censored
}

func newKM(os []obs) *km {
	slices.SortFunc(os, func(a, b obs) int {
		if a.sec != b.sec {
			if a.sec < b.sec {
				return -1
			}
			return 1
		}
		// At a tie, a finished duration counts before a censored one (the usual convention).
		if a.censored == b.censored {
			return 0
		}
		if !a.censored {
			return -1
		}
		return 1
	})
	k := &km{}
	s, atRisk := 1.0, float64(len(os))
	for _, o := range os {
		if !o.censored {
			s *= 1 - 1/atRisk
			k.t, k.s = append(k.t, o.sec), append(k.s, s)
		}
		atRisk--
		k.max = max(k.max, o.sec)
	}
	return k
}

// survival is S(x): the share of workloads that run longer than x.
func (k *km) survival(x float64) float64 {
	i, _ := slices.BinarySearch(k.t, x)
	for i < len(k.t) && k.t[i] <= x {
		i++
	}
	if i == 0 {
		return 1
	}
	return k.s[i-1]
}

// draw is a duration longer than elapsed: the curve inverted at a uniform share of what survives
// elapsed. Past the last finished duration the curve says only that some run longer than the
// longest observation; such a draw is that observation times 1 plus an exponential of mean 1.
func (k *km) draw(elapsed float64, rng *rand.Rand) float64 {
	target := k.survival(elapsed) * rng.Float64()
	i, _ := slices.BinarySearch(k.t, elapsed)
	for ; i < len(k.t); i++ {
		if k.t[i] > elapsed && k.s[i] <= target {
			return k.t[i]
		}
	}
	return max(k.max, elapsed) * (1 + rng.ExpFloat64())
}

func newDurations(history []*trace.Workload, running map[*trace.Workload]float64) *durations {
	d := &durations{byFamily: map[trace.Family]*km{}}
	all := []obs{}
	fam := map[trace.Family][]obs{}
	add := func(w *trace.Workload, o obs) {
		all = append(all, o)
		fam[w.WorkloadType] = append(fam[w.WorkloadType], o)
	}
	for _, w := range history {
		if w.DurationSec > 0 {
			add(w, obs{sec: w.DurationSec})
			d.finished++
		}
	}
	for w, ran := range running {
		add(w, obs{sec: ran, censored: true})
	}
	if d.finished == 0 {
		return d
	}
	d.all = newKM(all)
	for f, os := range fam {
		if len(os) >= minGroup {
			d.byFamily[f] = newKM(os)
		}
	}
	return d
}

// n is the number of finished workloads the estimate has.
func (d *durations) n() int { return d.finished }

// remaining draws the work left of w after elapsed seconds of it, from its family's curve (or
// every workload's).
func (d *durations) remaining(w *trace.Workload, elapsed float64, rng *rand.Rand) float64 {
	k := d.all
	if w != nil && d.byFamily[w.WorkloadType] != nil {
		k = d.byFamily[w.WorkloadType]
	}
	return math.Max(k.draw(elapsed, rng)-elapsed, 1)
}
