package gen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

// statN is the number of workloads of the statistical tests.
const statN = 100_000

// pMin is the smallest chi-square p-value a test accepts: with the fixed seeds used here a correct
// generator passes deterministically, and a wrong prior (a few % off at N = 100,000) fails.
const pMin = 0.001

func defaultProfile(t testing.TB) *Profile {
	t.Helper()
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sample is what the statistical tests look at for one workload.
type sample struct {
	family   trace.Family
	gpus     int // total GPUs of the workload
	submit   float64
	duration float64
	profile  trace.Profile
	pods     []trace.PodGroup
	jobs     []trace.Job
	intent   string
	ns       string
}

func generate(t testing.TB, p *Profile, seed uint64, n int, keepJobs bool) []sample {
	t.Helper()
	g := New(p, seed)
	out := make([]sample, 0, n)
	for range n {
		wl, jobs := g.Next()
		s := sample{
			family: wl.WorkloadType, gpus: int(wl.TotalGPUs()), submit: wl.SubmitTimeOffsetSec, duration: wl.DurationSec,
			profile: wl.SharedIntensityProfile, pods: slices.Clone(wl.Pods), intent: wl.IntentClass, ns: wl.Namespace,
		}
		if keepJobs {
			s.jobs = slices.Clone(jobs)
		}
		out = append(out, s)
	}
	return out
}

// chiSquareP returns the p-value of observed counts against expected probabilities (cells with
// probability 0 must be empty).
func chiSquareP(t *testing.T, observed []int, probs []float64) float64 {
	t.Helper()
	total := 0
	for _, o := range observed {
		total += o
	}
	stat, df := 0.0, -1
	for i, o := range observed {
		e := probs[i] * float64(total)
		if e == 0 {
			if o != 0 {
				t.Fatalf("cell %d: %d observations where none are possible", i, o)
			}
			continue
		}
		stat += (float64(o) - e) * (float64(o) - e) / e
		df++
	}
	if df < 1 {
		return 1
	}
	return distuv.ChiSquared{K: float64(df)}.Survival(stat)
}

func TestFamilyMix(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 11, statN, false)
	counts := make([]int, len(trace.Families))
	probs := make([]float64, len(trace.Families))
	for i, f := range trace.Families {
		share := 1 - p.GPURatio
		if f.GPU() {
			share = p.GPURatio
		}
		probs[i] = share * p.Family(f).Probability
	}
	for _, s := range samples {
		counts[slices.Index(trace.Families, s.family)]++
	}
	if pv := chiSquareP(t, counts, probs); pv < pMin {
		t.Fatalf("family mix %v vs probabilities %v: chi-square p = %g", counts, probs, pv)
	}
}

func TestGPUCountMix(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 12, statN, false)
	counts := make([]int, len(p.GPUCount))
	probs := make([]float64, len(p.GPUCount))
	for i, c := range p.GPUCount {
		probs[i] = c.Probability
	}
	for _, s := range samples {
		if !s.family.GPU() || s.family == trace.HPOExperiment {
			continue // HPO draws K trials instead
		}
		i := slices.IndexFunc(p.GPUCount, func(c GPUCount) bool { return c.GPUs == s.gpus })
		if i < 0 {
			t.Fatalf("%s with %d GPUs: not a GPU count of the profile", s.family, s.gpus)
		}
		counts[i]++
	}
	if pv := chiSquareP(t, counts, probs); pv < pMin {
		t.Fatalf("GPU counts %v vs %v: chi-square p = %g", counts, probs, pv)
	}
}

// medianTolerance is the relative error allowed for a sample median of a lognormal: 4 standard
// errors of the log-median, sigma*sqrt(pi/2)/sqrt(n).
func medianTolerance(sigma float64, n int) float64 {
	return 4 * sigma * math.Sqrt(math.Pi/2) / math.Sqrt(float64(n))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestDurationsPerFamily(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 13, statN, false)
	type group struct {
		family trace.Family
		large  bool
	}
	byGroup := map[group][]float64{}
	for _, s := range samples {
		d := p.Family(s.family).Duration
		if s.duration < d.MinSec || s.duration > d.MaxSec {
			t.Fatalf("%s duration %v outside the clamps [%v, %v]", s.family, s.duration, d.MinSec, d.MaxSec)
		}
		g := group{s.family, d.LargeGPUMin > 0 && s.gpus >= d.LargeGPUMin}
		byGroup[g] = append(byGroup[g], s.duration)
	}
	for _, f := range trace.Families {
		for _, large := range []bool{false, true} {
			xs := byGroup[group{f, large}]
			d := p.Family(f).Duration
			if large && d.LargeGPUMin == 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/large=%v", f, large), func(t *testing.T) {
				want := d.MedianSec
				if large {
					want *= d.LargeGPUFactor
				}
				got := median(xs)
				tol := medianTolerance(d.Sigma, len(xs)) + 0.5/want // + the rounding to whole seconds
				if math.Abs(math.Log(got/want)) > tol {
					t.Fatalf("median %v over %d samples, want %v within %.1f%%", got, len(xs), want, 100*tol)
				}
			})
		}
	}
}

func TestHourlyArrivalShape(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 14, statN, false)
	// Only whole days count: the unfinished last day would under-fill its late hours.
	days := math.Floor(samples[len(samples)-1].submit / secondsPerDay)
	if days < 10 {
		t.Fatalf("trace spans %v days, too short for the test", days)
	}
	counts := make([]int, 24)
	for _, s := range samples {
		if s.submit < days*secondsPerDay {
			counts[int(s.submit/secondsPerHour)%24]++
		}
	}
	sum := 0.0
	for _, m := range p.Arrival.HourlyMultipliers {
		sum += m
	}
	probs := make([]float64, 24)
	for h, m := range p.Arrival.HourlyMultipliers {
		probs[h] = m / sum
	}
	if pv := chiSquareP(t, counts, probs); pv < pMin {
		t.Fatalf("arrivals per hour %v vs multipliers: chi-square p = %g", counts, pv)
	}
	// The mean rate over whole days is the mean multiplier over meanInterArrivalSec.
	n := 0
	for _, c := range counts {
		n += c
	}
	wantRate := sum / 24 / p.Arrival.MeanInterArrivalSec
	gotRate := float64(n) / (days * secondsPerDay)
	if tol := 4 / math.Sqrt(float64(n)); math.Abs(gotRate/wantRate-1) > tol {
		t.Fatalf("arrival rate %v/s, want %v/s within %.2f%%", gotRate, wantRate, 100*tol)
	}
}

func TestBurstDaysRaiseArrivals(t *testing.T) {
	p := defaultProfile(t)
	base := generate(t, p, 15, 20_000, false)
	p.Arrival.Burst.DayProbability, p.Arrival.Burst.Multiplier, p.Arrival.Burst.MeanJobs = 1, 10, 1000
	burst := generate(t, p, 15, 20_000, false)
	span := func(s []sample) float64 { return s[len(s)-1].submit }
	// Every day has a burst of ~1000 of its ~2900 workloads arriving 10x faster: the same count fits
	// in about 30% less time.
	if !(span(burst) < 0.85*span(base)) {
		t.Fatalf("with burst days 20,000 workloads span %vs, without %vs", span(burst), span(base))
	}
	for i := 1; i < len(burst); i++ {
		if burst[i].submit < burst[i-1].submit {
			t.Fatalf("submit times go back at %d", i)
		}
	}
}

func TestUtilizationWithinProfileRanges(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 16, statN, false)
	in := func(x float64, r Range) bool { return x >= r.Min-5e-5 && x <= r.Max+5e-5 } // values are rounded to 4 decimals
	type key struct {
		f    trace.Family
		gpus int
	}
	sums, counts := map[key]float64{}, map[key]int{}
	for _, s := range samples {
		f := p.Family(s.family)
		pr := s.profile
		for _, c := range []struct {
			name string
			x    float64
			r    Range
		}{
			{"cpuUtilization", pr.CPUUtilization, f.CPUUtilization},
			{"memoryIntensity", pr.MemoryIntensity, f.MemoryIntensity},
			{"ioIntensity", pr.IOIntensity, f.IOIntensity},
			{"cpuFeedIntensityGpu", pr.CPUFeedIntensityGPU, f.CPUFeedIntensityGPU},
		} {
			if !in(c.x, c.r) {
				t.Fatalf("%s %s = %v outside [%v, %v]", s.family, c.name, c.x, c.r.Min, c.r.Max)
			}
		}
		if !s.family.GPU() {
			if pr.GPUUtilization != 0 {
				t.Fatalf("%s has gpuUtilization %v", s.family, pr.GPUUtilization)
			}
			continue
		}
		perPod := s.gpus
		if s.family == trace.HPOExperiment {
			perPod = 1
		}
		mean := p.GPUCount[slices.IndexFunc(p.GPUCount, func(c GPUCount) bool { return c.GPUs == perPod })].UtilizationMean
		lo, hi := p.gpuUtilizationBounds(f, mean)
		if !in(pr.GPUUtilization, Range{lo, hi}) {
			t.Fatalf("%s G=%d gpuUtilization %v outside [%v, %v]", s.family, s.gpus, pr.GPUUtilization, lo, hi)
		}
		k := key{s.family, perPod}
		sums[k] += pr.GPUUtilization
		counts[k]++
	}
	// The mean GPU utilisation per G is the Philly mean times the family's scale (4 standard errors
	// of a uniform of half-width w: w/sqrt(3n)).
	for _, f := range []trace.Family{trace.SingleGPUTraining, trace.DebugEval} {
		for _, c := range p.GPUCount {
			k := key{f, c.GPUs}
			n := counts[k]
			want := c.UtilizationMean * p.Family(f).GPUUtilizationScale
			tol := 4*p.GPUUtilizationHalfWidth/math.Sqrt(3*float64(n)) + 5e-5
			if got := sums[k] / float64(n); math.Abs(got-want) > tol {
				t.Errorf("%s G=%d: mean gpuUtilization %v over %d, want %v +- %v", f, c.GPUs, got, n, want, tol)
			}
		}
	}
}

func TestTeamsAndIntentMix(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 17, statN, false)
	teams := make([]int, len(p.Teams))
	teamProbs := make([]float64, len(p.Teams))
	for i, tm := range p.Teams {
		teamProbs[i] = tm.Probability
	}
	intents := []string{trace.IntentPerformance, trace.IntentEco, trace.IntentStandard}
	intentCounts := make([]int, 3)
	intentProbs := []float64{p.Intent.PerformanceRatio, p.Intent.EcoRatio, 1 - p.Intent.PerformanceRatio - p.Intent.EcoRatio}
	for _, s := range samples {
		teams[slices.IndexFunc(p.Teams, func(tm Team) bool { return tm.Namespace == s.ns })]++
		intentCounts[slices.Index(intents, s.intent)]++
	}
	if pv := chiSquareP(t, teams, teamProbs); pv < pMin {
		t.Errorf("teams %v vs %v: p = %g", teams, teamProbs, pv)
	}
	if pv := chiSquareP(t, intentCounts, intentProbs); pv < pMin {
		t.Errorf("intents %v vs %v: p = %g", intentCounts, intentProbs, pv)
	}
}

func TestChangingAPriorMovesTheOutput(t *testing.T) {
	const n = 50_000
	share := func(s []sample, f trace.Family) float64 {
		c := 0
		for _, x := range s {
			if x.family == f {
				c++
			}
		}
		return float64(c) / float64(len(s))
	}
	medianOf := func(s []sample, f trace.Family) float64 {
		var xs []float64
		for _, x := range s {
			if x.family == f {
				xs = append(xs, x.duration)
			}
		}
		return median(xs)
	}
	base := generate(t, defaultProfile(t), 18, n, false)

	t.Run("debug_eval probability up", func(t *testing.T) {
		p := defaultProfile(t)
		p.Family(trace.DebugEval).Probability = 0.65
		p.Family(trace.SingleGPUTraining).Probability = 0.05
		if err := p.Validate("test"); err != nil {
			t.Fatal(err)
		}
		got := share(generate(t, p, 18, n, false), trace.DebugEval)
		want := p.GPURatio * 0.65
		if tol := 4 * math.Sqrt(want*(1-want)/n); math.Abs(got-want) > tol {
			t.Fatalf("debug_eval share %v, want %v +- %v (was %v)", got, want, tol, share(base, trace.DebugEval))
		}
	})
	t.Run("single_gpu_training median halved", func(t *testing.T) {
		p := defaultProfile(t)
		d := &p.Family(trace.SingleGPUTraining).Duration
		d.MedianSec /= 2
		got, was := medianOf(generate(t, p, 18, n, false), trace.SingleGPUTraining), medianOf(base, trace.SingleGPUTraining)
		nFam := int(float64(n) * p.GPURatio * p.Family(trace.SingleGPUTraining).Probability)
		if tol := 2 * medianTolerance(d.Sigma, nFam); math.Abs(math.Log(got/was*2)) > tol {
			t.Fatalf("median %v, was %v: ratio %v, want 0.5 within %.1f%%", got, was, got/was, 100*tol)
		}
	})
	t.Run("gpu ratio down", func(t *testing.T) {
		p := defaultProfile(t)
		p.GPURatio = 0.3
		s := generate(t, p, 18, n, false)
		got := 0.0
		for _, f := range trace.Families {
			if f.GPU() {
				got += share(s, f)
			}
		}
		if tol := 4 * math.Sqrt(0.3*0.7/n); math.Abs(got-0.3) > tol {
			t.Fatalf("GPU share %v, want 0.3 +- %v", got, tol)
		}
	})
}

func TestPodStructure(t *testing.T) {
	p := defaultProfile(t)
	samples := generate(t, p, 19, 20_000, true)
	seen := map[trace.Family]bool{}
	for _, s := range samples {
		seen[s.family] = true
		roles := make([]string, len(s.pods))
		replicas := map[string]int{}
		for i, pg := range s.pods {
			roles[i] = pg.Role
			replicas[pg.Role] = pg.Replicas
			if gang := s.family == trace.DistributedTraining || s.family == trace.ParameterServerTraining; pg.Gang != gang {
				t.Fatalf("%s pod %s gang=%v", s.family, pg.Role, pg.Gang)
			}
			wantGPU := int64(0)
			switch {
			case pg.Role == trace.RoleWorker || pg.Role == trace.RoleTrial:
				wantGPU = 1
			case pg.Role == trace.RoleMain && s.family.GPU():
				wantGPU = int64(s.gpus)
			}
			if got := pg.Requests.GPUs(); got != wantGPU {
				t.Fatalf("%s role %s requests %d GPUs, want %d", s.family, pg.Role, got, wantGPU)
			}
			if pg.Requests.Value(trace.ResourceCPU) <= 0 || pg.Requests.Value(trace.ResourceMemory) <= 0 {
				t.Fatalf("%s role %s requests %v", s.family, pg.Role, pg.Requests)
			}
		}
		switch s.family {
		case trace.DistributedTraining:
			checkRoles(t, s, roles, []string{"launcher", "worker"}, map[string]int{"launcher": 1, "worker": s.gpus})
		case trace.ParameterServerTraining:
			ps := 1
			if s.gpus >= 4 {
				ps = 2
			}
			checkRoles(t, s, roles, []string{"ps", "worker"}, map[string]int{"ps": ps, "worker": s.gpus})
		case trace.HPOExperiment:
			checkRoles(t, s, roles, []string{"controller", "trial"}, map[string]int{"controller": 1, "trial": s.gpus})
			if k := replicas["trial"]; k < p.HPOTrials.Min || k > p.HPOTrials.Max {
				t.Fatalf("HPO with %d trials outside [%d, %d]", k, p.HPOTrials.Min, p.HPOTrials.Max)
			}
		default:
			checkRoles(t, s, roles, []string{"main"}, map[string]int{"main": 1})
		}
		checkJobs(t, p, s)
	}
	if len(seen) != len(trace.Families) {
		t.Fatalf("only families %v were generated", seen)
	}
}

func checkRoles(t *testing.T, s sample, roles, want []string, replicas map[string]int) {
	t.Helper()
	if !slices.Equal(roles, want) {
		t.Fatalf("%s roles %v, want %v", s.family, roles, want)
	}
	for _, pg := range s.pods {
		if pg.Replicas != replicas[pg.Role] {
			t.Fatalf("%s role %s has %d replicas, want %d", s.family, pg.Role, pg.Replicas, replicas[pg.Role])
		}
	}
}

func checkJobs(t *testing.T, p *Profile, s sample) {
	t.Helper()
	i := 0
	for _, pg := range s.pods {
		for r := 1; r <= pg.Replicas; r++ {
			if i >= len(s.jobs) {
				t.Fatalf("%s: fewer jobs than pods", s.family)
			}
			j := s.jobs[i]
			i++
			wantID := fmt.Sprintf("%s-%s-%02d", j.WorkloadID, pg.Role, r)
			if j.JobID != wantID || j.PodRole != pg.Role || j.SubmitTimeOffsetSec != s.submit || j.Namespace != s.ns ||
				j.IntentClass != s.intent || j.WorkloadProfile != s.profile || j.WorkloadType != s.family {
				t.Fatalf("job %+v does not carry its workload's fields (want id %s)", j, wantID)
			}
			// Work units convert back to the workload's duration (role fraction included).
			for _, c := range []struct {
				units, request, util, rate float64
			}{
				{j.Work.CPUUnits, pg.Requests.Value(trace.ResourceCPU), s.profile.CPUUtilization, p.Work.CPURatePerCore},
				{j.Work.GPUUnits, float64(pg.Requests.GPUs()), s.profile.GPUUtilization, p.Work.GPURatePerGPU},
			} {
				if c.request == 0 {
					if c.units != 0 {
						t.Fatalf("job %s has %v units of a resource it does not request", j.JobID, c.units)
					}
					continue
				}
				// Units are rounded to 0.01, which shifts the duration by up to 0.005 units' worth.
				d := work.Duration(c.units, c.request, c.util, c.rate, pg.Role)
				tol := work.Duration(0.005, c.request, c.util, c.rate, pg.Role) + 1e-9*s.duration
				if math.Abs(d-s.duration) > tol {
					t.Fatalf("job %s: units give %vs, workload lasts %vs", j.JobID, d, s.duration)
				}
			}
			if pg.Requests.GPUs() == 0 && j.Sensitivity.GPU != 0 {
				t.Fatalf("job %s without GPUs has GPU sensitivity %v", j.JobID, j.Sensitivity.GPU)
			}
		}
	}
	if i != len(s.jobs) {
		t.Fatalf("%s: %d jobs for %d pods", s.family, len(s.jobs), i)
	}
}

func TestIDs(t *testing.T) {
	for _, tt := range []struct {
		n, width int
		want     string
	}{{1, 6, "000001"}, {999999, 6, "999999"}, {1234567, 6, "1234567"}, {7, 2, "07"}, {100, 2, "100"}} {
		if got := string(appendIndex(nil, tt.n, tt.width)); got != tt.want {
			t.Errorf("appendIndex(%d, %d) = %s, want %s", tt.n, tt.width, got, tt.want)
		}
	}
}

func TestClassify(t *testing.T) {
	th := defaultProfile(t).Classes
	tests := []struct {
		p        trace.Profile
		gpu      bool
		cpu, gpc string
	}{
		{trace.Profile{CPUUtilization: 0.28, GPUUtilization: 0.47, MemoryIntensity: 0.58, IOIntensity: 0.08}, true, "cpu.mixed", "gpu.compute_bound"},
		{trace.Profile{CPUUtilization: 0.2, GPUUtilization: 0.3, MemoryIntensity: 0.7, IOIntensity: 0.1}, true, "cpu.light", "gpu.memory_bound"},
		{trace.Profile{CPUUtilization: 0.3, GPUUtilization: 0.3, MemoryIntensity: 0.4, IOIntensity: 0.35}, true, "cpu.io_bound", "gpu.balanced"},
		{trace.Profile{CPUUtilization: 0.8, MemoryIntensity: 0.7, IOIntensity: 0.2}, false, "cpu.compute_bound", "gpu.none"},
	}
	for _, tt := range tests {
		if got := Classify(tt.p, tt.gpu, th); got.CPU != tt.cpu || got.GPU != tt.gpc {
			t.Errorf("Classify(%+v, %v) = %+v, want %s/%s", tt.p, tt.gpu, got, tt.cpu, tt.gpc)
		}
	}
}

func TestSameSeedSameBytes(t *testing.T) {
	p := defaultProfile(t)
	run := func(seed uint64) []byte {
		var buf bytes.Buffer
		w := trace.NewWriter(&buf)
		if _, err := Write(context.Background(), w, New(p, seed), Options{Workloads: 3000, EmitWorkloadRecords: true}); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	a, b, c := run(5), run(5), run(6)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different output")
	}
	if bytes.Equal(a, c) {
		t.Fatal("different seeds, same output")
	}
}

func TestWriteRecordsInSubmitOrder(t *testing.T) {
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	st, err := Write(context.Background(), w, New(defaultProfile(t), 3), Options{Workloads: 500})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if st.Workloads != 500 || st.Jobs != len(lines) {
		t.Fatalf("stats %+v for %d lines", st, len(lines))
	}
	last := -1.0
	for i, l := range lines {
		if !strings.HasPrefix(l, `{"type":"job",`) {
			t.Fatalf("line %d is not a job record without --emit-workload-records: %s", i+1, l)
		}
		k := strings.Index(l, `"submitTimeOffsetSec":`) + len(`"submitTimeOffsetSec":`)
		v, err := strconv.ParseFloat(l[k:k+strings.IndexByte(l[k:], ',')], 64)
		if err != nil {
			t.Fatal(err)
		}
		if v < last {
			t.Fatalf("line %d goes back in time: %v < %v", i+1, v, last)
		}
		last = v
	}
}

func TestWriteStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := Write(ctx, trace.NewWriter(io.Discard), New(defaultProfile(t), 1), Options{Workloads: 100_000})
	if err == nil || st.Workloads >= 100_000 {
		t.Fatalf("cancelled Write returned %+v, %v", st, err)
	}
}

// TestGenerateMemoryIsConstant checks that generating streams: allocations per workload are the
// same for 10k and 100k workloads, and the live heap does not grow with N.
func TestGenerateMemoryIsConstant(t *testing.T) {
	p := defaultProfile(t)
	measure := func(n int) (allocsPerWorkload float64, heap uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := trace.NewWriter(io.Discard)
		if _, err := Write(context.Background(), w, New(p, 9), Options{Workloads: n, EmitWorkloadRecords: true}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(w)
		runtime.GC()
		var live runtime.MemStats
		runtime.ReadMemStats(&live)
		return float64(after.Mallocs-before.Mallocs) / float64(n), live.HeapAlloc
	}
	a10k, h10k := measure(10_000)
	a100k, h100k := measure(100_000)
	if math.Abs(a100k/a10k-1) > 0.02 {
		t.Fatalf("allocations per workload: %.3f at 10k, %.3f at 100k", a10k, a100k)
	}
	if h100k > h10k+1<<20 {
		t.Fatalf("live heap grew from %d to %d bytes", h10k, h100k)
	}
	t.Logf("allocations per workload: %.3f (10k), %.3f (100k)", a10k, a100k)
}

func TestPortableMath(t *testing.T) {
	ulps := func(a, b float64) uint64 {
		x, y := math.Float64bits(a), math.Float64bits(b)
		if x > y {
			return x - y
		}
		return y - x
	}
	s := newSampler(1)
	for i := range 200_000 {
		x := math.Ldexp(s.uniform(), i%40-30) // (0, 2^10)
		if d := ulps(logP(x), math.Log(x)); d > 2 {
			t.Fatalf("logP(%v) = %v, math.Log %v", x, logP(x), math.Log(x))
		}
		y := float64(s.uniform()*60) - 30
		// Both are within 1 ulp of the true value, so they may differ by 2.
		if d := ulps(expP(y), math.Exp(y)); d > 2 {
			t.Fatalf("expP(%v) = %v, math.Exp %v", y, expP(y), math.Exp(y))
		}
	}
	// Fixed bits: a platform whose arithmetic differs from IEEE 754 double (or fuses) fails here.
	for _, c := range []struct {
		got  float64
		want uint64
	}{
		{logP(0.3), math.Float64bits(-1.2039728043259361)},
		{expP(2.5), math.Float64bits(12.182493960703473)},
	} {
		if math.Float64bits(c.got) != c.want {
			t.Errorf("got %v (%#x), want bits %#x", c.got, math.Float64bits(c.got), c.want)
		}
	}
}

// A family's shares of a GPU replace its one-GPU workloads' whole GPU at their probabilities (a
// chi-square test over share 0.25, share 0.5 and the whole GPU), scale its CPU and memory per GPU,
// and write valid traces; other families and GPU counts are untouched.
func TestGPUSharesMix(t *testing.T) {
	p := defaultProfile(t)
	i := slices.IndexFunc(p.Families, func(f FamilySpec) bool { return f.Name == trace.DebugEval })
	p.Families[i].GPUShares = []ShareChoice{{Share: 0.25, Probability: 0.3}, {Share: 0.5, Probability: 0.2}}
	if err := p.Validate("in code"); err != nil {
		t.Fatal(err)
	}
	counts := make([]int, 3) // 0.25, 0.5, whole
	g := New(p, 21)
	for range statN / 4 {
		wl, jobs := g.Next()
		if err := wl.Validate(); err != nil {
			t.Fatal(err)
		}
		share := 0.0
		for _, pg := range wl.Pods {
			share = max(share, pg.Requests.GPUFraction())
		}
		if share > 0 && (wl.WorkloadType != trace.DebugEval || len(wl.Pods) != 1 || wl.TotalGPUs() != 0) {
			t.Fatalf("%s %s asks for a share %v: %+v", wl.WorkloadID, wl.WorkloadType, share, wl.Pods)
		}
		if wl.WorkloadType != trace.DebugEval || (share == 0 && wl.TotalGPUs() != 1) {
			continue
		}
		switch share {
		case 0.25:
			counts[0]++
		case 0.5:
			counts[1]++
		case 0:
			counts[2]++
		default:
			t.Fatalf("share %v not in the profile", share)
		}
		if share > 0 {
			// main: {cpu: 2, cpuPerGPU: 2, memoryGi: 8, memoryGiPerGPU: 16}
			req := wl.Pods[0].Requests
			if req.Value(trace.ResourceCPU) != 2+2*share || req.Value(trace.ResourceMemory) != (8+16*share)*(1<<30) {
				t.Errorf("share %v: requests %v", share, req)
			}
			if d := trace.JobDuration(&jobs[0], work.DefaultRates()); math.Abs(d-wl.DurationSec) > 1e-4*wl.DurationSec+0.05 { // work units are rounded to 0.01
				t.Errorf("share %v: job record's work lasts %v, the workload %v", share, d, wl.DurationSec)
			}
		}
	}
	if pv := chiSquareP(t, counts, []float64{0.3, 0.2, 0.5}); pv < pMin {
		t.Fatalf("shares %v vs 0.3/0.2/0.5: chi-square p = %g", counts, pv)
	}
}
