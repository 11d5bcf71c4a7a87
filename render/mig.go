package render

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
)

// NVIDIA's DRA driver: its driver name (also the attribute domain of its devices) and the
// DeviceClasses its chart installs for whole GPUs and MIG slices.
const (
	NVIDIADRADriver = "gpu.nvidia.com"
	GPUDeviceClass  = "gpu.nvidia.com"
	MIGDeviceClass  = "mig.nvidia.com"
)

// migClaimName is the name of the pod-level claim (and of its request) through which a pod gets
// its MIG slices.
const migClaimName = "mig"

// ClaimTemplateName is the ResourceClaimTemplate render writes for the pods of workload (its
// rendered Name) that ask for slices of a MIG profile.
func ClaimTemplateName(workload, profile string, slices int64) string {
	return fmt.Sprintf("%s-mig-%s-x%d", workload, strings.ReplaceAll(profile, ".", "-"), slices)
}

// MIGSelector is the CEL expression that picks devices of a MIG profile, on the attribute
// NVIDIA's driver publishes.
func MIGSelector(profile string) string {
	return fmt.Sprintf("device.attributes['%s'].profile == '%s'", NVIDIADRADriver, profile)
}

// migClaimTemplates are the ResourceClaimTemplates of a workload's MIG pods, one per profile and
// slice count its pod groups ask for, in the namespace its objects go to. Kueue counts what a
// template asks for into the workload's quota (only templates: a pod naming a ResourceClaim
// directly is inadmissible), and kube-scheduler allocates each pod's claim from the node's
// ResourceSlices.
func migClaimTemplates(w *trace.Workload, p Placement) []client.Object {
	ns := p.Namespace
	if ns == "" {
		ns = w.Namespace
	}
	name := Name(w.WorkloadID)
	seen := map[string]bool{}
	var out []client.Object
	for _, g := range w.Pods {
		profile, n := g.MIG()
		if n == 0 {
			continue
		}
		tn := ClaimTemplateName(name, profile, n)
		if seen[tn] {
			continue
		}
		seen[tn] = true
		out = append(out, &resourceapi.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: tn, Namespace: ns, Labels: map[string]string{contract.WorkloadLabel: name}},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{
					Name: migClaimName,
					Exactly: &resourceapi.ExactDeviceRequest{
						DeviceClassName: MIGDeviceClass,
						AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
						Count:           n,
						Selectors:       []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: MIGSelector(profile)}}},
					},
				}},
			}}},
		})
	}
	return out
}

// withMIGClaim gives a pod template the claim of its role's MIG slices.
func (b *build) withMIGClaim(r *role, spec *corev1.PodSpec) {
	if r.migSlices == 0 {
		return
	}
	tn := ClaimTemplateName(b.name, r.mig, r.migSlices)
	spec.ResourceClaims = []corev1.PodResourceClaim{{Name: migClaimName, ResourceClaimTemplateName: &tn}}
	for i := range spec.Containers {
		spec.Containers[i].Resources.Claims = []corev1.ResourceClaim{{Name: migClaimName}}
	}
}

// OnSlices returns copies of w and its job records whose pods ask for slices of a MIG profile
// where they asked for whole NVIDIA GPUs, one slice per GPU, and one slice where they asked for a
// share of a GPU (trace.ResourceGPUFraction, kept beside the slice); w and jobs are not changed.
func OnSlices(w *trace.Workload, jobs []*trace.Job, profile string) (*trace.Workload, []*trace.Job) {
	return swapRequests(w, jobs, func(r trace.Requests) trace.Requests {
		n, ok := r[trace.ResourceGPU]
		switch {
		case ok && r.Value(trace.ResourceGPU) > 0:
			out := copyRequests(r)
			delete(out, trace.ResourceGPU)
			out[trace.MIGResource(profile)] = n
			return out
		case r.GPUFraction() > 0:
			out := copyRequests(r)
			out[trace.MIGResource(profile)] = "1"
			return out
		}
		return r
	})
}

// OnWholeGPUs returns copies of w and its job records whose pods that ask for a share of a GPU
// ask for one whole NVIDIA GPU, the share kept beside it; w and jobs are not changed.
func OnWholeGPUs(w *trace.Workload, jobs []*trace.Job) (*trace.Workload, []*trace.Job) {
	return swapRequests(w, jobs, func(r trace.Requests) trace.Requests {
		if r.GPUFraction() == 0 {
			return r
		}
		out := copyRequests(r)
		out[trace.ResourceGPU] = "1"
		return out
	})
}

func copyRequests(r trace.Requests) trace.Requests {
	out := make(trace.Requests, len(r)+1)
	for k, v := range r {
		out[k] = v
	}
	return out
}

// swapRequests returns copies of w and its job records with every pod's requests passed through swap.
func swapRequests(w *trace.Workload, jobs []*trace.Job, swap func(trace.Requests) trace.Requests) (*trace.Workload, []*trace.Job) {
	cw := *w
	cw.Pods = make([]trace.PodGroup, len(w.Pods))
	for i, g := range w.Pods {
		g.Requests = swap(g.Requests)
		cw.Pods[i] = g
	}
	var cj []*trace.Job
	if jobs != nil {
		cj = make([]*trace.Job, len(jobs))
		for i, j := range jobs {
			c := *j
			c.PodTemplate.Requests = swap(j.PodTemplate.Requests)
			cj[i] = &c
		}
	}
	return &cw, cj
}
