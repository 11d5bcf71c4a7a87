package validate

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/dynamic-resource-allocation/cel"
)

// draKinds validate the resource.k8s.io/v1 objects render writes for MIG slices (the
// ResourceClaimTemplates of pods, the DeviceClasses and ResourceSlices of a cluster spec): strict
// decoding into the upstream types, then the checks of kube-apiserver's validation that what
// render writes could break: names, one-of fields, the API's size limits, and CEL selectors
// compiled by the compiler kube-scheduler's allocator uses.
func draKinds() map[schema.GroupVersionKind]*typedKind {
	gv := resourceapi.SchemeGroupVersion
	return map[schema.GroupVersionKind]*typedKind{
		gv.WithKind("ResourceClaimTemplate"): {
			namespaced: true, nameFn: metavalidation.NameIsDNSSubdomain,
			newObj: func() any { return &resourceapi.ResourceClaimTemplate{} },
			check: func(_ context.Context, _ *Validator, obj any) field.ErrorList {
				return checkDeviceClaim(obj.(*resourceapi.ResourceClaimTemplate).Spec.Spec.Devices, field.NewPath("spec", "spec", "devices"))
			},
		},
		gv.WithKind("DeviceClass"): {
			nameFn: metavalidation.NameIsDNSSubdomain,
			newObj: func() any { return &resourceapi.DeviceClass{} },
			check: func(_ context.Context, _ *Validator, obj any) field.ErrorList {
				return checkSelectors(obj.(*resourceapi.DeviceClass).Spec.Selectors, field.NewPath("spec", "selectors"))
			},
		},
		gv.WithKind("ResourceSlice"): {
			nameFn: metavalidation.NameIsDNSSubdomain,
			newObj: func() any { return &resourceapi.ResourceSlice{} },
			check: func(_ context.Context, _ *Validator, obj any) field.ErrorList {
				return checkResourceSlice(obj.(*resourceapi.ResourceSlice))
			},
		},
	}
}

func checkDeviceClaim(d resourceapi.DeviceClaim, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(d.Requests) == 0 {
		errs = append(errs, field.Required(p.Child("requests"), ""))
	}
	names := sets.New[string]()
	for i, r := range d.Requests {
		rp := p.Child("requests").Index(i)
		errs = append(errs, dnsLabel(rp.Child("name"), r.Name)...)
		if names.Has(r.Name) {
			errs = append(errs, field.Duplicate(rp.Child("name"), r.Name))
		}
		names.Insert(r.Name)
		if (r.Exactly == nil) == (len(r.FirstAvailable) == 0) {
			errs = append(errs, field.Invalid(rp, r.Name, "exactly one of exactly and firstAvailable must be set"))
			continue
		}
		if e := r.Exactly; e != nil {
			ep := rp.Child("exactly")
			for _, msg := range utilvalidation.IsDNS1123Subdomain(e.DeviceClassName) {
				errs = append(errs, field.Invalid(ep.Child("deviceClassName"), e.DeviceClassName, msg))
			}
			switch e.AllocationMode {
			case resourceapi.DeviceAllocationModeExactCount, "":
				if e.Count < 1 || e.Count > resourceapi.AllocationResultsMaxSize {
					errs = append(errs, field.Invalid(ep.Child("count"), e.Count, fmt.Sprintf("must be in [1, %d]", resourceapi.AllocationResultsMaxSize)))
				}
			case resourceapi.DeviceAllocationModeAll:
			default:
				errs = append(errs, field.NotSupported(ep.Child("allocationMode"), e.AllocationMode, []resourceapi.DeviceAllocationMode{resourceapi.DeviceAllocationModeExactCount, resourceapi.DeviceAllocationModeAll}))
			}
			errs = append(errs, checkSelectors(e.Selectors, ep.Child("selectors"))...)
		}
	}
	return errs
}

func checkSelectors(sel []resourceapi.DeviceSelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range sel {
		if s.CEL == nil {
			errs = append(errs, field.Required(p.Index(i).Child("cel"), ""))
			continue
		}
		res := cel.GetCompiler(cel.Features{}).CompileCELExpression(s.CEL.Expression, cel.Options{})
		if res.Error != nil {
			errs = append(errs, field.Invalid(p.Index(i).Child("cel", "expression"), s.CEL.Expression, res.Error.Error()))
		}
	}
	return errs
}

func checkResourceSlice(s *resourceapi.ResourceSlice) field.ErrorList {
	var errs field.ErrorList
	sp := field.NewPath("spec")
	for _, msg := range utilvalidation.IsDNS1123Subdomain(s.Spec.Driver) {
		errs = append(errs, field.Invalid(sp.Child("driver"), s.Spec.Driver, msg))
	}
	if s.Spec.Pool.Name == "" {
		errs = append(errs, field.Required(sp.Child("pool", "name"), ""))
	}
	if s.Spec.Pool.ResourceSliceCount < 1 {
		errs = append(errs, field.Invalid(sp.Child("pool", "resourceSliceCount"), s.Spec.Pool.ResourceSliceCount, "must be ≥ 1"))
	}
	nodes := 0
	for _, set := range []bool{s.Spec.NodeName != nil, s.Spec.NodeSelector != nil, s.Spec.AllNodes != nil, s.Spec.PerDeviceNodeSelection != nil} {
		if set {
			nodes++
		}
	}
	if nodes != 1 {
		errs = append(errs, field.Invalid(sp, nodes, "exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection must be set"))
	}
	if (len(s.Spec.Devices) == 0) == (len(s.Spec.SharedCounters) == 0) {
		errs = append(errs, field.Invalid(sp, s.Name, "exactly one of devices and sharedCounters must be set"))
	}
	if n := len(s.Spec.SharedCounters); n > resourceapi.ResourceSliceMaxCounterSets {
		errs = append(errs, field.TooMany(sp.Child("sharedCounters"), n, resourceapi.ResourceSliceMaxCounterSets))
	}
	for i, cs := range s.Spec.SharedCounters {
		cp := sp.Child("sharedCounters").Index(i)
		errs = append(errs, dnsLabel(cp.Child("name"), cs.Name)...)
		if len(cs.Counters) > resourceapi.ResourceSliceMaxCountersPerCounterSet {
			errs = append(errs, field.TooMany(cp.Child("counters"), len(cs.Counters), resourceapi.ResourceSliceMaxCountersPerCounterSet))
		}
		for name := range cs.Counters {
			errs = append(errs, dnsLabel(cp.Child("counters").Key(name), name)...)
		}
	}
	maxDevices := resourceapi.ResourceSliceMaxDevices
	for _, d := range s.Spec.Devices {
		if len(d.ConsumesCounters) > 0 {
			maxDevices = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
		}
	}
	if n := len(s.Spec.Devices); n > maxDevices {
		errs = append(errs, field.TooMany(sp.Child("devices"), n, maxDevices))
	}
	names := sets.New[string]()
	for i, d := range s.Spec.Devices {
		dp := sp.Child("devices").Index(i)
		errs = append(errs, dnsLabel(dp.Child("name"), d.Name)...)
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(dp.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		if n := len(d.ConsumesCounters); n > resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
			errs = append(errs, field.TooMany(dp.Child("consumesCounters"), n, resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice))
		}
		for j, c := range d.ConsumesCounters {
			cp := dp.Child("consumesCounters").Index(j)
			errs = append(errs, dnsLabel(cp.Child("counterSet"), c.CounterSet)...)
			for name := range c.Counters {
				errs = append(errs, dnsLabel(cp.Child("counters").Key(name), name)...)
			}
		}
	}
	return errs
}

func dnsLabel(p *field.Path, s string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(s) {
		errs = append(errs, field.Invalid(p, s, msg))
	}
	return errs
}
