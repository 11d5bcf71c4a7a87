package gen

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

// fitN is the round trip's trace size: 100,000 workloads, the size the fit is held to; -short uses
// 20,000.
func fitN() int {
	if testing.Short() {
		return 20000
	}
	return 100000
}

// memTrace generates n workloads of p into an in-memory trace (the generator reuses its buffers,
// so records are copied).
func memTrace(t testing.TB, p *Profile, seed uint64, n int) *trace.Trace {
	t.Helper()
	g := New(p, seed)
	tr := &trace.Trace{Jobs: make(map[string][]*trace.Job, n)}
	for range n {
		w, jobs := g.Next()
		wc := *w
		wc.Pods = slices.Clone(w.Pods)
		tr.Workloads = append(tr.Workloads, &wc)
		js := make([]*trace.Job, len(jobs))
		for i := range jobs {
			j := jobs[i]
			js[i] = &j
		}
		tr.Jobs[wc.WorkloadID] = js
	}
	return tr
}

// within fails the test when got is further than tol from want (absolute).
func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol || math.IsNaN(got) {
		t.Errorf("%s: fitted %.5g, source %.5g (tolerance %.3g)", what, got, want, tol)
	}
}

// relWithin is within with a relative tolerance.
func relWithin(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	within(t, what, got, want, rel*math.Abs(want))
}

// TestFitRoundTrip generates 100,000 workloads with the default profile P, fits P' to them and
// checks every prior against P within stated tolerances:
//
//   - shares (families, GPU counts, intents, teams, gpuRatio, CPU choices): 0.01 absolute;
//   - hourly arrival rates (multiplier / mean inter-arrival): 5% relative; no burst found;
//   - duration medians and sigmas per family: 5% relative (3% for the largest families),
//     clamps exact, distributed_training's large-GPU rule (>= 4 GPUs, x1.2) found;
//   - utilisation means x family scales: 0.01 absolute; half-width 0.01;
//   - uniform ranges (intensities, sensitivities): 0.01 absolute;
//   - pod sizes: 0.05 (cores, Gi); work rates 1%; HPO trial counts and class thresholds exact to 0.01.
func TestFitRoundTrip(t *testing.T) {
	p := defaultProfile(t)
	n := fitN()
	src := memTrace(t, p, 1, n)
	q, rep, err := Fit(src)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("fit report:\n%s", buf.String())
	// The fitted profile is a valid profile file.
	y, err := q.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseProfile("fitted.yaml", y); err != nil {
		t.Fatalf("fitted profile does not parse back: %v\n%s", err, y)
	}
	shareTol := 0.01
	within(t, "gpuRatio", q.GPURatio, p.GPURatio, shareTol)
	within(t, "intent.performanceRatio", q.Intent.PerformanceRatio, p.Intent.PerformanceRatio, shareTol)
	within(t, "intent.ecoRatio", q.Intent.EcoRatio, p.Intent.EcoRatio, shareTol)
	if len(q.Teams) != len(p.Teams) {
		t.Fatalf("teams %v", q.Teams)
	}
	for _, pt := range p.Teams {
		i := slices.IndexFunc(q.Teams, func(x Team) bool { return x.Namespace == pt.Namespace })
		if i < 0 {
			t.Fatalf("team %s not fitted", pt.Namespace)
		}
		within(t, "team "+pt.Namespace, q.Teams[i].Probability, pt.Probability, shareTol)
	}
	for _, pg := range p.GPUCount {
		i := slices.IndexFunc(q.GPUCount, func(x GPUCount) bool { return x.GPUs == pg.GPUs })
		if i < 0 {
			t.Fatalf("gpuCount %d not fitted", pg.GPUs)
		}
		qg := q.GPUCount[i]
		within(t, fmt.Sprintf("gpuCount[%d].probability", pg.GPUs), qg.Probability, pg.Probability, shareTol)
		for _, pf := range p.Families {
			if !pf.Name.GPU() {
				continue
			}
			qf := q.Family(pf.Name)
			within(t, fmt.Sprintf("mean utilisation of %s at %d GPUs", pf.Name, pg.GPUs), qg.UtilizationMean*qf.GPUUtilizationScale, pg.UtilizationMean*pf.GPUUtilizationScale, 0.01)
		}
	}
	within(t, "gpuUtilizationHalfWidth", q.GPUUtilizationHalfWidth, p.GPUUtilizationHalfWidth, 0.01)
	if q.HPOTrials != p.HPOTrials {
		t.Errorf("hpoTrials %+v, source %+v", q.HPOTrials, p.HPOTrials)
	}
	relWithin(t, "work.cpuRatePerCore", q.Work.CPURatePerCore, p.Work.CPURatePerCore, 0.01)
	relWithin(t, "work.gpuRatePerGPU", q.Work.GPURatePerGPU, p.Work.GPURatePerGPU, 0.01)
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"gpuComputeBoundMin", q.Classes.GPUComputeBoundMin, p.Classes.GPUComputeBoundMin},
		{"gpuMemoryBoundMin", q.Classes.GPUMemoryBoundMin, p.Classes.GPUMemoryBoundMin},
		{"cpuIOBoundMin", q.Classes.CPUIOBoundMin, p.Classes.CPUIOBoundMin},
		{"cpuComputeBoundMin", q.Classes.CPUComputeBoundMin, p.Classes.CPUComputeBoundMin},
		{"cpuLightMax", q.Classes.CPULightMax, p.Classes.CPULightMax},
	} {
		within(t, "classes."+x.name, x.got, x.want, 0.01)
	}
	// Arrivals: the rate of each hour of day.
	for h := range 24 {
		relWithin(t, fmt.Sprintf("arrival rate at %02d:00", h), q.Arrival.HourlyMultipliers[h]/q.Arrival.MeanInterArrivalSec,
			p.Arrival.HourlyMultipliers[h]/p.Arrival.MeanInterArrivalSec, 0.05)
	}
	within(t, "burst.dayProbability", q.Arrival.Burst.DayProbability, 0, 0.05)
	for _, pf := range p.Families {
		qf := q.Family(pf.Name)
		name := string(pf.Name)
		within(t, name+".probability", qf.Probability, pf.Probability, shareTol)
		tol := 0.05
		relWithin(t, name+".duration.medianSec", qf.Duration.MedianSec, pf.Duration.MedianSec, tol)
		relWithin(t, name+".duration.sigma", qf.Duration.Sigma, pf.Duration.Sigma, tol)
		// A clamp the source's durations reach is found exactly; one they never reach is not
		// identifiable, and the fit keeps the largest duration seen (inside the clamp).
		for _, c := range []struct {
			what             string
			got, want, reach float64
		}{{"minSec", qf.Duration.MinSec, pf.Duration.MinSec, atClamp(src, pf.Name, pf.Duration.MinSec)}, {"maxSec", qf.Duration.MaxSec, pf.Duration.MaxSec, atClamp(src, pf.Name, pf.Duration.MaxSec)}} {
			if (c.reach > 1 && c.got != c.want) || c.got < pf.Duration.MinSec || c.got > pf.Duration.MaxSec {
				t.Errorf("%s.duration.%s %v, source %v (%v durations at it)", name, c.what, c.got, c.want, c.reach)
			}
		}
		if qf.Duration.LargeGPUMin != pf.Duration.LargeGPUMin {
			t.Errorf("%s: largeGPUMin %d, source %d", name, qf.Duration.LargeGPUMin, pf.Duration.LargeGPUMin)
		} else if pf.Duration.LargeGPUMin > 0 {
			relWithin(t, name+".duration.largeGPUFactor", qf.Duration.LargeGPUFactor, pf.Duration.LargeGPUFactor, 0.05)
		}
		for _, r := range []struct {
			what      string
			got, want Range
		}{
			{"cpuUtilization", qf.CPUUtilization, pf.CPUUtilization}, {"memoryIntensity", qf.MemoryIntensity, pf.MemoryIntensity},
			{"ioIntensity", qf.IOIntensity, pf.IOIntensity}, {"cpuFeedIntensityGpu", qf.CPUFeedIntensityGPU, pf.CPUFeedIntensityGPU},
			{"sensitivity.cpu", qf.Sensitivity.CPU, pf.Sensitivity.CPU}, {"sensitivity.gpu", qf.Sensitivity.GPU, pf.Sensitivity.GPU},
		} {
			within(t, name+"."+r.what+".min", r.got.Min, r.want.Min, 0.01)
			within(t, name+"."+r.what+".max", r.got.Max, r.want.Max, 0.01)
		}
		for _, role := range familyRoles(pf.Name) {
			pr, qr := pf.Roles.role(role), qf.Roles.role(role)
			// Compare pod sizes at the GPU counts the role's pods have.
			for _, g := range []float64{0, 1, 2, 4, 8} {
				if g > 0 && !(pf.Name.GPU() && (role == trace.RoleMain || role == trace.RoleWorker || role == trace.RoleTrial)) {
					continue
				}
				within(t, fmt.Sprintf("%s.roles.%s cpu at %g GPUs", name, role, g), meanCPU(qr)+qr.CPUPerGPU*g, meanCPU(pr)+pr.CPUPerGPU*g, 0.05)
				within(t, fmt.Sprintf("%s.roles.%s memory at %g GPUs", name, role, g), qr.MemoryGi+qr.MemoryGiPerGPU*g+qr.MemoryGiPerCPU*meanCPU(qr),
					pr.MemoryGi+pr.MemoryGiPerGPU*g+pr.MemoryGiPerCPU*meanCPU(pr), 0.05)
			}
			for _, c := range pr.CPUChoices {
				i := slices.IndexFunc(qr.CPUChoices, func(x CPUChoice) bool { return x.Cores == c.Cores })
				if i < 0 {
					t.Errorf("%s.roles.%s: no %g-core choice", name, role, c.Cores)
					continue
				}
				within(t, fmt.Sprintf("%s.roles.%s %g-core share", name, role, c.Cores), qr.CPUChoices[i].Probability, c.Probability, shareTol)
			}
		}
	}
	// A trace generated by the model passes the model's own independence tests.
	for _, c := range rep.Categorical {
		if c.P < 1e-4 {
			t.Errorf("%s: chi2 %.1f on %d df, p %.2g: the generator's own trace fails its model", c.Name, c.Chi2, c.DF, c.P)
		}
	}
	for _, d := range rep.Durations {
		if d.KS > 0.02 {
			t.Errorf("%s: KS distance %.4f of the fitted durations", d.Family, d.KS)
		}
	}

	// gen --profile P' reproduces the source trace's statistics.
	again := memTrace(t, q, 2, n)
	compareTraces(t, src, again)
}

// atClamp counts the workloads of family f whose duration is x.
func atClamp(tr *trace.Trace, f trace.Family, x float64) float64 {
	n := 0.0
	for _, w := range tr.Workloads {
		if w.WorkloadType == f && w.DurationSec == x {
			n++
		}
	}
	return n
}

func meanCPU(r *RoleSpec) float64 {
	if len(r.CPUChoices) == 0 {
		return r.CPU
	}
	m := 0.0
	for _, c := range r.CPUChoices {
		m += c.Cores * c.Probability
	}
	return m
}

// compareTraces checks that b reproduces a's statistics: family, GPU-count and intent shares within
// 0.01, arrivals per hour of day within 0.005 of the share, per-family duration distributions
// within a two-sample KS distance of 0.03.
func compareTraces(t *testing.T, a, b *trace.Trace) {
	t.Helper()
	type stats struct {
		fam, gpus, intent, hour map[string]float64
		dur                     map[trace.Family][]float64
	}
	of := func(tr *trace.Trace) stats {
		s := stats{fam: map[string]float64{}, gpus: map[string]float64{}, intent: map[string]float64{}, hour: map[string]float64{}, dur: map[trace.Family][]float64{}}
		n := float64(len(tr.Workloads))
		for _, w := range tr.Workloads {
			s.fam[string(w.WorkloadType)] += 1 / n
			s.gpus[fmt.Sprint(w.TotalGPUs())] += 1 / n
			s.intent[w.Intent()] += 1 / n
			s.hour[fmt.Sprint(HourOf(w.SubmitTimeOffsetSec))] += 1 / n
			s.dur[w.WorkloadType] = append(s.dur[w.WorkloadType], w.DurationSec)
		}
		return s
	}
	sa, sb := of(a), of(b)
	for _, m := range []struct {
		name string
		a, b map[string]float64
		tol  float64
	}{{"family", sa.fam, sb.fam, 0.01}, {"GPUs", sa.gpus, sb.gpus, 0.01}, {"intent", sa.intent, sb.intent, 0.01}, {"hour", sa.hour, sb.hour, 0.005}} {
		for k := range m.a {
			within(t, fmt.Sprintf("regenerated %s %s share", m.name, k), m.b[k], m.a[k], m.tol)
		}
	}
	for f, x := range sa.dur {
		if d := ks2(x, sb.dur[f]); d > 0.03 {
			t.Errorf("regenerated %s durations: two-sample KS distance %.4f", f, d)
		}
	}
}

// ks2 is the two-sample Kolmogorov-Smirnov distance.
func ks2(a, b []float64) float64 {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Float64s(a)
	sort.Float64s(b)
	i, j, d := 0, 0, 0.0
	for i < len(a) && j < len(b) {
		x := math.Min(a[i], b[j])
		for i < len(a) && a[i] == x {
			i++
		}
		for j < len(b) && b[j] == x {
			j++
		}
		d = math.Max(d, math.Abs(float64(i)/float64(len(a))-float64(j)/float64(len(b))))
	}
	return d
}

// TestFitFindsBursts fits a profile with burst days: one day in three gets a burst of about 200
// submissions arriving 5 times faster.
func TestFitFindsBursts(t *testing.T) {
	p := defaultProfile(t)
	p.Arrival.Burst = Burst{DayProbability: 0.3, Multiplier: 5, MeanJobs: 200}
	n := fitN()
	q, rep, err := Fit(memTrace(t, p, 3, n))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bursts on %d of %d days; fitted %+v", rep.Bursts, rep.BurstDays, rep.TraceDays, q.Arrival.Burst)
	within(t, "burst.dayProbability", q.Arrival.Burst.DayProbability, 0.3, 0.1)
	relWithin(t, "burst.multiplier", q.Arrival.Burst.Multiplier, 5, 0.25)
	relWithin(t, "burst.meanJobs", q.Arrival.Burst.MeanJobs, 200, 0.3)
	for h := range 24 {
		relWithin(t, fmt.Sprintf("arrival rate at %02d:00", h), q.Arrival.HourlyMultipliers[h]/q.Arrival.MeanInterArrivalSec,
			p.Arrival.HourlyMultipliers[h]/p.Arrival.MeanInterArrivalSec, 0.08)
	}
}

// TestFitJoulieTrace fits the real Joulie trace: a valid profile, and notes for what its labels
// cannot tell.
func TestFitJoulieTrace(t *testing.T) {
	tr, err := trace.LoadWorkloads(t.Context(), "../../testdata/joulie/default-60.jsonl", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q, rep, err := Fit(tr)
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(rep.Notes, "\n")
	if len(q.Teams) != 1 || q.Teams[0].Namespace != "default" || !strings.Contains(notes, "workloadClass labels are not the generator's") || strings.Contains(notes, "no \"main\" pods") {
		t.Fatalf("teams %v, notes:\n%s", q.Teams, notes)
	}
	// Joulie's debug_eval pods (role worker) size the profile's main role.
	if m := q.Family(trace.DebugEval).Roles.Main; m == nil || m.CPUPerGPU+m.CPU <= 0 {
		t.Fatalf("debug_eval main %+v", m)
	}
}
