package gen

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"text/tabwriter"

	"gonum.org/v1/gonum/optimize"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

// Fit estimates every prior of a profile from a trace, so that 'kueuelab gen --profile' produces
// traces like it. Each prior is estimated the way the generator draws it:
//
//   - family, GPU-count, intent and team mixes: observed shares; gpuRatio the GPU families' share.
//   - durations: per family, a lognormal censored at its clamps (the observed minimum and maximum;
//     durations equal to them are censored), fitted by maximum likelihood; largeGPUMin and
//     largeGPUFactor where a likelihood-ratio test over the observed GPU counts finds a shift
//     (log-likelihood gain > 10).
//   - arrivals: hourly rates from arrivals per exposure second outside bursts; bursts from a
//     two-state hidden Markov model of the time-rescaled gaps (Exp(1) outside a burst, Exp(m)
//     inside), decoded by Viterbi, a run kept as a burst when its log-likelihood ratio exceeds 10.
//   - ranges (utilisation, intensities, sensitivities): the uniform's unbiased bounds from the
//     sample minimum and maximum; gpuUtilization as gpuCount[c].utilizationMean x family scale
//     +- half-width, a rank-one fit of the per-(family, count) midranges (single_gpu_training's
//     scale fixed at 1, as in the default profile).
//   - pod sizes per role: least squares of cpu and memory on the pod's GPUs, or a CPU choice
//     list when a GPU-less role has a few distinct CPU sizes (memory then per CPU).
//   - work rates: the median of units / (duration x request x utilisation x role share) over job
//     records; class thresholds: the smallest value carrying each label.
//
// What the trace cannot tell (a family it lacks, rates without job records, class thresholds when
// its labels are not the generator's) keeps the default profile's value and is listed in the
// report's Notes.
func Fit(tr *trace.Trace) (*Profile, *FitReport, error) {
	if tr == nil || len(tr.Workloads) == 0 {
		return nil, nil, fmt.Errorf("fit: the trace has no workloads")
	}
	p, err := DefaultProfile()
	if err != nil {
		return nil, nil, err
	}
	f := &fitter{p: p, tr: tr, rep: &FitReport{Workloads: len(tr.Workloads)}}
	f.mixes()
	f.arrivals()
	f.utilisation()
	f.durations()
	f.ranges()
	f.roles()
	f.rates()
	f.classes()
	f.independence()
	if err := p.Validate("fitted profile"); err != nil {
		return nil, nil, fmt.Errorf("fit: the estimates do not make a valid profile: %w", err)
	}
	return p, f.rep, nil
}

// FitReport is the goodness of fit of a fitted profile.
type FitReport struct {
	Workloads int
	// Durations has one row per family with workloads: the fitted clamped lognormal and its
	// Kolmogorov-Smirnov distance to the observed durations.
	Durations []DurationFit
	// Categorical has chi-square tests of what the profile assumes about categories: one GPU-count
	// mix, intent mix and team mix for every family, and one hourly shape for every day.
	Categorical []ChiSquare
	// Arrivals describes the arrival fit.
	Bursts    int
	BurstDays int
	TraceDays int
	Notes     []string
}

// DurationFit is the duration fit of one family.
type DurationFit struct {
	Family         trace.Family
	N              int
	MedianSec      float64
	Sigma          float64
	MinSec, MaxSec float64
	LargeGPUMin    int
	LargeGPUFactor float64
	// KS is the Kolmogorov-Smirnov statistic, P its asymptotic p-value (conservative: the clamps
	// are point masses).
	KS, P float64
}

// ChiSquare is one chi-square test.
type ChiSquare struct {
	Name    string
	Chi2    float64
	DF      int
	P       float64
	Comment string
}

func (r *FitReport) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// WriteTable writes the report for people.
func (r *FitReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "goodness of fit over %d workloads\n\n", r.Workloads)
	fmt.Fprintln(tw, "durations (clamped lognormal)\tn\tmedian s\tsigma\tmin s\tmax s\tlarge GPU\tKS D\tp\t")
	for _, d := range r.Durations {
		large := "-"
		if d.LargeGPUMin > 0 {
			large = fmt.Sprintf(">=%d x%.3g", d.LargeGPUMin, d.LargeGPUFactor)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.3f\t%.0f\t%.0f\t%s\t%.4f\t%.3g\t\n", d.Family, d.N, d.MedianSec, d.Sigma, d.MinSec, d.MaxSec, large, d.KS, d.P)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "categorical (chi-square)\tchi2\tdf\tp\t\t")
	for _, c := range r.Categorical {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%.3g\t%s\t\n", c.Name, c.Chi2, c.DF, c.P, c.Comment)
	}
	fmt.Fprintf(tw, "\nbursts: %d on %d of %d days\n", r.Bursts, r.BurstDays, r.TraceDays)
	for _, n := range r.Notes {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	return tw.Flush()
}

type fitter struct {
	p   *Profile
	tr  *trace.Trace
	rep *FitReport
}

// gpuCountOf is the GPU count the generator drew for a workload: trials draw none (0).
func gpuCountOf(w *trace.Workload) int {
	if w.WorkloadType == trace.HPOExperiment || !w.WorkloadType.GPU() {
		return 0
	}
	return int(w.TotalGPUs())
}

// mixes estimates the family, GPU-count, intent and team shares.
func (f *fitter) mixes() {
	ws := f.tr.Workloads
	n := float64(len(ws))
	fam := map[trace.Family]int{}
	gpus := map[int]int{}
	intents := map[string]int{}
	teams := map[string]int{}
	gpuN, cpuN := 0, 0
	for _, w := range ws {
		fam[w.WorkloadType]++
		if w.WorkloadType.GPU() {
			gpuN++
		} else {
			cpuN++
		}
		if c := gpuCountOf(w); c > 0 {
			gpus[c]++
		}
		intents[w.Intent()]++
		teams[w.Namespace]++
	}
	f.p.GPURatio = float64(gpuN) / n
	for i := range f.p.Families {
		fs := &f.p.Families[i]
		group := cpuN
		if fs.Name.GPU() {
			group = gpuN
		}
		if group > 0 {
			fs.Probability = float64(fam[fs.Name]) / float64(group)
		}
	}
	if gpuN == 0 || cpuN == 0 {
		f.rep.note("the trace has no %s workloads: that group's family mix is the default's", map[bool]string{true: "GPU", false: "CPU"}[gpuN == 0])
	}
	f.p.Intent.PerformanceRatio = float64(intents[trace.IntentPerformance]) / n
	f.p.Intent.EcoRatio = float64(intents[trace.IntentEco]) / n

	names := slices.SortedFunc(maps.Keys(teams), func(a, b string) int { return cmp.Or(cmp.Compare(teams[b], teams[a]), cmp.Compare(a, b)) })
	f.p.Teams = f.p.Teams[:0]
	for _, ns := range names {
		f.p.Teams = append(f.p.Teams, Team{Namespace: ns, Probability: float64(teams[ns]) / n})
	}
	gpuTotal := 0
	for _, c := range gpus {
		gpuTotal += c
	}
	if gpuTotal > 0 {
		old := f.p.GPUCount
		f.p.GPUCount = nil
		for _, c := range slices.Sorted(maps.Keys(gpus)) {
			f.p.GPUCount = append(f.p.GPUCount, GPUCount{GPUs: c, Probability: float64(gpus[c]) / float64(gpuTotal)})
		}
		if gpus[1] == 0 {
			// The profile needs a 1-GPU entry: trials use its utilisation.
			f.p.GPUCount = append([]GPUCount{{GPUs: 1}}, f.p.GPUCount...)
		}
		for i := range f.p.GPUCount { // utilisation means: the defaults until utilisation() fits them
			for _, o := range old {
				if o.GPUs == f.p.GPUCount[i].GPUs {
					f.p.GPUCount[i].UtilizationMean = o.UtilizationMean
				}
			}
			if f.p.GPUCount[i].UtilizationMean == 0 {
				f.p.GPUCount[i].UtilizationMean = 0.5
			}
		}
	}
	normalize(f.p)
}

// normalize makes each probability list sum to 1 exactly enough for Validate, after rounding the
// shares for a readable file.
func normalize(p *Profile) {
	fix := func(n int, get func(int) *float64) {
		sum := 0.0
		big := 0
		for i := range n {
			x := get(i)
			*x = math.Round(*x*1e6) / 1e6
			sum += *x
			if *x > *get(big) {
				big = i
			}
		}
		if n > 0 && sum > 0 {
			*get(big) += 1 - sum
		}
	}
	fix(len(p.Teams), func(i int) *float64 { return &p.Teams[i].Probability })
	fix(len(p.GPUCount), func(i int) *float64 { return &p.GPUCount[i].Probability })
	var gpuF, cpuF []int
	for i := range p.Families {
		if p.Families[i].Name.GPU() {
			gpuF = append(gpuF, i)
		} else {
			cpuF = append(cpuF, i)
		}
	}
	fix(len(gpuF), func(i int) *float64 { return &p.Families[gpuF[i]].Probability })
	fix(len(cpuF), func(i int) *float64 { return &p.Families[cpuF[i]].Probability })
	p.GPURatio = math.Round(p.GPURatio*1e6) / 1e6
	p.Intent.PerformanceRatio = math.Round(p.Intent.PerformanceRatio*1e6) / 1e6
	p.Intent.EcoRatio = math.Round(p.Intent.EcoRatio*1e6) / 1e6
}

// --- durations ---

// censoredSample is a family's durations in log space, by GPU-count group.
type censoredSample struct {
	lo, hi float64 // clamps in log space
	groups map[int]*logGroup
}

// logGroup holds the sufficient statistics of one GPU count: uncensored n, sum and sum of
// squares of ln x, and the counts at each clamp.
type logGroup struct {
	n, s1, s2   float64
	left, right float64
}

// loglik is the censored lognormal log-likelihood with log-median mu, sigma, and a log shift for
// groups at or above largeMin (0: none).
func (c *censoredSample) loglik(mu, sigma float64, largeMin int, shift float64) float64 {
	ll := 0.0
	for g, s := range c.groups {
		m := mu
		if largeMin > 0 && g >= largeMin {
			m += shift
		}
		ll += -s.n*math.Log(sigma) - (s.s2-2*m*s.s1+s.n*m*m)/(2*sigma*sigma)
		if s.left > 0 {
			ll += s.left * logPhi((c.lo-m)/sigma)
		}
		if s.right > 0 {
			ll += s.right * logPhi(-(c.hi-m)/sigma)
		}
	}
	return ll
}

// logPhi is log of the standard normal CDF, accurate in the far left tail.
func logPhi(z float64) float64 {
	if z > -30 {
		return math.Log(0.5 * math.Erfc(-z/math.Sqrt2))
	}
	return -z*z/2 - math.Log(-z) - 0.5*math.Log(2*math.Pi)
}

func phi(z float64) float64 { return 0.5 * math.Erfc(-z/math.Sqrt2) }

// fitCensored maximises the likelihood over (mu, log sigma[, shift]).
func (c *censoredSample) fit(largeMin int, mu0, sigma0 float64) (mu, sigma, shift, ll float64) {
	dim := 2
	if largeMin > 0 {
		dim = 3
	}
	obj := func(x []float64) float64 {
		s := math.Exp(x[1])
		sh := 0.0
		if dim == 3 {
			sh = x[2]
		}
		v := c.loglik(x[0], s, largeMin, sh)
		if math.IsNaN(v) {
			return math.Inf(1)
		}
		return -v
	}
	x0 := []float64{mu0, math.Log(sigma0)}
	if dim == 3 {
		x0 = append(x0, 0)
	}
	res, err := optimize.Minimize(optimize.Problem{Func: obj}, x0, &optimize.Settings{Converger: &optimize.FunctionConverge{Absolute: 1e-10, Iterations: 200}}, &optimize.NelderMead{})
	if err != nil && res == nil {
		return mu0, sigma0, 0, c.loglik(mu0, sigma0, 0, 0)
	}
	x := res.X
	if dim == 3 {
		shift = x[2]
	}
	return x[0], math.Exp(x[1]), shift, -res.F
}

func (f *fitter) durations() {
	byFam := map[trace.Family][]*trace.Workload{}
	for _, w := range f.tr.Workloads {
		byFam[w.WorkloadType] = append(byFam[w.WorkloadType], w)
	}
	for i := range f.p.Families {
		fs := &f.p.Families[i]
		ws := byFam[fs.Name]
		if len(ws) < 2 {
			if len(ws) > 0 || fs.Probability > 0 {
				f.rep.note("%s: %d workloads, too few to fit its durations (the default's are kept)", fs.Name, len(ws))
			}
			continue
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, w := range ws {
			lo, hi = math.Min(lo, w.DurationSec), math.Max(hi, w.DurationSec)
		}
		// A clamp shows as ties at the extreme (durations are continuous, or whole seconds well
		// inside it); without ties the extreme is just the sample's, and nothing is censored.
		atLo, atHi := 0, 0
		for _, w := range ws {
			if w.DurationSec == lo {
				atLo++
			}
			if w.DurationSec == hi {
				atHi++
			}
		}
		censorLo, censorHi := atLo >= 2 && lo < hi, atHi >= 2 && lo < hi
		c := &censoredSample{lo: math.Log(lo), hi: math.Log(hi), groups: map[int]*logGroup{}}
		var sum, sum2 float64
		for _, w := range ws {
			g := c.groups[gpuCountOf(w)]
			if g == nil {
				g = &logGroup{}
				c.groups[gpuCountOf(w)] = g
			}
			switch y := math.Log(w.DurationSec); {
			case censorLo && w.DurationSec == lo:
				g.left++
			case censorHi && w.DurationSec == hi:
				g.right++
			default:
				g.n++
				g.s1 += y
				g.s2 += y * y
			}
			y := math.Log(w.DurationSec)
			sum += y
			sum2 += y * y
		}
		n := float64(len(ws))
		mu0 := sum / n
		sd0 := math.Max(0.05, math.Sqrt(math.Max(0, sum2/n-mu0*mu0)))
		mu, sigma, _, ll := c.fit(0, mu0, sd0)
		largeMin, factor := 0, 0.0
		counts := slices.Sorted(maps.Keys(c.groups))
		bestGain := 10.0 // a shift must be worth this much log-likelihood
		for _, k := range counts[min(1, len(counts)):] {
			m, s, sh, l := c.fit(k, mu, sigma)
			if l-ll > bestGain && math.Abs(sh) > 0.01 {
				bestGain, largeMin, factor = l-ll, k, math.Exp(sh)
				mu, sigma = m, s
			}
		}
		median := math.Exp(mu)
		if median < lo || median > hi {
			f.rep.note("%s: fitted median %.0f s lies outside the clamps [%.0f, %.0f]; clamped", fs.Name, median, lo, hi)
			median = math.Min(hi, math.Max(lo, median))
		}
		fs.Duration = DurationSpec{MedianSec: round(median, 1), Sigma: round(sigma, 4), MinSec: lo, MaxSec: hi}
		if largeMin > 0 {
			fs.Duration.LargeGPUMin, fs.Duration.LargeGPUFactor = largeMin, round(factor, 4)
		}
		d := DurationFit{Family: fs.Name, N: len(ws), MedianSec: fs.Duration.MedianSec, Sigma: fs.Duration.Sigma, MinSec: lo, MaxSec: hi,
			LargeGPUMin: largeMin, LargeGPUFactor: fs.Duration.LargeGPUFactor}
		d.KS, d.P = ksClamped(ws, fs.Duration)
		f.rep.Durations = append(f.rep.Durations, d)
	}
}

// DurationCDF is the CDF of a family's durations at x for a workload of gpus GPUs.
func DurationCDF(d DurationSpec, gpus int, x float64) float64 {
	if x < d.MinSec {
		return 0
	}
	if x >= d.MaxSec {
		return 1
	}
	m := d.MedianSec
	if d.LargeGPUMin > 0 && gpus >= d.LargeGPUMin {
		m *= d.LargeGPUFactor
	}
	return phi((math.Log(x) - math.Log(m)) / d.Sigma)
}

// ksClamped is the Kolmogorov-Smirnov distance of the durations to the fitted mixture over the
// workloads' GPU counts, and its asymptotic p-value.
func ksClamped(ws []*trace.Workload, d DurationSpec) (float64, float64) {
	x := make([]float64, len(ws))
	weights := map[int]float64{}
	for i, w := range ws {
		x[i] = w.DurationSec
		weights[gpuCountOf(w)]++
	}
	sort.Float64s(x)
	n := float64(len(x))
	cdf := func(v float64) float64 {
		s := 0.0
		for g, k := range weights {
			s += k / n * DurationCDF(d, g, v)
		}
		return s
	}
	dmax := 0.0
	for i := 0; i < len(x); {
		j := i
		for j < len(x) && x[j] == x[i] {
			j++
		}
		f := cdf(x[i])
		below := cdf(math.Nextafter(x[i], math.Inf(-1)))
		dmax = math.Max(dmax, math.Max(math.Abs(float64(j)/n-f), math.Abs(float64(i)/n-below)))
		i = j
	}
	return dmax, kolmogorovP(math.Sqrt(n) * dmax)
}

// kolmogorovP is the Kolmogorov distribution's survival function at lambda.
func kolmogorovP(lambda float64) float64 {
	if lambda < 0.2 {
		return 1
	}
	s := 0.0
	for k := 1; k <= 100; k++ {
		t := math.Exp(-2 * float64(k*k) * lambda * lambda)
		if k%2 == 1 {
			s += t
		} else {
			s -= t
		}
		if t < 1e-16 {
			break
		}
	}
	return math.Min(1, math.Max(0, 2*s))
}

// --- arrivals ---

func (f *fitter) arrivals() {
	ts := make([]float64, len(f.tr.Workloads))
	for i, w := range f.tr.Workloads {
		ts[i] = w.SubmitTimeOffsetSec
	}
	sort.Float64s(ts)
	end := ts[len(ts)-1]
	days := int(end/secondsPerDay) + 1
	f.rep.TraceDays = days
	inBurst := make([]bool, len(ts)) // the gap before arrival i is in a burst
	var rates [24]float64
	var runs [][2]int
	for range 3 { // rates without the bursts, bursts against those rates
		rates = hourlyRates(ts, inBurst)
		runs = burstRuns(rescaledGaps(ts, rates))
		clear(inBurst)
		for _, r := range runs {
			for k := r[0]; k < r[1]; k++ {
				inBurst[k] = true
			}
		}
	}
	// Hours of day the trace never covers get the mean rate of those it does.
	var exposure [24]float64
	AddExposure(&exposure, 0, end)
	mean, seen := 0.0, 0
	for h, r := range rates {
		if exposure[h] > 0 {
			mean += r
			seen++
		}
	}
	mean /= float64(seen)
	if seen < 24 {
		f.rep.note("the trace covers %d hours of the day; the others get the mean arrival rate", seen)
	}
	a := &f.p.Arrival
	a.MeanInterArrivalSec = round(1/mean, 4)
	var empty []string
	for h, r := range rates {
		m := round(r/mean, 4)
		switch {
		case exposure[h] == 0:
			m = 1
		case m <= 0:
			empty = append(empty, fmt.Sprintf("%02d:00", h))
			m = 0.0001
		}
		a.HourlyMultipliers[h] = m
	}
	if len(empty) > 0 {
		f.rep.note("no arrivals at %v: their multiplier is 0.0001 (a profile needs positive rates)", empty)
	}
	// Bursts: one per day at most, as the generator draws them.
	burstDays := map[int]bool{}
	var jobs, usum float64
	u := rescaledGaps(ts, rates)
	for _, r := range runs {
		burstDays[int(ts[r[0]]/secondsPerDay)] = true
		jobs += float64(r[1] - r[0])
		for k := r[0]; k < r[1]; k++ {
			usum += u[k]
		}
	}
	f.rep.Bursts, f.rep.BurstDays = len(runs), len(burstDays)
	a.Burst.DayProbability = round(float64(len(burstDays))/float64(days), 4)
	if len(runs) > 0 {
		a.Burst.Multiplier = round(jobs/usum, 4)
		a.Burst.MeanJobs = round(jobs/float64(len(runs)), 2)
	}
}

// hourlyRates estimates each hour of day's arrival rate from the arrivals and exposure outside
// bursts: the gap before a burst arrival is burst time.
func hourlyRates(ts []float64, inBurst []bool) [24]float64 {
	var count, exposure [24]float64
	prev := 0.0
	for i, t := range ts {
		if !inBurst[i] {
			count[HourOf(t)]++
			AddExposure(&exposure, prev, t)
		}
		prev = t
	}
	var r [24]float64
	for h := range r {
		if exposure[h] > 0 {
			r[h] = count[h] / exposure[h]
		}
	}
	return r
}

// HourOf is the hour of day of t ≥ 0 seconds on a clock whose 0 is a midnight (a trace's).
func HourOf(t float64) int { return int(math.Mod(t, secondsPerDay) / secondsPerHour) }

// AddExposure adds the interval [a, b) to the seconds spent in each hour of day.
func AddExposure(e *[24]float64, a, b float64) {
	for a < b {
		end := math.Min(b, (math.Floor(a/secondsPerHour)+1)*secondsPerHour)
		e[HourOf(a)] += end - a
		a = end
	}
}

// rescaledGaps integrates the hourly rates over each gap: Exp(1) for a Poisson process at those rates.
func rescaledGaps(ts []float64, r [24]float64) []float64 {
	u := make([]float64, len(ts))
	prev := 0.0
	for i, t := range ts {
		var e [24]float64
		AddExposure(&e, prev, t)
		for h := range e {
			u[i] += e[h] * r[h]
		}
		prev = t
	}
	return u
}

// burstRuns fits a two-state HMM to the rescaled gaps (normal: Exp(1), burst: Exp(lambda)) by
// Baum-Welch, decodes it by Viterbi, and returns the burst runs [start, end) whose log-likelihood
// ratio against no burst exceeds 10.
func burstRuns(u []float64) [][2]int {
	n := len(u)
	if n < 10 {
		return nil
	}
	a, b, lambda := 1e-3, 0.02, 4.0 // P(normal->burst), P(burst->normal), burst rate
	emit := func(s int, x float64) float64 {
		if s == 0 {
			return math.Exp(-x)
		}
		return lambda * math.Exp(-lambda*x)
	}
	alpha := make([][2]float64, n)
	beta := make([][2]float64, n)
	scale := make([]float64, n)
	for iter := 0; iter < 40; iter++ {
		trans := [2][2]float64{{1 - a, a}, {b, 1 - b}}
		alpha[0] = [2]float64{emit(0, u[0]), 0}
		scale[0] = alpha[0][0] + alpha[0][1]
		alpha[0][0] /= scale[0]
		for t := 1; t < n; t++ {
			for s := 0; s < 2; s++ {
				alpha[t][s] = (alpha[t-1][0]*trans[0][s] + alpha[t-1][1]*trans[1][s]) * emit(s, u[t])
			}
			scale[t] = alpha[t][0] + alpha[t][1]
			if scale[t] == 0 {
				scale[t] = 1e-300
			}
			alpha[t][0] /= scale[t]
			alpha[t][1] /= scale[t]
		}
		beta[n-1] = [2]float64{1, 1}
		for t := n - 2; t >= 0; t-- {
			for s := 0; s < 2; s++ {
				beta[t][s] = (trans[s][0]*emit(0, u[t+1])*beta[t+1][0] + trans[s][1]*emit(1, u[t+1])*beta[t+1][1]) / scale[t+1]
			}
		}
		var nb, nbx, xi01, xi10, g0, g1 float64
		for t := 0; t < n; t++ {
			gb := alpha[t][1] * beta[t][1]
			g := alpha[t][0]*beta[t][0] + gb
			if g > 0 {
				gb /= g
			}
			nb += gb
			nbx += gb * u[t]
			if t < n-1 {
				p01 := alpha[t][0] * trans[0][1] * emit(1, u[t+1]) * beta[t+1][1] / scale[t+1]
				p10 := alpha[t][1] * trans[1][0] * emit(0, u[t+1]) * beta[t+1][0] / scale[t+1]
				xi01 += p01
				xi10 += p10
				g0 += 1 - gb
				g1 += gb
			}
		}
		if nb < 1 || nbx <= 0 {
			return nil
		}
		lambda = math.Max(1.01, nb/nbx)
		a = math.Min(0.5, math.Max(1e-9, xi01/math.Max(g0, 1e-9)))
		b = math.Min(0.999, math.Max(1e-6, xi10/math.Max(g1, 1e-9)))
	}
	// Viterbi.
	la, l1a, lb, l1b := math.Log(a), math.Log(1-a), math.Log(b), math.Log(1-b)
	le := func(s int, x float64) float64 {
		if s == 0 {
			return -x
		}
		return math.Log(lambda) - lambda*x
	}
	v := [2]float64{le(0, u[0]), math.Inf(-1)}
	back := make([][2]int8, n)
	for t := 1; t < n; t++ {
		var nv [2]float64
		from0, from1 := v[0]+l1a, v[1]+lb
		if from0 >= from1 {
			nv[0], back[t][0] = from0, 0
		} else {
			nv[0], back[t][0] = from1, 1
		}
		from0, from1 = v[0]+la, v[1]+l1b
		if from0 >= from1 {
			nv[1], back[t][1] = from0, 0
		} else {
			nv[1], back[t][1] = from1, 1
		}
		nv[0] += le(0, u[t])
		nv[1] += le(1, u[t])
		v = nv
	}
	state := make([]int8, n)
	if v[1] > v[0] {
		state[n-1] = 1
	}
	for t := n - 1; t > 0; t-- {
		state[t-1] = back[t][state[t]]
	}
	var runs [][2]int
	for t := 0; t < n; {
		if state[t] == 0 {
			t++
			continue
		}
		s := t
		sum := 0.0
		for t < n && state[t] == 1 {
			sum += u[t]
			t++
		}
		k := float64(t - s)
		if k >= 3 && k*math.Log(lambda)-(lambda-1)*sum > 10 {
			runs = append(runs, [2]int{s, t})
		}
	}
	return runs
}

// --- utilisation, ranges ---

// uniformBounds estimates a uniform's bounds from a sample: the extremes widened by the expected
// gap, (max-min)/(n-1), and kept in [0, 1].
func uniformBounds(x []float64) Range {
	lo, hi := slices.Min(x), slices.Max(x)
	if n := len(x); n > 1 && hi > lo {
		w := (hi - lo) / float64(n-1)
		lo, hi = lo-w, hi+w
	}
	return Range{Min: round(math.Max(0, lo), 4), Max: round(math.Min(1, hi), 4)}
}

func (f *fitter) utilisation() {
	type cell struct {
		lo, hi float64
		n      int
	}
	cells := map[trace.Family]map[int]*cell{}
	for _, w := range f.tr.Workloads {
		if !w.WorkloadType.GPU() {
			continue
		}
		c := gpuCountOf(w)
		if w.WorkloadType == trace.HPOExperiment {
			c = 1 // trials take the 1-GPU mean
		}
		if cells[w.WorkloadType] == nil {
			cells[w.WorkloadType] = map[int]*cell{}
		}
		x := cells[w.WorkloadType][c]
		u := w.SharedIntensityProfile.GPUUtilization
		if x == nil {
			x = &cell{lo: u, hi: u}
			cells[w.WorkloadType][c] = x
		}
		x.lo, x.hi, x.n = math.Min(x.lo, u), math.Max(x.hi, u), x.n+1
	}
	if len(cells) == 0 {
		f.rep.note("no GPU workloads: GPU utilisation priors are the default's")
		return
	}
	// Half-width: the cells' unbiased half-ranges, weighted by size.
	var hw, wsum float64
	for _, m := range cells {
		for _, x := range m {
			if x.n < 2 {
				continue
			}
			w := float64(x.n)
			hw += w * (x.hi - x.lo) / 2 * float64(x.n+1) / float64(x.n-1)
			wsum += w
		}
	}
	if wsum > 0 {
		f.p.GPUUtilizationHalfWidth = round(hw/wsum, 4)
	}
	// Rank one: midrange(f, c) = mean(c) * scale(f), by alternating least squares.
	mean := map[int]float64{}
	scale := map[trace.Family]float64{}
	for fam, m := range cells {
		scale[fam] = 1
		for c := range m {
			mean[c] = 0.5
		}
	}
	for range 100 {
		for c := range mean {
			var num, den float64
			for fam, m := range cells {
				if x := m[c]; x != nil {
					num += float64(x.n) * (x.lo + x.hi) / 2 * scale[fam]
					den += float64(x.n) * scale[fam] * scale[fam]
				}
			}
			mean[c] = num / den
		}
		for fam, m := range cells {
			var num, den float64
			for c, x := range m {
				num += float64(x.n) * (x.lo + x.hi) / 2 * mean[c]
				den += float64(x.n) * mean[c] * mean[c]
			}
			scale[fam] = num / den
		}
	}
	// The product is what the data fixes; single_gpu_training's scale is 1, as in the default.
	anchor := trace.SingleGPUTraining
	if _, ok := scale[anchor]; !ok {
		anchor = slices.MaxFunc(slices.Collect(maps.Keys(scale)), func(a, b trace.Family) int { return cmp.Compare(len(cells[a]), len(cells[b])) })
	}
	k := scale[anchor]
	for fam := range scale {
		scale[fam] /= k
	}
	for c := range mean {
		mean[c] *= k
	}
	for i := range f.p.GPUCount {
		if m, ok := mean[f.p.GPUCount[i].GPUs]; ok {
			f.p.GPUCount[i].UtilizationMean = round(m, 4)
		}
	}
	for i := range f.p.Families {
		if s, ok := scale[f.p.Families[i].Name]; ok {
			f.p.Families[i].GPUUtilizationScale = round(s, 4)
		}
	}
	// Keep every family x count inside [0, 1] (Validate's rule, also for pairs the trace lacks).
	for _, fs := range f.p.Families {
		if !fs.Name.GPU() {
			continue
		}
		for _, g := range f.p.GPUCount {
			lo, hi := f.p.gpuUtilizationBounds(&fs, g.UtilizationMean)
			if lo < 0 || hi > 1 {
				margin := math.Min(g.UtilizationMean*fs.GPUUtilizationScale, 1-g.UtilizationMean*fs.GPUUtilizationScale)
				f.rep.note("gpuUtilizationHalfWidth %.4f would take %s at %d GPUs outside [0, 1]; narrowed to %.4f", f.p.GPUUtilizationHalfWidth, fs.Name, g.GPUs, math.Max(0, margin))
				f.p.GPUUtilizationHalfWidth = math.Max(0, math.Floor(margin*1e4)/1e4)
			}
		}
	}
}

func (f *fitter) ranges() {
	type acc struct{ cpu, mem, io, feed, sensCPU, sensGPU []float64 }
	by := map[trace.Family]*acc{}
	for _, w := range f.tr.Workloads {
		a := by[w.WorkloadType]
		if a == nil {
			a = &acc{}
			by[w.WorkloadType] = a
		}
		p := w.SharedIntensityProfile
		a.cpu, a.mem, a.io, a.feed = append(a.cpu, p.CPUUtilization), append(a.mem, p.MemoryIntensity), append(a.io, p.IOIntensity), append(a.feed, p.CPUFeedIntensityGPU)
		for _, j := range f.tr.Jobs[w.WorkloadID] {
			a.sensCPU = append(a.sensCPU, j.Sensitivity.CPU)
			if j.PodTemplate.Requests.GPUs() > 0 || !w.WorkloadType.GPU() {
				a.sensGPU = append(a.sensGPU, j.Sensitivity.GPU)
			}
		}
	}
	noJobs := true
	for i := range f.p.Families {
		fs := &f.p.Families[i]
		a := by[fs.Name]
		if a == nil || len(a.cpu) < 2 {
			continue
		}
		fs.CPUUtilization, fs.MemoryIntensity, fs.IOIntensity = uniformBounds(a.cpu), uniformBounds(a.mem), uniformBounds(a.io)
		fs.CPUFeedIntensityGPU = uniformBounds(a.feed)
		if len(a.sensCPU) > 1 {
			noJobs = false
			fs.Sensitivity.CPU = uniformBounds(a.sensCPU)
		}
		if len(a.sensGPU) > 1 {
			fs.Sensitivity.GPU = uniformBounds(a.sensGPU)
		}
	}
	if noJobs {
		f.rep.note("no job records: sensitivities and work rates are the default's")
	}
}

// --- pod sizes ---

func (f *fitter) roles() {
	type pod struct{ gpus, cpu, mem float64 }
	by := map[trace.Family]map[string][]pod{}
	trials := []int{}
	for _, w := range f.tr.Workloads {
		if by[w.WorkloadType] == nil {
			by[w.WorkloadType] = map[string][]pod{}
		}
		nTrials := 0
		single := len(familyRoles(w.WorkloadType)) == 1 && len(w.Pods) == 1
		for _, g := range w.Pods {
			role := g.Role
			if single {
				role = trace.RoleMain // the generator's name for a single-pod family's pod
			}
			by[w.WorkloadType][role] = append(by[w.WorkloadType][role], pod{
				gpus: float64(g.GPUs()), cpu: g.Requests.Value(trace.ResourceCPU), mem: g.Requests.Value(trace.ResourceMemory) / (1 << 30)})
			if g.Role == trace.RoleTrial {
				nTrials += g.Replicas
			}
		}
		if w.WorkloadType == trace.HPOExperiment {
			trials = append(trials, nTrials)
		}
	}
	if len(trials) > 0 {
		f.p.HPOTrials = IntRange{Min: max(1, slices.Min(trials)), Max: slices.Max(trials)}
	}
	for i := range f.p.Families {
		fs := &f.p.Families[i]
		for _, name := range familyRoles(fs.Name) {
			pods := by[fs.Name][name]
			rs := fs.Roles.role(name)
			if len(pods) == 0 || rs == nil {
				if len(by[fs.Name]) > 0 {
					f.rep.note("%s: no %q pods: the role's sizes are the default's", fs.Name, name)
				}
				continue
			}
			gpu := make([]float64, len(pods))
			cpu := make([]float64, len(pods))
			mem := make([]float64, len(pods))
			for k, p := range pods {
				gpu[k], cpu[k], mem[k] = p.gpus, p.cpu, p.mem
			}
			nr := RoleSpec{}
			distinctCPU := distinct(cpu)
			switch {
			case slices.Max(gpu) > 0:
				nr.CPU, nr.CPUPerGPU = line(gpu, cpu)
				nr.MemoryGi, nr.MemoryGiPerGPU = line(gpu, mem)
			case len(distinctCPU) > 1 && len(distinctCPU) <= 8:
				for _, c := range distinctCPU {
					k := 0
					for _, x := range cpu {
						if x == c {
							k++
						}
					}
					nr.CPUChoices = append(nr.CPUChoices, CPUChoice{Cores: c, Probability: float64(k) / float64(len(cpu))})
				}
				fixChoices(nr.CPUChoices)
				nr.MemoryGi, nr.MemoryGiPerCPU = line(cpu, mem)
			default:
				nr.CPU = medianOf(cpu)
				nr.MemoryGi = medianOf(mem)
			}
			for _, v := range []*float64{&nr.CPU, &nr.CPUPerGPU, &nr.MemoryGi, &nr.MemoryGiPerGPU, &nr.MemoryGiPerCPU} {
				*v = round(math.Max(0, *v), 3)
			}
			*rs = nr
		}
	}
}

// line fits y = a + b x by least squares; with one distinct x it is y = b x (a = 0) when x > 0,
// else y = a.
func line(x, y []float64) (a, b float64) {
	n := float64(len(x))
	var sx, sy, sxx, sxy float64
	for i := range x {
		sx, sy, sxx, sxy = sx+x[i], sy+y[i], sxx+x[i]*x[i], sxy+x[i]*y[i]
	}
	den := n*sxx - sx*sx
	if len(distinct(x)) < 2 || math.Abs(den) < 1e-12 {
		if sx > 0 {
			return 0, sy / sx
		}
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / den
	return (sy - b*sx) / n, b
}

func distinct(x []float64) []float64 {
	out := slices.Clone(x)
	slices.Sort(out)
	return slices.Compact(out)
}

func medianOf(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return s[len(s)/2]
}

func fixChoices(cs []CPUChoice) {
	sum, big := 0.0, 0
	for i := range cs {
		cs[i].Probability = math.Round(cs[i].Probability*1e6) / 1e6
		sum += cs[i].Probability
		if cs[i].Probability > cs[big].Probability {
			big = i
		}
	}
	cs[big].Probability += 1 - sum
}

// --- work rates, classes ---

func (f *fitter) rates() {
	var cpuR, gpuR []float64
	for _, w := range f.tr.Workloads {
		p := w.SharedIntensityProfile
		for _, j := range f.tr.Jobs[w.WorkloadID] {
			if u := work.Units(w.DurationSec, j.PodTemplate.Requests.Value(trace.ResourceCPU), p.CPUUtilization, 1, j.PodRole); u > 0 && j.Work.CPUUnits > 0 {
				cpuR = append(cpuR, j.Work.CPUUnits/u)
			}
			if u := work.Units(w.DurationSec, float64(j.PodTemplate.Requests.GPUs()), p.GPUUtilization, 1, j.PodRole); u > 0 && j.Work.GPUUnits > 0 {
				gpuR = append(gpuR, j.Work.GPUUnits/u)
			}
		}
	}
	if len(cpuR) > 0 {
		f.p.Work.CPURatePerCore = round(medianOf(cpuR), 4)
	}
	if len(gpuR) > 0 {
		f.p.Work.GPURatePerGPU = round(medianOf(gpuR), 4)
	}
}

func (f *fitter) classes() {
	minOf := map[string]float64{}
	take := func(label string, v float64) {
		if cur, ok := minOf[label]; !ok || v < cur {
			minOf[label] = v
		}
	}
	known := 0
	for _, w := range f.tr.Workloads {
		p, c := w.SharedIntensityProfile, w.WorkloadClass
		switch c.CPU {
		case "cpu.io_bound":
			take("io", p.IOIntensity)
		case "cpu.compute_bound":
			take("compute", p.CPUUtilization)
		case "cpu.mixed":
			take("mixed", p.CPUUtilization)
		case "cpu.light":
		default:
			continue
		}
		switch c.GPU {
		case "gpu.memory_bound":
			take("gpumem", p.MemoryIntensity)
		case "gpu.compute_bound":
			take("gpucompute", p.GPUUtilization)
		}
		known++
	}
	if known < len(f.tr.Workloads)/2 {
		f.rep.note("the trace's workloadClass labels are not the generator's vocabulary: class thresholds are the default's")
		return
	}
	th := f.p.Classes
	set := func(dst *float64, label string) {
		if v, ok := minOf[label]; ok {
			*dst = round(v, 4)
		}
	}
	set(&th.CPUIOBoundMin, "io")
	set(&th.CPUComputeBoundMin, "compute")
	set(&th.CPULightMax, "mixed")
	set(&th.GPUMemoryBoundMin, "gpumem")
	set(&th.GPUComputeBoundMin, "gpucompute")
	if th.CPULightMax > th.CPUComputeBoundMin {
		th.CPULightMax = th.CPUComputeBoundMin
	}
	// The thresholds must explain the labels (the writer may label by another rule, as Joulie's
	// does by family): otherwise they are not the trace's and the default's stay.
	agree := 0
	for _, w := range f.tr.Workloads {
		if Classify(w.SharedIntensityProfile, w.WorkloadType.GPU(), th) == w.WorkloadClass {
			agree++
		}
	}
	if float64(agree) < 0.99*float64(len(f.tr.Workloads)) {
		f.rep.note("the trace's workloadClass labels are not the generator's rule of its profile (%d of %d agree): class thresholds are the default's", agree, len(f.tr.Workloads))
		return
	}
	f.p.Classes = th
}

// --- independence tests ---

// independence tests what the profile assumes: one GPU-count, intent and team mix shared by every
// family, and one hourly shape shared by every day.
func (f *fitter) independence() {
	ws := f.tr.Workloads
	table := func(name, comment string, row func(*trace.Workload) (string, bool), col func(*trace.Workload) string) {
		cells := map[[2]string]float64{}
		rows, cols := map[string]float64{}, map[string]float64{}
		n := 0.0
		for _, w := range ws {
			r, ok := row(w)
			if !ok {
				continue
			}
			c := col(w)
			cells[[2]string{r, c}]++
			rows[r]++
			cols[c]++
			n++
		}
		if len(rows) < 2 || len(cols) < 2 {
			return
		}
		chi2, df := 0.0, 0
		for r, nr := range rows {
			for c, nc := range cols {
				e := nr * nc / n
				if e < 5 {
					continue
				}
				d := cells[[2]string{r, c}] - e
				chi2 += d * d / e
				df++
			}
		}
		df -= len(rows) + len(cols) - 1
		if df < 1 {
			return
		}
		f.rep.Categorical = append(f.rep.Categorical, ChiSquare{Name: name, Chi2: chi2, DF: df, P: distuv.ChiSquared{K: float64(df)}.Survival(chi2), Comment: comment})
	}
	fam := func(w *trace.Workload) string { return string(w.WorkloadType) }
	table("gpuCount x family", "one GPU-count mix for every GPU family", func(w *trace.Workload) (string, bool) {
		return string(w.WorkloadType), gpuCountOf(w) > 0
	}, func(w *trace.Workload) string { return fmt.Sprint(gpuCountOf(w)) })
	table("intent x family", "one intent mix for every family", func(w *trace.Workload) (string, bool) { return fam(w), true }, func(w *trace.Workload) string { return w.Intent() })
	table("team x family", "one team mix for every family", func(w *trace.Workload) (string, bool) { return fam(w), true }, func(w *trace.Workload) string { return w.Namespace })
	// Arrivals per (day, hour) against the fitted hourly rates, bursts included as observed.
	if f.rep.TraceDays > 1 {
		table("arrivals day x hour", "one hourly shape for every day (burst days add to it)", func(w *trace.Workload) (string, bool) {
			return fmt.Sprint(int(w.SubmitTimeOffsetSec / secondsPerDay)), w.SubmitTimeOffsetSec < float64(f.rep.TraceDays-1)*secondsPerDay
		}, func(w *trace.Workload) string { return fmt.Sprintf("%02d", HourOf(w.SubmitTimeOffsetSec)) })
	}
}

func round(x float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(x*p) / p
}
