package trace

import (
	"math"
	"slices"
	"strings"
)

// MIGResourcePrefix starts the resource names NVIDIA's device plugin advertises for MIG slices
// under its "mixed" strategy (nvidia.com/mig-1g.10gb): what a pod on a MIG-partitioned cluster
// asks for, and how a trace names a slice-sized request. render turns it into a DRA
// ResourceClaimTemplate on NVIDIA's mig.nvidia.com DeviceClass.
const MIGResourcePrefix = "nvidia.com/mig-"

// MIGProfileOf returns the MIG profile a resource name asks for ("1g.10gb" for
// nvidia.com/mig-1g.10gb); ok is false for any other resource.
func MIGProfileOf(name string) (profile string, ok bool) {
	p, ok := strings.CutPrefix(name, MIGResourcePrefix)
	return p, ok && p != ""
}

// MIGResource is the request name of a MIG profile.
func MIGResource(profile string) string { return MIGResourcePrefix + profile }

// MIG returns the MIG profile these requests ask for and how many slices of it; "" and 0 when
// none. Validate allows at most one profile per pod.
func (r Requests) MIG() (profile string, slices int64) {
	for _, name := range r.Names() {
		if p, ok := MIGProfileOf(name); ok {
			if v := r.Value(name); v > 0 {
				return p, int64(math.Round(v))
			}
		}
	}
	return "", 0
}

// MIG returns the MIG profile the group's pods ask for and how many slices each; "" and 0 when none.
func (p PodGroup) MIG() (profile string, slices int64) { return p.Requests.MIG() }

// MIGSlices returns the MIG slices the whole workload requests.
func (w *Workload) MIGSlices() int64 {
	var n int64
	for _, p := range w.Pods {
		_, s := p.MIG()
		n += int64(p.Replicas) * s
	}
	return n
}

// ResourceGPUFraction is how a trace asks for a share of one NVIDIA GPU (0.5: half of one), as
// Alibaba PAI's plan_gpu 50 or KAI Scheduler's gpu-fraction annotation does. Kubernetes counts
// whole devices, so it is not a resource a pod can request: render resolves it per workload to
// one MIG slice of the smallest profile that holds the share where the workload's queue has MIG
// quota, and to one whole GPU elsewhere, and reports the rounding. The resolved requests keep it
// beside the device they name, so that the physics knows the pod uses only that share of it.
const ResourceGPUFraction = "kueuelab.io/gpu-fraction"

// GPUFraction returns the share of a GPU these requests ask for (0 when none).
func (r Requests) GPUFraction() float64 { return r.Value(ResourceGPUFraction) }

// GPUShare returns the GPUs these requests ask for, whole and fractional, as a number of GPUs
// (MIG slices not counted).
func (r Requests) GPUShare() float64 { return float64(r.GPUs()) + r.GPUFraction() }

// GPUWork returns how a pod with these requests counts GPU work: on devices GPUs (whole GPUs,
// MIG slices, or the one device a share of a GPU runs on) each used at utilShare times the
// profile's GPU utilisation (the share for a share of a GPU, 1 otherwise). Work units and
// durations are converted with devices and that utilisation on every side (trace, render,
// engines), so that a pod alone takes its duration on whichever device it is given.
func (r Requests) GPUWork() (devices, utilShare float64) {
	if f := r.GPUFraction(); f > 0 {
		return 1, f
	}
	if _, slices := r.MIG(); slices > 0 {
		return float64(slices), 1
	}
	return float64(r.GPUs()), 1
}

// DeviceGPUUtilization is the utilisation of the GPU devices the workload's pods hold, averaged
// over them: the profile's for whole GPUs and slices, the share times it for a pod with a share
// of a GPU (its device is a whole GPU or a slice; the share of it is what it uses).
func (w *Workload) DeviceGPUUtilization() float64 {
	u := w.SharedIntensityProfile.GPUUtilization
	var devices, used float64
	for _, p := range w.Pods {
		d, share := p.Requests.GPUWork()
		devices += float64(p.Replicas) * d
		used += float64(p.Replicas) * d * share * u
	}
	if devices == 0 {
		return u
	}
	return used / devices
}

// SliceUtilization is DeviceGPUUtilization with a MIG slice counted as a device of its own: a
// slice holding share c of a GPU's compute is busy min(1, use/c) while its pod runs, where use is
// what the pod uses of a whole GPU (the profile's utilisation, times its share of a GPU if it asks
// for one). The average weighs each device by the GPUs it holds (c for a slice), so that GPU-seconds
// held times it are the GPU-seconds of compute used. share returns a profile's c; a profile it
// does not know (0) counts as a whole GPU.
func (w *Workload) SliceUtilization(share func(profile string) float64) float64 {
	u := w.SharedIntensityProfile.GPUUtilization
	var held, used float64
	for _, p := range w.Pods {
		devices, s := p.Requests.GPUWork()
		c := 1.0
		if profile, n := p.MIG(); n > 0 {
			if x := share(profile); x > 0 {
				c = x
			}
		}
		h := float64(p.Replicas) * devices * c
		held += h
		used += h * math.Min(1, s*u/c)
	}
	if held == 0 {
		return u
	}
	return used / held
}

// MIGProfiles lists the distinct MIG profiles the workload's pods ask for, in pod order.
func (w *Workload) MIGProfiles() []string {
	var out []string
	for _, p := range w.Pods {
		if profile, n := p.MIG(); n > 0 && !slices.Contains(out, profile) {
			out = append(out, profile)
		}
	}
	return out
}

// GPUFractionPods returns how many of the workload's pods ask for a share of a GPU.
func (w *Workload) GPUFractionPods() int {
	n := 0
	for _, p := range w.Pods {
		if p.Requests.GPUFraction() > 0 {
			n += p.Replicas
		}
	}
	return n
}

// GPUShare returns the GPUs the whole workload asks for, counting a share of a GPU as that share.
func (w *Workload) GPUShare() float64 {
	var n float64
	for _, p := range w.Pods {
		n += float64(p.Replicas) * p.Requests.GPUShare()
	}
	return n
}

// validFraction allows a share strictly between 0 and 1 of one NVIDIA GPU, and nothing else of a
// GPU beside it: a pod that needs one GPU or more asks for whole ones.
func validFraction(r Requests) error {
	if _, ok := r[ResourceGPUFraction]; !ok {
		return nil
	}
	f, err := ParseQuantity(r[ResourceGPUFraction])
	switch {
	case err != nil:
		return &fieldError{field: ResourceGPUFraction, err: err}
	case !(f > 0 && f < 1):
		return fieldErrf(ResourceGPUFraction, "must be a share of one GPU, > 0 and < 1, got %q (ask for whole GPUs with %s)", r[ResourceGPUFraction], ResourceGPU)
	}
	if gpu := r.GPUResource(); gpu != "" {
		return fieldErrf(ResourceGPUFraction, "a pod asks for a share of a GPU and whole GPUs (%s): ask for one or the other", gpu)
	}
	if p, _ := r.MIG(); p != "" {
		return fieldErrf(ResourceGPUFraction, "a pod asks for a share of a GPU and MIG slices (%s): ask for one or the other", MIGResource(p))
	}
	return nil
}
