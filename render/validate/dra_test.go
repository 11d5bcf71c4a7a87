package validate

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/cluster"
)

const migClusterSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- {name: mig, gpuFamily: H100-SXM, count: 2, gpusPerNode: 8, cpu: 192, memory: 2000Gi, mig: {}}
clusterQueues:
- name: cq
  quotas:
  - flavor: h100-sxm-mig
    resources: {cpu: 384, memory: 4000Gi, gpu.memory: 1280Gi}
teams:
- {name: team-a, clusterQueue: cq}
`

// TestMIGObjectsValidate renders a MIG cluster spec and, with every kind that renders each
// GPU family, generated workloads whose GPU requests are MIG slices instead; every object must
// pass the validator (DeviceClasses, ResourceSlices and ResourceClaimTemplates by the DRA checks,
// the pod templates' resourceClaims by each kind's CRD schema).
func TestMIGObjectsValidate(t *testing.T) {
	v := validator(t)
	spec, err := cluster.Parse("mig.yaml", []byte(migClusterSpec))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := spec.Objects(cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetObjectKind().GroupVersionKind().Kind]++
		if err := v.Validate(o); err != nil {
			t.Errorf("%s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	if kinds["ResourceSlice"] != 2*9 || kinds["DeviceClass"] != 2 {
		t.Errorf("objects by kind %v: want 18 ResourceSlices (2 nodes × (1 + 8 GPUs)) and 2 DeviceClasses", kinds)
	}

	p, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(p, 7)
	reg := render.DefaultRegistry()
	seen := map[trace.Family]bool{}
	for i := 0; i < 400 && len(seen) < 5; i++ {
		w, _ := g.Next()
		if !w.WorkloadType.GPU() || seen[w.WorkloadType] {
			continue
		}
		seen[w.WorkloadType] = true
		for gi := range w.Pods {
			r := w.Pods[gi].Requests
			if n, ok := r[trace.ResourceGPU]; ok {
				delete(r, trace.ResourceGPU)
				r[trace.MIGResource("1g.10gb")] = n
			}
		}
		if err := w.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, name := range reg.Names() {
			if !reg.Supports(name, w.WorkloadType) {
				continue
			}
			m := render.DefaultMapping()
			m[w.WorkloadType] = name
			rr, err := render.NewRenderer(reg, m, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			objs, err := rr.Render(w, nil, render.Placement{Namespace: "team-a", Queue: "team-a-lq"})
			if err != nil {
				t.Fatalf("%s as %s: %v", w.WorkloadType, name, err)
			}
			claims := 0
			for _, o := range objs {
				if _, ok := o.(*resourceapi.ResourceClaimTemplate); ok {
					claims++
				}
				if err := v.Validate(o); err != nil {
					t.Errorf("%s as %s: %s %s: %v", w.WorkloadType, name, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
				}
			}
			if claims == 0 {
				t.Errorf("%s as %s: no ResourceClaimTemplate among %s", w.WorkloadType, name, kindsOf(objs))
			}
		}
	}
	if len(seen) < 5 {
		t.Fatalf("generated only families %v", seen)
	}
}

func kindsOf(objs []client.Object) string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.GetObjectKind().GroupVersionKind().Kind)
	}
	return strings.Join(ks, ", ")
}

func TestInvalidDRAObjectsFail(t *testing.T) {
	v := validator(t)
	tmpl := func(mut func(*resourceapi.ResourceClaimTemplate)) runtime.Object {
		x := &resourceapi.ResourceClaimTemplate{}
		x.APIVersion, x.Kind = "resource.k8s.io/v1", "ResourceClaimTemplate"
		x.Name, x.Namespace = "t", "ns"
		x.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "mig", Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "mig.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: render.MIGSelector("1g.10gb")}}},
		}}}
		mut(x)
		return x
	}
	if err := v.Validate(tmpl(func(*resourceapi.ResourceClaimTemplate) {})); err != nil {
		t.Fatalf("valid template: %v", err)
	}
	tests := []struct {
		name string
		obj  runtime.Object
		want string
	}{
		{"bad CEL", tmpl(func(x *resourceapi.ResourceClaimTemplate) {
			x.Spec.Spec.Devices.Requests[0].Exactly.Selectors[0].CEL.Expression = "device.attributes['gpu.nvidia.com'].profile =="
		}), "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression"},
		{"zero count", tmpl(func(x *resourceapi.ResourceClaimTemplate) { x.Spec.Spec.Devices.Requests[0].Exactly.Count = 0 }), "exactly.count"},
		{"request name", tmpl(func(x *resourceapi.ResourceClaimTemplate) { x.Spec.Spec.Devices.Requests[0].Name = "MIG_1" }), "requests[0].name"},
		{"slice with devices and counters", &resourceapi.ResourceSlice{
			TypeMeta: typeMetaOf("ResourceSlice"), ObjectMeta: metaNamed("s"),
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", Pool: resourceapi.ResourcePool{Name: "n", ResourceSliceCount: 1}, AllNodes: ptrTo(true),
				Devices:        []resourceapi.Device{{Name: "gpu-0"}},
				SharedCounters: []resourceapi.CounterSet{{Name: "gpu-0-counter-set"}}},
		}, "exactly one of devices and sharedCounters"},
		{"dotted device name", &resourceapi.ResourceSlice{
			TypeMeta: typeMetaOf("ResourceSlice"), ObjectMeta: metaNamed("s"),
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.nvidia.com", Pool: resourceapi.ResourcePool{Name: "n", ResourceSliceCount: 1}, AllNodes: ptrTo(true),
				Devices: []resourceapi.Device{{Name: "gpu-0-mig-1g.10gb-0"}}},
		}, "spec.devices[0].name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Validate(tc.obj)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func typeMetaOf(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: kind}
}

func metaNamed(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

func ptrTo[T any](v T) *T { return &v }
