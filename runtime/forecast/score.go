package forecast

import (
	"fmt"
	"math"
	"slices"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Score is how a forecast compares with what happened.
type Score struct {
	Run string `json:"run"`
	// Workloads is the number of pending workloads scored; Inside how many were admitted inside
	// their forecast's p10-p90 interval (a workload never admitted is inside when its p90 is
	// beyond the horizon too).
	Workloads int `json:"workloads"`
	Inside    int `json:"inside"`
	// Unscored counts the pending workloads left out: what happened to them is not known.
	Unscored int `json:"unscored,omitempty"`
	// Coverage is Inside/Workloads, with its 95% Wilson score interval.
	Coverage     float64 `json:"coverage"`
	CoverageLow  float64 `json:"coverageLow"`
	CoverageHigh float64 `json:"coverageHigh"`
	// MedianAbsErrSec is the median of |p50 - actual| over the workloads admitted in both, and
	// Within60 how many of them had it within 60 s: the exactness an oracle forecast is held to.
	MedianAbsErrSec float64 `json:"medianAbsErrSec"`
	Within60        int     `json:"within60s"`
}

// ScoreAgainst scores r with the results of the replay its state was taken from, run to the end:
// each pending workload's first admission after the state's instant is the truth.
func ScoreAgainst(r *Report, d *results.Dir) Score {
	actual := map[string]float64{}
	for _, e := range d.Events {
		if e.Type == results.EvAdmitted && e.T >= r.NowSec {
			if _, seen := actual[e.Workload]; !seen {
				actual[e.Workload] = e.T - r.NowSec
			}
		}
	}
	s := scoreTruth(r, actual, nil)
	s.Run = d.Path
	return s
}

// ScoreBacktest scores r, a forecast from a backtest's rebuilt state, with what the history says
// happened after it; the workloads it does not know the admission of are left out.
func ScoreBacktest(r *Report, bt *Backtest) Score {
	s := scoreTruth(r, bt.Truth, bt.Unscored)
	s.Run = fmt.Sprintf("history after %g s", bt.AtSec)
	return s
}

// scoreTruth scores r's pending workloads, leaving out those in skip, against actual: each one's
// time to admission (absent: not admitted).
func scoreTruth(r *Report, actual map[string]float64, skip []string) Score {
	var s Score
	skipped := map[string]bool{}
	for _, id := range skip {
		skipped[id] = true
	}
	var errs []float64
	for _, w := range r.Workloads {
		if skipped[w.ID] {
			s.Unscored++
			continue
		}
		s.Workloads++
		a, admitted := actual[w.ID]
		if !admitted || a > r.HorizonSec {
			a = math.Inf(1)
		}
		lo, hi := bound(w.P10), bound(w.P90)
		if a >= lo && a <= hi {
			s.Inside++
		}
		if w.P50 != nil && !math.IsInf(a, 1) {
			e := math.Abs(*w.P50 - a)
			errs = append(errs, e)
			if e <= 60 {
				s.Within60++
			}
		}
	}
	if s.Workloads > 0 {
		s.Coverage = float64(s.Inside) / float64(s.Workloads)
		s.CoverageLow, s.CoverageHigh = wilson(s.Inside, s.Workloads)
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		s.MedianAbsErrSec = errs[len(errs)/2]
	}
	return s
}

func bound(x *float64) float64 {
	if x == nil {
		return math.Inf(1)
	}
	return *x
}

// wilson is the 95% Wilson score interval of k successes in n trials.
func wilson(k, n int) (float64, float64) {
	const z = 1.959963984540054
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	c := (p + z*z/(2*nf)) / den
	h := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return max(c-h, 0), min(c+h, 1)
}
