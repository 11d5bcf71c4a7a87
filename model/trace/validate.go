package trace

import (
	"fmt"
	"math"
	"strings"
)

// Validate checks the values of a workload record: known schema version and family, finite
// non-negative numbers, intensities in [0, 1], pod groups with a role, replicas >= 1, valid
// quantities and GPUs of one vendor. A role may have several pod groups (one per HPO trial). The
// error names the JSON path of the first bad field.
func (w *Workload) Validate() error { return w.validate(validRequests) }

// validate is Validate with the check of one set of requests given: a Reader remembers the
// requests it has checked already.
func (w *Workload) validate(checkRequests func(Requests) error) error {
	if err := validSchema(w.SchemaVersion); err != nil {
		return err
	}
	if w.WorkloadID == "" {
		return fieldErrf("workloadId", "must not be empty")
	}
	if err := nonNegative("submitTimeOffsetSec", w.SubmitTimeOffsetSec); err != nil {
		return err
	}
	if err := validNamespace(w.Namespace); err != nil {
		return err
	}
	if !w.WorkloadType.Known() {
		return fieldErrf("workloadType", "unknown workload type %s (want one of %v)", quoteShort(string(w.WorkloadType)), Families)
	}
	if err := nonNegative("durationSec", w.DurationSec); err != nil {
		return err
	}
	if w.DurationSec == 0 {
		return fieldErrf("durationSec", "must be > 0")
	}
	if err := validProfile(&w.SharedIntensityProfile); err != nil {
		return under("sharedIntensityProfile", err)
	}
	if len(w.Pods) == 0 {
		return fieldErrf("pods", "must list at least one pod group")
	}
	vendor := -1 // the first pod group asking for GPUs
	for i, p := range w.Pods {
		if err := validPod(p, checkRequests); err != nil {
			return under("pods", index(i, err))
		}
		switch r := p.Requests.GPUResource(); {
		case r == "":
		case vendor < 0:
			vendor = i
		case r != w.Pods[vendor].Requests.GPUResource():
			return fieldErrf(fmt.Sprintf("pods[%d].requests", i), "asks for %s but pods[%d] for %s: a workload runs on one GPU vendor", r, vendor, w.Pods[vendor].Requests.GPUResource())
		}
	}
	if err := validIntent(w.IntentClass); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"checkpointIntervalSec", w.CheckpointIntervalSec}, {"checkpointCostSec", w.CheckpointCostSec}, {"restartOverheadSec", w.RestartOverheadSec}} {
		if err := nonNegative(f.name, f.v); err != nil {
			return err
		}
	}
	if w.CheckpointCostSec > 0 && w.CheckpointIntervalSec > 0 && w.CheckpointIntervalSec < 1 {
		return fieldErrf("checkpointIntervalSec", "must be >= 1 when checkpoints cost a pause, got %v", w.CheckpointIntervalSec)
	}
	if w.MaxRestarts < 0 {
		return fieldErrf("maxRestarts", "must be >= 0, got %d", w.MaxRestarts)
	}
	return nil
}

// Validate checks the values of a job record, like Workload.Validate.
func (j *Job) Validate() error { return j.validate(validRequests) }

func (j *Job) validate(checkRequests func(Requests) error) error {
	if err := validSchema(j.SchemaVersion); err != nil {
		return err
	}
	if j.JobID == "" {
		return fieldErrf("jobId", "must not be empty")
	}
	if j.WorkloadID == "" {
		return fieldErrf("workloadId", "must not be empty")
	}
	if !j.WorkloadType.Known() {
		return fieldErrf("workloadType", "unknown workload type %s (want one of %v)", quoteShort(string(j.WorkloadType)), Families)
	}
	if j.PodRole == "" {
		return fieldErrf("podRole", "must not be empty")
	}
	if err := nonNegative("submitTimeOffsetSec", j.SubmitTimeOffsetSec); err != nil {
		return err
	}
	if err := validNamespace(j.Namespace); err != nil {
		return err
	}
	if err := checkRequests(j.PodTemplate.Requests); err != nil {
		return under("podTemplate.requests", err)
	}
	if err := nonNegative("work.cpuUnits", j.Work.CPUUnits); err != nil {
		return err
	}
	if err := nonNegative("work.gpuUnits", j.Work.GPUUnits); err != nil {
		return err
	}
	if err := unitInterval("sensitivity.cpu", j.Sensitivity.CPU); err != nil {
		return err
	}
	if err := unitInterval("sensitivity.gpu", j.Sensitivity.GPU); err != nil {
		return err
	}
	if err := validProfile(&j.WorkloadProfile); err != nil {
		return under("workloadProfile", err)
	}
	return validIntent(j.IntentClass)
}

func validSchema(v string) error {
	if v != SchemaVersion {
		return fieldErrf("schemaVersion", "unknown schema version %s (this reader reads %q)", quoteShort(v), SchemaVersion)
	}
	return nil
}

// validNamespace requires a DNS-1123 label, as Kubernetes does for namespace names.
func validNamespace(ns string) error {
	ok := ns != "" && len(ns) <= 63 && ns[0] != '-' && ns[len(ns)-1] != '-'
	for i := 0; ok && i < len(ns); i++ {
		c := ns[i]
		ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'
	}
	if !ok {
		return fieldErrf("namespace", "%s is not a valid namespace name (lower-case letters, digits and '-', at most 63)", quoteShort(ns))
	}
	return nil
}

func validIntent(c string) error {
	switch c {
	case "", IntentPerformance, IntentStandard, IntentEco:
		return nil
	}
	return fieldErrf("intentClass", "unknown intent class %s (want %q, %q or %q)", quoteShort(c), IntentPerformance, IntentStandard, IntentEco)
}

func nonNegative(field string, v float64) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return fieldErrf(field, "must be finite, got %v", v)
	case v < 0:
		return fieldErrf(field, "must be >= 0, got %v", v)
	}
	return nil
}

func unitInterval(field string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return fieldErrf(field, "must be in [0, 1], got %v", v)
	}
	return nil
}

func validProfile(p *Profile) error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"cpuUtilization", p.CPUUtilization}, {"gpuUtilization", p.GPUUtilization}, {"memoryIntensity", p.MemoryIntensity},
		{"ioIntensity", p.IOIntensity}, {"cpuFeedIntensityGpu", p.CPUFeedIntensityGPU},
	} {
		if err := unitInterval(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func validPod(p PodGroup, checkRequests func(Requests) error) error {
	if p.Role == "" {
		return fieldErrf("role", "must not be empty")
	}
	if p.Replicas < 1 {
		return fieldErrf("replicas", "must be >= 1, got %d", p.Replicas)
	}
	if err := checkRequests(p.Requests); err != nil {
		return under("requests", err)
	}
	return nil
}

// validRequests checks resource names (Kubernetes qualified-name characters, which also keeps the
// canonical "name=value,..." form unambiguous) and quantities: parseable, >= 0, whole GPUs of one
// vendor.
func validRequests(r Requests) error {
	if r.Value(ResourceGPU) > 0 && r.Value(ResourceAMDGPU) > 0 {
		return fieldErrf(ResourceAMDGPU, "a pod asks for both %s and %s", ResourceGPU, ResourceAMDGPU)
	}
	if err := validMIG(r); err != nil {
		return err
	}
	if err := validFraction(r); err != nil {
		return err
	}
	for name := range r {
		if validRequest(r, name) != nil {
			// Report the first bad name in sorted order, so the message does not depend on map order.
			for _, n := range r.Names() {
				if err := validRequest(r, n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func validRequest(r Requests, name string) error {
	{
		ok := name != ""
		for i := 0; ok && i < len(name); i++ {
			c := name[i]
			ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' || c == '/'
		}
		if !ok {
			return fieldErrf(name, "bad resource name %s", quoteShort(name))
		}
		v, err := ParseQuantity(r[name])
		switch {
		case err != nil:
			return &fieldError{field: name, err: err}
		case v < 0:
			return fieldErrf(name, "must be >= 0, got %q", r[name])
		case IsGPUResource(name) && v != math.Trunc(v):
			return fieldErrf(name, "must be a whole number of GPUs, got %q", r[name])
		case strings.HasPrefix(name, MIGResourcePrefix) && v != math.Trunc(v):
			return fieldErrf(name, "must be a whole number of MIG slices, got %q", r[name])
		}
	}
	return nil
}

// validMIG allows one MIG profile per pod, and no whole GPUs beside it: a MIG-partitioned GPU
// has no whole device left to give, and NVIDIA's DRA driver publishes a GPU either whole or cut.
func validMIG(r Requests) error {
	var first string
	for _, name := range r.Names() {
		if _, ok := MIGProfileOf(name); !ok || r.Value(name) <= 0 {
			if name == MIGResourcePrefix {
				return fieldErrf(name, "names no MIG profile (want e.g. %s1g.10gb)", MIGResourcePrefix)
			}
			continue
		}
		if first != "" {
			return fieldErrf(name, "a pod asks for two MIG profiles (%s and %s): one claim holds one profile", first, name)
		}
		first = name
		if gpu := r.GPUResource(); gpu != "" {
			return fieldErrf(name, "a pod asks for %s and whole GPUs (%s): a pod uses slices or whole GPUs, not both", name, gpu)
		}
	}
	return nil
}
