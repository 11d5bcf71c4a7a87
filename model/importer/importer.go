// Package importer turns public GPU cluster traces into kueuelab traces (schema v2): Microsoft
// Philly's cluster_job_log, SenseTime Helios' cluster_log.csv, Alibaba PAI's v2020 pai_job_table
// and pai_task_table (with pai_sensor_table for utilisation), and Alibaba's v2026 GPU cluster
// (GFS) job_info_df.csv. Each format is read by its published layout; every job becomes one
// logical workload with one job record per pod.
//
// What the public traces do not say is inferred by documented rules, the same for every format:
//
//   - Family: a job without GPUs is cpu_analytics when it ran at least 1800 s (the default
//     profile's cpu_analytics median), else cpu_preprocess. A job with a parameter-server task
//     (PAI's "ps") is parameter_server_training. A job with more than one GPU pod (Philly machines,
//     Helios nodes, PAI instances, GFS workers) is distributed_training. A single GPU pod is
//     debug_eval when it ran at most 1000 s (debug_eval's clamp in the default profile), else
//     single_gpu_training. hpo_experiment is never inferred: no format says which jobs are trials.
//   - Gang: distributed and parameter-server workloads are gang, the others not.
//   - Roles: ps for parameter servers; in a distributed job a single-instance task without GPUs is
//     the launcher, every other pod a worker; single-pod families use main.
//   - Team: the namespace is the virtual cluster where the format has one (Philly vc, Helios vc),
//     else the user (PAI) or the organization (GFS), as a DNS label ("vc-" or "user-"/"org-"
//     prefixed; a value that loses information when lowercased gets a short hash suffix).
//     Options.TeamBy picks another column where there is one.
//   - Priority: GFS's HP jobs get intent performance, its Spot jobs eco; other formats have no
//     priority column and leave the intent unset (standard).
//   - Requests: as the trace gives them per pod (PAI's percentages as cores and whole GPUs,
//     rounded up); what a format does not give (Philly's CPU and memory, Helios' memory) is sized
//     by the default generator profile's role rules for the inferred family.
//   - Duration and work: durationSec is the time the job ran (the last Philly attempt, Helios'
//     duration, PAI's end minus first task start, GFS's duration); work units follow from it with
//     model/work at the utilisation the trace measured (PAI's sensor table) or, where it has none,
//     the default profile's (the Philly means per GPU count, family ranges' midpoints).
//
// Jobs that never ran (no start or end time, still running, zero run time) are skipped and
// counted, not errors: every public trace has them. A malformed row is an error naming the file,
// line and column, unless Options.Lenient skips it (listed in Result.Skipped).
package importer

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

// Formats lists the public trace formats Import reads.
var Formats = []string{"philly", "helios", "alibaba-pai", "alibaba-gfs"}

// Options tune an import.
type Options struct {
	// TeamBy names the column the namespace comes from: "vc" or "user" for Philly and Helios,
	// "user" for PAI, "org" for GFS; "" is the format's default (vc, vc, user, org).
	TeamBy string
	// Lenient skips malformed rows (listed in Result.Skipped) instead of failing on the first.
	Lenient bool
	// Profile sizes what a trace does not give (nil: the embedded default profile).
	Profile *gen.Profile
}

// Result is an imported trace.
type Result struct {
	// Workloads in submit order, ties by id; Jobs holds each one's job records.
	Workloads []*trace.Workload
	Jobs      map[string][]*trace.Job
	// Jobs of the source that were left out and why: never ran (counted by reason in NotRun),
	// or a malformed row in lenient mode (listed in Skipped).
	NotRun  map[string]int
	Skipped []*fielderr.Error
	// Read counts the source's jobs.
	Read int
}

// Import reads files in format and returns the trace they describe.
func Import(format string, files []string, opts Options) (*Result, error) {
	if len(files) == 0 {
		return nil, fmt.Errorf("import %s: no input files", format)
	}
	if opts.Profile == nil {
		p, err := gen.DefaultProfile()
		if err != nil {
			return nil, err
		}
		opts.Profile = p
	}
	r := &reader{opts: opts, res: &Result{Jobs: map[string][]*trace.Job{}, NotRun: map[string]int{}}}
	var jobs []*Job
	var err error
	switch format {
	case "philly":
		jobs, err = r.philly(files)
	case "helios":
		jobs, err = r.helios(files)
	case "alibaba-pai":
		jobs, err = r.pai(files)
	case "alibaba-gfs":
		jobs, err = r.gfs(files)
	default:
		return nil, fmt.Errorf("import: unknown format %q (want one of %s)", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("import %s: no job of %s ran (%s)", format, strings.Join(files, ", "), r.res.NotRunSummary())
	}
	r.res.Read = len(jobs) + r.notRunTotal()
	if err := r.buildAll(jobs); err != nil {
		return nil, err
	}
	return r.res, nil
}

// Build turns jobs read by another importer into a trace by the package's rules (see the package
// comment) where the jobs leave them open. notRun counts the source's jobs that did not run.
func Build(jobs []*Job, notRun map[string]int, opts Options) (*Result, error) {
	if opts.Profile == nil {
		p, err := gen.DefaultProfile()
		if err != nil {
			return nil, err
		}
		opts.Profile = p
	}
	r := &reader{opts: opts, res: &Result{Jobs: map[string][]*trace.Job{}, NotRun: map[string]int{}}}
	for k, v := range notRun {
		r.res.NotRun[k] = v
	}
	r.res.Read = len(jobs) + r.notRunTotal()
	if len(jobs) == 0 {
		return r.res, nil
	}
	return r.res, r.buildAll(jobs)
}

func (r *reader) buildAll(jobs []*Job) error {
	t0 := slices.MinFunc(jobs, func(a, b *Job) int { return cmp.Compare(a.Submit, b.Submit) }).Submit
	for _, j := range jobs {
		w, recs, err := r.build(j, t0)
		if err != nil {
			if ok, err := r.badErr(err); !ok {
				return err
			}
			continue
		}
		r.res.Workloads = append(r.res.Workloads, w)
		r.res.Jobs[w.WorkloadID] = recs
	}
	trace.SortWorkloads(r.res.Workloads)
	return nil
}

// Job is one logical workload of a source, what every format reads into and Build turns into
// trace records. Other importers (a live cluster's history, runtime/history) build Jobs too.
type Job struct {
	// ID becomes the workloadId; File and Line say where the job was read, for errors.
	ID   string
	File string
	Line int
	// Team is the namespace source value; TeamPrefix names its column ("vc", "user", "org").
	// Namespace, when set, is used as is instead.
	Team, TeamPrefix, Namespace string
	// Submit and Duration are seconds; Submit on the source's own clock.
	Submit, Duration float64
	Intent           string
	Tasks            []Task
	// Measured utilisation in [0, 1]; NaN when the source has none.
	CPUUtil, GPUUtil float64
	// Family, when set, is the source's own word for the family instead of the package's rules.
	Family trace.Family
	// Profile, when set, is the source's intensity profile, used instead of the defaults.
	Profile *trace.Profile
}

// Task is pods of one shape.
type Task struct {
	// Name is the source's task name ("ps", "worker", "evaluator"); "" when it has none. Role,
	// when set, is the trace role to use as is instead of the package's role rule.
	Name, Role string
	Pods       int
	CPU        float64 // cores per pod; NaN: not in the source
	MemGi      float64 // memory per pod; NaN: not in the source
	GPUs       int     // whole GPUs per pod
	// GPUFraction is the share of one GPU each pod asks for (0 < f < 1) when it asks for less
	// than a whole one; GPUs is 0 then.
	GPUFraction float64
	// GPUResource is the GPU resource name when the source says (amd.com/gpu); "" is nvidia.com/gpu.
	GPUResource string
}

type reader struct {
	opts Options
	res  *Result
}

// notRun counts a job of the source that did not run, by reason.
func (r *reader) notRun(reason string) { r.res.NotRun[reason]++ }

func (r *reader) notRunTotal() int {
	n := 0
	for _, c := range r.res.NotRun {
		n += c
	}
	return n
}

// NotRunSummary says how many jobs did not run and why ("3 no run time, 1 still running").
func (res *Result) NotRunSummary() string {
	if len(res.NotRun) == 0 {
		return "the input has no jobs"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(res.NotRun)) {
		parts = append(parts, fmt.Sprintf("%d %s", res.NotRun[k], k))
	}
	return strings.Join(parts, ", ")
}

// bad reports a malformed row: an error, or in lenient mode a skipped row (ok is then true).
func (r *reader) bad(file string, line int, field, format string, args ...any) (ok bool, err error) {
	e := fielderr.New(file, line, field, format, args...)
	if !r.opts.Lenient {
		return false, e
	}
	r.res.Skipped = append(r.res.Skipped, e)
	return true, nil
}

// family is the job's own family or the one the package rules infer.
func (j *Job) family() trace.Family {
	if j.Family != "" {
		return j.Family
	}
	gpuPods, ps := 0, false
	for _, t := range j.Tasks {
		if t.gpu() > 0 {
			gpuPods += t.Pods
		}
		ps = ps || t.Name == trace.RolePS
	}
	switch {
	case gpuPods == 0 && j.Duration >= 1800:
		return trace.CPUAnalytics
	case gpuPods == 0:
		return trace.CPUPreprocess
	case ps:
		return trace.ParameterServerTraining
	case gpuPods > 1:
		return trace.DistributedTraining
	case j.Duration <= 1000:
		return trace.DebugEval
	default:
		return trace.SingleGPUTraining
	}
}

// gpu is the GPUs each pod of t asks for, a share of one counted as that share.
func (t Task) gpu() float64 { return float64(t.GPUs) + t.GPUFraction }

// role names the pods of task t of a job of family f.
func role(f trace.Family, t Task) string {
	switch {
	case t.Role != "":
		return t.Role
	case !f.GPU() || f == trace.DebugEval || f == trace.SingleGPUTraining:
		return trace.RoleMain
	case t.Name == trace.RolePS:
		return trace.RolePS
	case f == trace.DistributedTraining && t.gpu() == 0 && t.Pods == 1:
		return trace.RoleLauncher
	default:
		return trace.RoleWorker
	}
}

// Bounds on what one job of a source may ask for: beyond them a row is taken as malformed rather
// than turned into millions of records.
const (
	maxPodsPerJob = 1 << 16
	maxGPUsPerPod = 1 << 10
)

// build makes the workload and job records of j; t0 is the earliest submit time of the input.
func (r *reader) build(j *Job, t0 float64) (*trace.Workload, []*trace.Job, error) {
	pods := 0
	for _, t := range j.Tasks {
		pods += t.Pods
		if t.Pods > maxPodsPerJob || pods > maxPodsPerJob || t.GPUs > maxGPUsPerPod {
			return nil, nil, fielderr.New(j.File, j.Line, "", "job %s asks for %d pods of %d GPUs: more than the %d pods or %d GPUs per pod an import takes", j.ID, t.Pods, t.GPUs, maxPodsPerJob, maxGPUsPerPod)
		}
	}
	p := r.opts.Profile
	f := j.family()
	spec := p.Family(f)
	totalGPUs := 0
	for _, t := range j.Tasks {
		totalGPUs += int(math.Ceil(t.gpu())) * t.Pods
	}
	prof := trace.Profile{
		CPUUtilization:      mid(spec.CPUUtilization),
		MemoryIntensity:     mid(spec.MemoryIntensity),
		IOIntensity:         mid(spec.IOIntensity),
		CPUFeedIntensityGPU: mid(spec.CPUFeedIntensityGPU),
	}
	if !math.IsNaN(j.CPUUtil) {
		prof.CPUUtilization = clamp01(j.CPUUtil)
	}
	if f.GPU() {
		prof.GPUUtilization = clamp01(gpuCountMean(p, totalGPUs) * spec.GPUUtilizationScale)
		if !math.IsNaN(j.GPUUtil) {
			prof.GPUUtilization = clamp01(j.GPUUtil)
		}
	}
	prof = roundProfile(prof)
	if j.Profile != nil {
		prof = *j.Profile
	}
	ns := j.Namespace
	if ns == "" {
		ns = namespace(j.TeamPrefix, j.Team)
	}
	gang := f == trace.DistributedTraining || f == trace.ParameterServerTraining
	w := &trace.Workload{
		SchemaVersion:          trace.SchemaVersion,
		WorkloadID:             j.ID,
		SubmitTimeOffsetSec:    round3(j.Submit - t0),
		Namespace:              ns,
		WorkloadType:           f,
		Gang:                   gang,
		DurationSec:            round3(j.Duration),
		WorkloadClass:          gen.Classify(prof, f.GPU(), p.Classes),
		SharedIntensityProfile: prof,
		IntentClass:            j.Intent,
	}
	sens := trace.Sensitivity{CPU: mid(spec.Sensitivity.CPU), GPU: mid(spec.Sensitivity.GPU)}
	rates := work.Rates{CPUPerCore: p.Work.CPURatePerCore, GPUPerGPU: p.Work.GPURatePerGPU}
	var recs []*trace.Job
	seq := map[string]int{}
	for _, t := range j.Tasks {
		rl := role(f, t)
		req := requests(spec, rl, t)
		w.Pods = append(w.Pods, trace.PodGroup{Role: rl, Replicas: t.Pods, Requests: req, Gang: gang})
		podSens := sens
		if t.gpu() == 0 {
			podSens.GPU = 0
		}
		gpus, share := req.GPUWork()
		units := trace.Work{
			CPUUnits: round2(work.Units(w.DurationSec, req.Value(trace.ResourceCPU), prof.CPUUtilization, rates.CPUPerCore, rl)),
			GPUUnits: round2(work.Units(w.DurationSec, gpus, share*prof.GPUUtilization, rates.GPUPerGPU, rl)),
		}
		for range t.Pods {
			seq[rl]++
			recs = append(recs, &trace.Job{
				SchemaVersion: trace.SchemaVersion, JobID: fmt.Sprintf("%s-%s-%02d", j.ID, rl, seq[rl]),
				WorkloadID: j.ID, WorkloadType: f, PodRole: rl, Gang: gang,
				SubmitTimeOffsetSec: w.SubmitTimeOffsetSec, Namespace: w.Namespace,
				PodTemplate: trace.PodTemplate{Requests: req}, Work: units, Sensitivity: podSens,
				WorkloadClass: w.WorkloadClass, WorkloadProfile: prof, IntentClass: j.Intent,
			})
		}
	}
	if err := w.Validate(); err != nil {
		return nil, nil, fielderr.New(j.File, j.Line, "", "job %s: %v", j.ID, err)
	}
	return w, recs, nil
}

// requests sizes one pod of task t: the trace's numbers where it has them, the profile's role
// rules for the rest.
func requests(spec *gen.FamilySpec, role string, t Task) trace.Requests {
	rs := profileRole(spec, role)
	cpu, mem := t.CPU, t.MemGi
	if math.IsNaN(cpu) {
		cpu = 1
		if rs != nil {
			cpu = rs.CPU + rs.CPUPerGPU*t.gpu()
			if len(rs.CPUChoices) > 0 { // the most likely choice
				best := rs.CPUChoices[0]
				for _, c := range rs.CPUChoices[1:] {
					if c.Probability > best.Probability {
						best = c
					}
				}
				cpu = best.Cores
			}
		}
	}
	if math.IsNaN(mem) {
		mem = 4
		if rs != nil {
			mem = rs.MemoryGi + rs.MemoryGiPerGPU*t.gpu() + rs.MemoryGiPerCPU*cpu
		}
	}
	req := trace.Requests{trace.ResourceCPU: milli(cpu)}
	if mem > 0 {
		req[trace.ResourceMemory] = mebi(mem)
	}
	if t.GPUs > 0 {
		name := t.GPUResource
		if name == "" {
			name = trace.ResourceGPU
		}
		req[name] = strconv.Itoa(t.GPUs)
	}
	if t.GPUFraction > 0 {
		// To a thousandth of a GPU, within what a trace takes: a share that rounds to a whole
		// GPU is one; a share below a thousandth is one thousandth.
		switch f := math.Round(t.GPUFraction*1000) / 1000; {
		case f >= 1:
			req[trace.ResourceGPU] = "1"
		default:
			req[trace.ResourceGPUFraction] = strconv.FormatFloat(math.Max(f, 0.001), 'f', -1, 64)
		}
	}
	return req
}

// profileRole returns the profile's sizing of a role, falling back to the family's first role.
func profileRole(spec *gen.FamilySpec, role string) *gen.RoleSpec {
	r := &spec.Roles
	for _, x := range []struct {
		name string
		spec *gen.RoleSpec
	}{{trace.RoleMain, r.Main}, {trace.RoleLauncher, r.Launcher}, {trace.RoleWorker, r.Worker}, {trace.RolePS, r.PS}, {trace.RoleController, r.Controller}, {trace.RoleTrial, r.Trial}} {
		if x.name == role && x.spec != nil {
			return x.spec
		}
	}
	for _, s := range []*gen.RoleSpec{r.Main, r.Worker, r.Trial, r.Launcher, r.PS, r.Controller} {
		if s != nil {
			return s
		}
	}
	return nil
}

// gpuCountMean is the profile's mean GPU utilisation at the largest GPU count not above n.
func gpuCountMean(p *gen.Profile, n int) float64 {
	best, mean := 0, 0.5
	for _, g := range p.GPUCount {
		if g.GPUs <= max(n, 1) && g.GPUs >= best {
			best, mean = g.GPUs, g.UtilizationMean
		}
	}
	return mean
}

// namespace turns a team value into a DNS label: prefix, the value lowercased with anything else
// replaced by '-', and a hash of the value when that lost information (Helios' vcJkd and vcjkd
// are different virtual clusters).
func namespace(prefix, v string) string {
	var b strings.Builder
	lossy := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteByte(c)
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
			lossy = true
		default:
			b.WriteByte('-')
			lossy = true
		}
	}
	s := strings.Trim(b.String(), "-")
	if strings.HasPrefix(s, prefix+"-") || s == prefix {
		s = strings.TrimPrefix(strings.TrimPrefix(s, prefix), "-")
	}
	if s == "" {
		s, lossy = "none", true
	}
	if lossy {
		h := fnv.New32a()
		h.Write([]byte(v))
		s += fmt.Sprintf("-%06x", h.Sum32()&0xffffff)
	}
	s = prefix + "-" + s
	if len(s) > 63 {
		h := fnv.New32a()
		h.Write([]byte(v))
		s = strings.TrimRight(s[:52], "-") + fmt.Sprintf("-%08x", h.Sum32())
	}
	return s
}

func mid(r gen.Range) float64 { return (r.Min + r.Max) / 2 }

func clamp01(x float64) float64 { return math.Min(1, math.Max(0, x)) }

func roundProfile(p trace.Profile) trace.Profile {
	r := func(x float64) float64 { return math.Round(x*1e4) / 1e4 }
	return trace.Profile{CPUUtilization: r(p.CPUUtilization), GPUUtilization: r(p.GPUUtilization), MemoryIntensity: r(p.MemoryIntensity),
		IOIntensity: r(p.IOIntensity), CPUFeedIntensityGPU: r(p.CPUFeedIntensityGPU)}
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// milli writes cores as a quantity: whole cores plain, else millicores.
func milli(cores float64) string {
	m := int64(math.Ceil(cores*1000 - 1e-9))
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatInt(m, 10) + "m"
}

// mebi writes GiB as a quantity: whole Gi plain, else Mi rounded up.
func mebi(gi float64) string {
	mi := int64(math.Ceil(gi*1024 - 1e-9))
	if mi%1024 == 0 {
		return strconv.FormatInt(mi/1024, 10) + "Gi"
	}
	return strconv.FormatInt(mi, 10) + "Mi"
}

// Write writes res as a trace: each workload record followed by its job records.
func (res *Result) Write(w *trace.Writer) error {
	for _, wl := range res.Workloads {
		if err := w.WriteWorkload(wl); err != nil {
			return err
		}
		for _, j := range res.Jobs[wl.WorkloadID] {
			if err := w.WriteJob(j); err != nil {
				return err
			}
		}
	}
	return nil
}
