// Package gen samples synthetic AI workload traces: logical workloads arrive by a day-shaped Poisson
// process and draw their family, GPU footprint, duration, intensity profile, pods and work from the
// priors of a versioned profile. The same profile and seed give byte-identical records on any platform.
package gen

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

const (
	secondsPerHour = 3600
	secondsPerDay  = 86400
)

// Generator draws logical workloads in submit order. It reuses its buffers: what Next returns is
// valid until the next call, and the Requests maps are shared between records (read-only).
type Generator struct {
	p     *Profile
	s     *sampler
	rates work.Rates

	gpuFams, cpuFams []*FamilySpec // in trace.Families order, so profile order never matters
	oneGPUMean       float64

	// arrival state
	t            float64
	day          int
	burstPending bool
	burstStart   float64
	burstLeft    int

	seq      int
	wl       trace.Workload
	jobs     []trace.Job
	reqCache map[reqKey]trace.Requests
	id       []byte
}

type reqKey struct {
	cpuMilli, memMi int64
	gpus            int
	shareMilli      int64 // a share of a GPU instead of gpus, in thousandths
}

// New returns a generator for a validated profile. The profile must not change while it is in use.
func New(p *Profile, seed uint64) *Generator {
	g := &Generator{
		p:        p,
		s:        newSampler(seed),
		rates:    work.Rates{CPUPerCore: p.Work.CPURatePerCore, GPUPerGPU: p.Work.GPURatePerGPU},
		day:      -1,
		reqCache: make(map[reqKey]trace.Requests),
	}
	for _, f := range trace.Families {
		spec := p.Family(f)
		if f.GPU() {
			g.gpuFams = append(g.gpuFams, spec)
		} else {
			g.cpuFams = append(g.cpuFams, spec)
		}
	}
	for _, c := range p.GPUCount {
		if c.GPUs == 1 {
			g.oneGPUMean = c.UtilizationMean
		}
	}
	return g
}

// Next draws the next workload and its job records (one per pod).
func (g *Generator) Next() (*trace.Workload, []trace.Job) {
	p, s := g.p, g.s
	g.seq++
	t := g.arrive()

	var f *FamilySpec
	if s.uniform() < p.GPURatio {
		f = g.gpuFams[s.pick(len(g.gpuFams), func(i int) float64 { return g.gpuFams[i].Probability })]
	} else {
		f = g.cpuFams[s.pick(len(g.cpuFams), func(i int) float64 { return g.cpuFams[i].Probability })]
	}
	gpus, trials, utilMean := 0, 0, 0.0
	switch {
	case f.Name == trace.HPOExperiment:
		trials = s.intIn(p.HPOTrials.Min, p.HPOTrials.Max)
		gpus, utilMean = trials, g.oneGPUMean
	case f.Name.GPU():
		c := p.GPUCount[s.pick(len(p.GPUCount), func(i int) float64 { return p.GPUCount[i].Probability })]
		gpus, utilMean = c.GPUs, c.UtilizationMean
	}
	// Drawn only for a family with shares, so that profiles without them keep their streams.
	share := 0.0
	if len(f.GPUShares) > 0 && gpus == 1 {
		u := s.uniform()
		for _, c := range f.GPUShares {
			if u < c.Probability {
				share = c.Share
				break
			}
			u -= c.Probability
		}
	}
	ns := p.Teams[s.pick(len(p.Teams), func(i int) float64 { return p.Teams[i].Probability })].Namespace
	intent := trace.IntentStandard
	switch u := s.uniform(); {
	case u < p.Intent.PerformanceRatio:
		intent = trace.IntentPerformance
	case u < p.Intent.PerformanceRatio+p.Intent.EcoRatio:
		intent = trace.IntentEco
	}
	dur := g.duration(f, gpus)

	var prof trace.Profile
	if f.Name.GPU() {
		lo, hi := p.gpuUtilizationBounds(f, utilMean)
		prof.GPUUtilization = round4(s.uniformIn(lo, hi))
	}
	prof.CPUUtilization = round4(s.uniformIn(f.CPUUtilization.Min, f.CPUUtilization.Max))
	prof.MemoryIntensity = round4(s.uniformIn(f.MemoryIntensity.Min, f.MemoryIntensity.Max))
	prof.IOIntensity = round4(s.uniformIn(f.IOIntensity.Min, f.IOIntensity.Max))
	prof.CPUFeedIntensityGPU = round4(s.uniformIn(f.CPUFeedIntensityGPU.Min, f.CPUFeedIntensityGPU.Max))
	sens := trace.Sensitivity{
		CPU: round4(s.uniformIn(f.Sensitivity.CPU.Min, f.Sensitivity.CPU.Max)),
		GPU: round4(s.uniformIn(f.Sensitivity.GPU.Min, f.Sensitivity.GPU.Max)),
	}
	class := Classify(prof, f.Name.GPU(), p.Classes)

	wl := &g.wl
	g.id = append(g.id[:0], "workload-"...)
	g.id = appendIndex(g.id, g.seq, 6)
	*wl = trace.Workload{
		SchemaVersion:          trace.SchemaVersion,
		WorkloadID:             string(g.id),
		SubmitTimeOffsetSec:    math.Round(t*1000) / 1000,
		Namespace:              ns,
		WorkloadType:           f.Name,
		DurationSec:            dur,
		WorkloadClass:          class,
		SharedIntensityProfile: prof,
		Pods:                   g.pods(f, gpus, share, trials, wl.Pods[:0]),
		IntentClass:            intent,
		CheckpointIntervalSec:  f.Checkpoint.IntervalSec,
		CheckpointCostSec:      f.Checkpoint.CostSec,
		RestartOverheadSec:     f.Checkpoint.RestartSec,
		MaxRestarts:            f.MaxRestarts,
	}
	wl.Gang = f.Name == trace.DistributedTraining || f.Name == trace.ParameterServerTraining
	for i := range wl.Pods {
		wl.Pods[i].Gang = wl.Gang
	}
	g.jobs = g.appendJobs(g.jobs[:0], wl, sens)
	return wl, g.jobs
}

// arrive advances the clock to the next submission of the non-homogeneous Poisson process. The
// exponential draw is spent across hour boundaries at each hour's rate, so arrivals per hour of day
// are exactly proportional to the multipliers.
func (g *Generator) arrive() float64 {
	a := &g.p.Arrival
	boost := 1.0
	if g.burstLeft > 0 {
		boost = a.Burst.Multiplier
		g.burstLeft--
	}
	e := g.s.exp1()
	t := g.t
	for {
		hour := math.Floor(t / secondsPerHour)
		end := float64((hour + 1) * secondsPerHour)
		rate := float64(a.HourlyMultipliers[int(hour)%24]*boost) / a.MeanInterArrivalSec
		capacity := float64(rate * (end - t))
		if e < capacity {
			t += e / rate
			break
		}
		e -= capacity
		t = end
	}
	g.t = t
	if a.Burst.DayProbability > 0 {
		if day := int(t / secondsPerDay); day != g.day {
			g.day = day
			g.burstPending = g.s.uniform() < a.Burst.DayProbability
			if g.burstPending {
				g.burstStart = float64(float64(day)*secondsPerDay) + float64(g.s.uniform()*secondsPerDay)
			}
		}
		if g.burstPending && t >= g.burstStart {
			g.burstPending = false
			g.burstLeft = g.s.geometric(a.Burst.MeanJobs)
		}
	}
	return t
}

// duration draws a clamped lognormal duration in whole seconds.
func (g *Generator) duration(f *FamilySpec, gpus int) float64 {
	d := f.Duration
	x := g.s.lognormal(d.MedianSec, d.Sigma)
	if d.LargeGPUMin > 0 && gpus >= d.LargeGPUMin {
		x *= d.LargeGPUFactor
	}
	return math.Min(d.MaxSec, math.Max(d.MinSec, math.Round(x)))
}

// pods builds the pod groups of a family: its structure is the model's, its sizes the profile's.
func (g *Generator) pods(f *FamilySpec, gpus int, share float64, trials int, pods []trace.PodGroup) []trace.PodGroup {
	r := &f.Roles
	switch f.Name {
	case trace.DistributedTraining:
		pods = append(pods,
			trace.PodGroup{Role: trace.RoleLauncher, Replicas: 1, Requests: g.requests(r.Launcher, 0)},
			trace.PodGroup{Role: trace.RoleWorker, Replicas: gpus, Requests: g.requests(r.Worker, 1)})
	case trace.ParameterServerTraining:
		ps := 1
		if gpus >= 4 {
			ps = 2
		}
		pods = append(pods,
			trace.PodGroup{Role: trace.RolePS, Replicas: ps, Requests: g.requests(r.PS, 0)},
			trace.PodGroup{Role: trace.RoleWorker, Replicas: gpus, Requests: g.requests(r.Worker, 1)})
	case trace.HPOExperiment:
		pods = append(pods,
			trace.PodGroup{Role: trace.RoleController, Replicas: 1, Requests: g.requests(r.Controller, 0)},
			trace.PodGroup{Role: trace.RoleTrial, Replicas: trials, Requests: g.requests(r.Trial, 1)})
	default: // single_gpu_training, debug_eval (all G GPUs, or a share of one, in one pod), CPU families (no GPU)
		var req trace.Requests
		if share > 0 {
			req = g.shareRequests(r.Main, share)
		} else {
			req = g.requests(r.Main, gpus)
		}
		pods = append(pods, trace.PodGroup{Role: trace.RoleMain, Replicas: 1, Requests: req})
	}
	return pods
}

// requests sizes one pod of a role with podGPUs GPUs. Equal shapes share one map.
func (g *Generator) requests(r *RoleSpec, podGPUs int) trace.Requests {
	return g.sized(r, reqKey{gpus: podGPUs})
}

// shareRequests sizes one pod of a role with a share of a GPU (in thousandths, as the profile
// gives it): CPU and memory per GPU scale with the share. Equal shapes share one map.
func (g *Generator) shareRequests(r *RoleSpec, share float64) trace.Requests {
	return g.sized(r, reqKey{shareMilli: int64(math.Round(share * 1000))})
}

// sized sizes one pod of a role holding dev's GPUs or share of one.
func (g *Generator) sized(r *RoleSpec, dev reqKey) trace.Requests {
	cpu := r.CPU
	if len(r.CPUChoices) > 0 {
		cpu = r.CPUChoices[g.s.pick(len(r.CPUChoices), func(i int) float64 { return r.CPUChoices[i].Probability })].Cores
	}
	n := float64(dev.gpus) + float64(dev.shareMilli)/1000
	cpu += r.CPUPerGPU * n
	mem := r.MemoryGi + r.MemoryGiPerGPU*n + r.MemoryGiPerCPU*cpu
	key := dev
	key.cpuMilli, key.memMi = int64(math.Round(cpu*1000)), int64(math.Round(mem*1024))
	if req, ok := g.reqCache[key]; ok {
		return req
	}
	req := trace.Requests{trace.ResourceCPU: milliQuantity(key.cpuMilli), trace.ResourceMemory: memQuantity(key.memMi)}
	if key.gpus > 0 {
		req[trace.ResourceGPU] = strconv.Itoa(key.gpus)
	}
	if key.shareMilli > 0 {
		req[trace.ResourceGPUFraction] = strconv.FormatFloat(float64(key.shareMilli)/1000, 'f', -1, 64)
	}
	g.reqCache[key] = req
	return req
}

func milliQuantity(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

func memQuantity(mi int64) string {
	if mi%1024 == 0 {
		return strconv.FormatInt(mi/1024, 10) + "Gi"
	}
	return strconv.FormatInt(mi, 10) + "Mi"
}

// appendJobs appends one job record per pod, numbered per role from 1.
func (g *Generator) appendJobs(jobs []trace.Job, wl *trace.Workload, sens trace.Sensitivity) []trace.Job {
	prof := wl.SharedIntensityProfile
	for _, pg := range wl.Pods {
		cpu := pg.Requests.Value(trace.ResourceCPU)
		gpus, share := pg.Requests.GPUWork()
		podSens := sens
		if gpus == 0 {
			podSens.GPU = 0 // a pod without GPUs cannot be slowed by GPU speed
		}
		units := trace.Work{
			CPUUnits: round2(work.Units(wl.DurationSec, cpu, prof.CPUUtilization, g.rates.CPUPerCore, pg.Role)),
			GPUUnits: round2(work.Units(wl.DurationSec, gpus, share*prof.GPUUtilization, g.rates.GPUPerGPU, pg.Role)),
		}
		for i := 1; i <= pg.Replicas; i++ {
			g.id = append(g.id[:0], wl.WorkloadID...)
			g.id = append(g.id, '-')
			g.id = append(g.id, pg.Role...)
			g.id = append(g.id, '-')
			g.id = appendIndex(g.id, i, 2)
			jobs = append(jobs, trace.Job{
				SchemaVersion:       trace.SchemaVersion,
				JobID:               string(g.id),
				WorkloadID:          wl.WorkloadID,
				WorkloadType:        wl.WorkloadType,
				PodRole:             pg.Role,
				Gang:                wl.Gang,
				SubmitTimeOffsetSec: wl.SubmitTimeOffsetSec,
				Namespace:           wl.Namespace,
				PodTemplate:         trace.PodTemplate{Requests: pg.Requests},
				Work:                units,
				Sensitivity:         podSens,
				WorkloadClass:       wl.WorkloadClass,
				WorkloadProfile:     prof,
				IntentClass:         wl.IntentClass,
			})
		}
	}
	return jobs
}

// appendIndex appends n zero-padded to at least width digits.
func appendIndex(b []byte, n, width int) []byte {
	var tmp [20]byte
	digits := strconv.AppendInt(tmp[:0], int64(n), 10)
	for i := len(digits); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, digits...)
}

// Classify derives the workloadClass labels from a shared profile; hasGPU is false for CPU families.
// This is the one place the rule lives (it is also described in profiles/default.yaml).
func Classify(p trace.Profile, hasGPU bool, th Thresholds) trace.Class {
	var c trace.Class
	switch {
	case !hasGPU:
		c.GPU = "gpu.none"
	case p.MemoryIntensity >= th.GPUMemoryBoundMin && p.MemoryIntensity > p.GPUUtilization:
		c.GPU = "gpu.memory_bound"
	case p.GPUUtilization >= th.GPUComputeBoundMin:
		c.GPU = "gpu.compute_bound"
	default:
		c.GPU = "gpu.balanced"
	}
	switch {
	case p.IOIntensity >= th.CPUIOBoundMin:
		c.CPU = "cpu.io_bound"
	case p.CPUUtilization >= th.CPUComputeBoundMin:
		c.CPU = "cpu.compute_bound"
	case p.CPUUtilization < th.CPULightMax:
		c.CPU = "cpu.light"
	default:
		c.CPU = "cpu.mixed"
	}
	return c
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
func round2(x float64) float64 { return math.Round(x*100) / 100 }

// Stats counts what Write produced.
type Stats struct {
	Workloads int
	Jobs      int
}

// Options control Write.
type Options struct {
	// Workloads is the number of logical workloads to generate.
	Workloads int
	// EmitWorkloadRecords writes each workload record before its job records.
	EmitWorkloadRecords bool
	// Progress, when set, is called with the number of workloads done every few thousand workloads.
	Progress func(done int)
}

// progressEvery is how often Write reports progress and checks for cancellation.
const progressEvery = 4096

// Write streams opts.Workloads workloads from g to w in submit order; memory does not grow with the
// count. It stops early with ctx's error when ctx is cancelled (the caller still flushes w).
func Write(ctx context.Context, w *trace.Writer, g *Generator, opts Options) (Stats, error) {
	var st Stats
	for i := 0; i < opts.Workloads; i++ {
		if i%progressEvery == 0 && i > 0 {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if opts.Progress != nil {
				opts.Progress(i)
			}
		}
		wl, jobs := g.Next()
		if opts.EmitWorkloadRecords {
			if err := w.WriteWorkload(wl); err != nil {
				return st, fmt.Errorf("generate: %w", err)
			}
		}
		for j := range jobs {
			if err := w.WriteJob(&jobs[j]); err != nil {
				return st, fmt.Errorf("generate: %w", err)
			}
		}
		st.Workloads++
		st.Jobs += len(jobs)
	}
	if opts.Progress != nil {
		opts.Progress(opts.Workloads)
	}
	return st, nil
}
