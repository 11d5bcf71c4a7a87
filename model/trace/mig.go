package trace

import (
	"math"
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
