// Package contract is the API between render and the agent: every fact the agent needs about a
// pod rides on the pod template that render writes, as annotations under the kueuelab.io/ prefix,
// and Parse reads them back with errors that name the offending key.
//
// Annotations on every pod template (values are decimal strings unless noted):
//
//	key                                      meaning
//	kueuelab.io/workload-id                  the trace's workloadId, verbatim
//	kueuelab.io/family                       the trace's workloadType (distributed_training, ...)
//	kueuelab.io/role                         the pod's role: launcher, worker, ps, controller, trial, main
//	kueuelab.io/gang-size                    pods in the workload's gang; absent when the workload is not gang
//	kueuelab.io/work-cpu-units               CPU work units one pod of this role must do (model/work)
//	kueuelab.io/work-gpu-units               GPU work units one pod of this role must do (model/work)
//	kueuelab.io/duration-sec                 the workload's ideal duration in trace seconds
//	kueuelab.io/sensitivity-cpu              how strongly progress follows CPU speed, [0, 1]; absent when unknown
//	kueuelab.io/sensitivity-gpu              how strongly progress follows GPU speed, [0, 1]; absent when unknown
//	kueuelab.io/profile-cpu-utilization      the five intensities of the workload profile, each in [0, 1]
//	kueuelab.io/profile-gpu-utilization
//	kueuelab.io/profile-memory-intensity
//	kueuelab.io/profile-io-intensity
//	kueuelab.io/profile-cpu-feed-intensity-gpu
//	kueuelab.io/submit-offset-sec            the workload's submit time, seconds from the trace start
//	kueuelab.io/intent-class                 performance, standard or eco
//	kueuelab.io/checkpoint-interval-sec      present only when the workload checkpoints (> 0)
//	kueuelab.io/checkpoint-cost-sec          the pause each checkpoint costs; absent when 0
//	kueuelab.io/restart-overhead-sec         trace seconds from a restart to resumed work; absent when 0
//
// Work units come from the trace's job records when it has them (the mean over the pods the
// template stands for: one pod group, or a whole role where the kind has one template per role;
// the generators make a group's records identical), otherwise from model/work.Units with the
// default rates.
// Sensitivities exist only in job records, so a workload-only trace leaves them absent and the
// agent falls back to its own per-family default.
//
// Label on the top object and on every pod template, for selection: kueuelab.io/workload-id, whose
// value is the workload's object name (render.Name of the id, equal to the id whenever the id is
// already a short DNS-1035 label), because label values are limited to 63 characters.
//
// Pods nobody rendered (an upstream sample, a user's own manifest: no kueuelab.io/workload-id
// annotation) run by Unrendered's defaults. The one key a user sets on such a pod template is
//
//	kueuelab.io/duration-sec                 how long the pod runs alone on an idle node, in trace
//	                                         seconds (default DefaultDurationSec)
//
// and the agent's own kueuelab.io/inject-failure works as on any pod. Everything else is assumed:
// a training-like step (UnrenderedProfile) that keeps what it requests busy, no gang (each pod
// progresses alone), no checkpoints; its workload is the object that owns the pod.
package contract

import (
	"fmt"
	"math"
	"strconv"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

// Prefix is the prefix of every key in the contract.
const Prefix = "kueuelab.io/"

// Annotation and label keys.
const (
	WorkloadID            = Prefix + "workload-id"
	Family                = Prefix + "family"
	Role                  = Prefix + "role"
	GangSize              = Prefix + "gang-size"
	WorkCPUUnits          = Prefix + "work-cpu-units"
	WorkGPUUnits          = Prefix + "work-gpu-units"
	DurationSec           = Prefix + "duration-sec"
	SensitivityCPU        = Prefix + "sensitivity-cpu"
	SensitivityGPU        = Prefix + "sensitivity-gpu"
	ProfileCPUUtilization = Prefix + "profile-cpu-utilization"
	ProfileGPUUtilization = Prefix + "profile-gpu-utilization"
	ProfileMemory         = Prefix + "profile-memory-intensity"
	ProfileIO             = Prefix + "profile-io-intensity"
	ProfileCPUFeedGPU     = Prefix + "profile-cpu-feed-intensity-gpu"
	SubmitOffsetSec       = Prefix + "submit-offset-sec"
	IntentClass           = Prefix + "intent-class"
	CheckpointIntervalSec = Prefix + "checkpoint-interval-sec"
	CheckpointCostSec     = Prefix + "checkpoint-cost-sec"
	RestartOverheadSec    = Prefix + "restart-overhead-sec"
	MIGProfile            = Prefix + "mig-profile"
	MIGSlices             = Prefix + "mig-slices"
)

// WorkloadLabel is the label key (on the top object and on pods) that selects a workload's objects.
const WorkloadLabel = WorkloadID

// Pod is what the annotations of one pod say.
type Pod struct {
	WorkloadID string
	Family     trace.Family
	Role       string
	// GangSize is the number of pods that must run together; 0 when the workload is not gang.
	GangSize int
	Work     trace.Work
	// DurationSec is the workload's ideal duration in trace seconds.
	DurationSec float64
	// Sensitivity is nil when the trace had no job records.
	Sensitivity           *trace.Sensitivity
	Profile               trace.Profile
	SubmitOffsetSec       float64
	IntentClass           string
	CheckpointIntervalSec float64
	CheckpointCostSec     float64
	RestartOverheadSec    float64
	// MIGProfile and MIGSlices are the MIG profile and the number of its slices the pod runs on
	// ("" and 0: whole GPUs, or none).
	MIGProfile string
	MIGSlices  int
}

// Annotations returns the annotations that describe p; Parse(p.Annotations()) returns p.
func (p *Pod) Annotations() map[string]string {
	a := make(map[string]string, 19)
	p.Put(a)
	return a
}

// Put writes the annotations that describe p into a.
func (p *Pod) Put(a map[string]string) {
	a[WorkloadID] = p.WorkloadID
	a[Family] = string(p.Family)
	a[Role] = p.Role
	if p.GangSize > 0 {
		a[GangSize] = strconv.Itoa(p.GangSize)
	}
	a[WorkCPUUnits] = format(p.Work.CPUUnits)
	a[WorkGPUUnits] = format(p.Work.GPUUnits)
	a[DurationSec] = format(p.DurationSec)
	if p.Sensitivity != nil {
		a[SensitivityCPU] = format(p.Sensitivity.CPU)
		a[SensitivityGPU] = format(p.Sensitivity.GPU)
	}
	a[ProfileCPUUtilization] = format(p.Profile.CPUUtilization)
	a[ProfileGPUUtilization] = format(p.Profile.GPUUtilization)
	a[ProfileMemory] = format(p.Profile.MemoryIntensity)
	a[ProfileIO] = format(p.Profile.IOIntensity)
	a[ProfileCPUFeedGPU] = format(p.Profile.CPUFeedIntensityGPU)
	a[SubmitOffsetSec] = format(p.SubmitOffsetSec)
	a[IntentClass] = p.IntentClass
	if p.CheckpointIntervalSec > 0 {
		a[CheckpointIntervalSec] = format(p.CheckpointIntervalSec)
	}
	if p.CheckpointCostSec > 0 {
		a[CheckpointCostSec] = format(p.CheckpointCostSec)
	}
	if p.RestartOverheadSec > 0 {
		a[RestartOverheadSec] = format(p.RestartOverheadSec)
	}
	if p.MIGSlices > 0 {
		a[MIGProfile] = p.MIGProfile
		a[MIGSlices] = strconv.Itoa(p.MIGSlices)
	}
}

// format writes the shortest decimal that parses back to exactly v.
func format(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Parse reads a pod's annotations. Every key without "absent when" in the table is required;
// errors name the key and the bad value.
func Parse(a map[string]string) (*Pod, error) {
	p := &Pod{}
	var err error
	str := func(key string) string {
		if err != nil {
			return ""
		}
		v, ok := a[key]
		if !ok || v == "" {
			err = fmt.Errorf("annotation %s: missing", key)
		}
		return v
	}
	num := func(key string, required bool, lo, hi float64) float64 {
		if err != nil {
			return 0
		}
		s, ok := a[key]
		if !ok {
			if required {
				err = fmt.Errorf("annotation %s: missing", key)
			}
			return 0
		}
		v, perr := strconv.ParseFloat(s, 64)
		switch {
		case perr != nil:
			err = fmt.Errorf("annotation %s: %q is not a number", key, s)
		case math.IsNaN(v) || v < lo || v > hi:
			err = fmt.Errorf("annotation %s: %s is outside [%g, %g]", key, s, lo, hi)
		}
		return v
	}
	inf := math.Inf(1)
	p.WorkloadID = str(WorkloadID)
	p.Family = trace.Family(str(Family))
	p.Role = str(Role)
	p.IntentClass = str(IntentClass)
	if g, ok := a[GangSize]; ok && err == nil {
		n, perr := strconv.Atoi(g)
		if perr != nil || n < 0 {
			err = fmt.Errorf("annotation %s: %q is not a non-negative integer", GangSize, g)
		}
		p.GangSize = n
	}
	p.Work.CPUUnits = num(WorkCPUUnits, true, 0, inf)
	p.Work.GPUUnits = num(WorkGPUUnits, true, 0, inf)
	p.DurationSec = num(DurationSec, true, 0, inf)
	p.Profile.CPUUtilization = num(ProfileCPUUtilization, true, 0, 1)
	p.Profile.GPUUtilization = num(ProfileGPUUtilization, true, 0, 1)
	p.Profile.MemoryIntensity = num(ProfileMemory, true, 0, 1)
	p.Profile.IOIntensity = num(ProfileIO, true, 0, 1)
	p.Profile.CPUFeedIntensityGPU = num(ProfileCPUFeedGPU, true, 0, 1)
	p.SubmitOffsetSec = num(SubmitOffsetSec, true, 0, inf)
	p.CheckpointIntervalSec = num(CheckpointIntervalSec, false, 0, inf)
	p.CheckpointCostSec = num(CheckpointCostSec, false, 0, inf)
	p.RestartOverheadSec = num(RestartOverheadSec, false, 0, inf)
	if s, ok := a[MIGSlices]; ok && err == nil {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 {
			err = fmt.Errorf("annotation %s: %q is not a positive integer", MIGSlices, s)
		}
		p.MIGSlices = n
		p.MIGProfile = str(MIGProfile)
	}
	_, hasCPU := a[SensitivityCPU]
	_, hasGPU := a[SensitivityGPU]
	if hasCPU || hasGPU {
		s := trace.Sensitivity{CPU: num(SensitivityCPU, true, 0, 1), GPU: num(SensitivityGPU, true, 0, 1)}
		p.Sensitivity = &s
	}
	if err != nil {
		return nil, err
	}
	if !p.Family.Known() {
		return nil, fmt.Errorf("annotation %s: unknown family %q", Family, p.Family)
	}
	return p, nil
}

// DefaultDurationSec is how long an unrendered pod runs, alone on an idle node, unless its
// kueuelab.io/duration-sec annotation says otherwise: ten trace minutes.
const DefaultDurationSec = 600

// UnrenderedRole is the role of an unrendered pod.
const UnrenderedRole = "main"

// UnrenderedProfile is the intensity profile assumed for an unrendered pod: a training step that
// keeps its GPUs mostly busy and its CPUs half busy.
var UnrenderedProfile = trace.Profile{CPUUtilization: 0.5, GPUUtilization: 0.8, MemoryIntensity: 0.3, IOIntensity: 0.1, CPUFeedIntensityGPU: 0.3}

// Rendered reports whether a pod's annotations carry the contract (render wrote the pod).
func Rendered(a map[string]string) bool {
	_, ok := a[WorkloadID]
	return ok
}

// Unrendered is the contract assumed for a pod render did not write (see the package comment):
// workload names the object that owns it, cpu (cores) and gpus are its requests. Errors name the
// annotation.
func Unrendered(a map[string]string, workload string, cpu float64, gpus int) (*Pod, error) {
	d := float64(DefaultDurationSec)
	if s, ok := a[DurationSec]; ok {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(v > 0) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("annotation %s: %q is not a positive number of trace seconds", DurationSec, s)
		}
		d = v
	}
	prof := UnrenderedProfile
	sens := trace.Sensitivity{CPU: 0.9}
	if gpus > 0 {
		sens = trace.Sensitivity{CPU: 0.5, GPU: 0.9}
	}
	return &Pod{
		WorkloadID: workload, Role: UnrenderedRole, DurationSec: d, Profile: prof, Sensitivity: &sens, IntentClass: "standard",
		Work: trace.Work{
			CPUUnits: work.Units(d, cpu, prof.CPUUtilization, work.DefaultCPURatePerCore, UnrenderedRole),
			GPUUnits: work.Units(d, float64(gpus), prof.GPUUtilization, work.DefaultGPURatePerGPU, UnrenderedRole),
		},
	}, nil
}
