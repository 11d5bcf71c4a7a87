package cluster

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	// v1beta1 only to check that the v1beta2 objects mean what the v1beta1 ones did.
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/render/validate"
)

var update = flag.Bool("update", false, "rewrite golden files")

// examples are the example specs plus every-field, a spec that sets every field reaching a Kueue
// object.
var examples = []string{"small", "teams", "mixed", "every-field"}

func loadExample(t *testing.T, name string) *Spec {
	t.Helper()
	path := filepath.Join("..", "..", "examples", "clusters", name+".yaml")
	if name == "every-field" {
		path = filepath.Join("testdata", "specs", name+".yaml")
	}
	s, err := Load(path)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return s
}

// manifest renders objects as multi-document YAML the way they are applied: no status blocks
// (except a Node's capacity and allocatable, which KWOK keeps) and no null creationTimestamp.
func manifest(t *testing.T, objs []client.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, node := o.(*corev1.Node); node {
			st := m["status"].(map[string]any)
			m["status"] = map[string]any{"capacity": st["capacity"], "allocatable": st["allocatable"]}
		} else {
			delete(m, "status")
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes()
}

func TestObjectsGolden(t *testing.T) {
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			objs, err := loadExample(t, name).Objects(Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := manifest(t, objs)
			golden := filepath.Join("testdata", name+".v1beta2.golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("objects differ from %s (run with -update and review the diff)", golden)
			}
		})
	}
}

// TestObjectsMeanWhatV1beta1Meant converts the v1beta2 objects back to v1beta1 with Kueue's own
// conversion (what its webhook does for a v1beta1 client) and compares them with
// testdata/<name>.v1beta1.golden.yaml, the output of kueuelab's v1beta1 renderer before render moved
// to v1beta2. -update never rewrites those files: they are the record of what each spec meant, so
// edit one by hand only when the spec it renders changes meaning.
func TestObjectsMeanWhatV1beta1Meant(t *testing.T) {
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			objs, err := loadExample(t, name).Objects(Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range objs {
				if objs[i], err = toV1beta1(o); err != nil {
					t.Fatal(err)
				}
			}
			golden := filepath.Join("testdata", name+".v1beta1.golden.yaml")
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got := manifest(t, objs); !bytes.Equal(got, want) {
				t.Errorf("the v1beta2 objects converted to v1beta1 differ from %s:\n%s", golden, firstDifference(string(want), string(got)))
			}
		})
	}
}

// toV1beta1 converts a rendered Kueue object to v1beta1 with Kueue's conversion functions; other
// objects are returned as they are.
func toV1beta1(o client.Object) (client.Object, error) {
	var out client.Object
	var err error
	switch in := o.(type) {
	case *kueue.WorkloadPriorityClass:
		v := &kueuev1beta1.WorkloadPriorityClass{}
		err, out = kueuev1beta1.Convert_v1beta2_WorkloadPriorityClass_To_v1beta1_WorkloadPriorityClass(in, v, nil), v
	case *kueue.ResourceFlavor:
		v := &kueuev1beta1.ResourceFlavor{}
		err, out = kueuev1beta1.Convert_v1beta2_ResourceFlavor_To_v1beta1_ResourceFlavor(in, v, nil), v
	case *kueue.Topology:
		v := &kueuev1beta1.Topology{}
		err, out = kueuev1beta1.Convert_v1beta2_Topology_To_v1beta1_Topology(in, v, nil), v
	case *kueue.Cohort:
		v := &kueuev1beta1.Cohort{}
		err, out = kueuev1beta1.Convert_v1beta2_Cohort_To_v1beta1_Cohort(in, v, nil), v
	case *kueue.ClusterQueue:
		v := &kueuev1beta1.ClusterQueue{}
		err, out = kueuev1beta1.Convert_v1beta2_ClusterQueue_To_v1beta1_ClusterQueue(in, v, nil), v
	case *kueue.LocalQueue:
		v := &kueuev1beta1.LocalQueue{}
		err, out = kueuev1beta1.Convert_v1beta2_LocalQueue_To_v1beta1_LocalQueue(in, v, nil), v
	default:
		if o.GetObjectKind().GroupVersionKind().Group == kueue.SchemeGroupVersion.Group {
			return nil, fmt.Errorf("%T: no v1beta1 conversion in this test", o)
		}
		return o, nil
	}
	if err != nil {
		return nil, fmt.Errorf("convert %T %s to v1beta1: %w", o, o.GetName(), err)
	}
	out.GetObjectKind().SetGroupVersionKind(kueuev1beta1.SchemeGroupVersion.WithKind(o.GetObjectKind().GroupVersionKind().Kind))
	return out, nil
}

// firstDifference shows where got first departs from want, with a few lines of each around it.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	lines := func(l []string) string {
		return strings.Join(l[max(0, i-3):min(len(l), i+4)], "\n")
	}
	return fmt.Sprintf("first difference at line %d\nwant:\n%s\ngot:\n%s", i+1, lines(w), lines(g))
}

// TestObjectsEveryField checks the v1beta2 field of every spec field, as read by hand from
// testdata/specs/every-field.yaml and Kueue's v1beta2 API (apis/kueue/v1beta2).
func TestObjectsEveryField(t *testing.T) {
	objs, err := loadExample(t, "every-field").Objects(Options{OmitNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]map[string]any{}
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Group == kueue.SchemeGroupVersion.Group && gvk.Version != "v1beta2" {
			t.Errorf("%s %s: apiVersion %s, want kueue.x-k8s.io/v1beta2", gvk.Kind, o.GetName(), gvk.GroupVersion())
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		byKey[gvk.Kind+"/"+o.GetName()] = m
	}
	for _, c := range []struct {
		obj  string
		path string // dot-separated; [i] indexes a list
		want any
	}{
		{"WorkloadPriorityClass/high", "value", int64(900)},
		{"WorkloadPriorityClass/high", "description", "the top class"},
		{"WorkloadPriorityClass/standard", "value", int64(100)},
		{"WorkloadPriorityClass/low", "value", int64(5)},
		{"ResourceFlavor/h100-sxm", "spec.topologyName", "dc"},
		{"ResourceFlavor/h100-sxm", "spec.tolerations[0]", map[string]any{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}},
		{"ResourceFlavor/h100-sxm", "spec.tolerations[1]", map[string]any{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}},
		{"Topology/dc", "spec.levels[1].nodeLabel", "example.com/rack"},
		{"Cohort/root", "spec.fairSharing.weight", "1500m"},
		{"Cohort/lab", "spec.parentName", "root"},
		{"Cohort/lab", "spec.fairSharing.weight", "2"},
		{"Cohort/lab", "spec.resourceGroups[0].flavors[0].resources[0]", map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4", "lendingLimit": "2"}},
		{"ClusterQueue/alpha", "spec.cohortName", "lab"},
		{"ClusterQueue/alpha", "spec.namespaceSelector.matchLabels", map[string]any{"kueuelab.io/team": "alpha"}},
		{"ClusterQueue/alpha", "spec.queueingStrategy", "StrictFIFO"},
		{"ClusterQueue/alpha", "spec.preemption", map[string]any{"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerOrNewerEqualPriority",
			"borrowWithinCohort": map[string]any{"policy": "LowerPriority", "maxPriorityThreshold": int64(50)}}},
		{"ClusterQueue/alpha", "spec.fairSharing.weight", "500m"},
		{"ClusterQueue/alpha", "spec.flavorFungibility", map[string]any{"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"}},
		{"ClusterQueue/alpha", "spec.admissionScope.admissionMode", "UsageBasedAdmissionFairSharing"},
		{"ClusterQueue/alpha", "spec.resourceGroups[0].coveredResources", []any{"cpu", "memory", "nvidia.com/gpu"}},
		{"ClusterQueue/alpha", "spec.resourceGroups[0].flavors[0].resources[2]", map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "0"}},
		{"ClusterQueue/alpha", "spec.resourceGroups[0].flavors[1].resources[2]", map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8", "lendingLimit": "4"}},
		{"ClusterQueue/beta", "spec.cohortName", "root"},
		{"ClusterQueue/beta", "spec.preemption", map[string]any{"reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority"}},
		{"ClusterQueue/beta", "spec.flavorFungibility", map[string]any{"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}},
		{"ClusterQueue/beta", "spec.admissionScope.admissionMode", "NoAdmissionFairSharing"},
		{"ClusterQueue/beta", "spec.queueingStrategy", "BestEffortFIFO"},
		{"ClusterQueue/solo", "spec.cohortName", nil},
		{"ClusterQueue/solo", "spec.namespaceSelector", map[string]any{}},
		{"ClusterQueue/solo", "spec.resourceGroups[0].coveredResources", []any{"cpu", "memory", "pods"}},
		{"LocalQueue/beta-queue", "metadata.namespace", "beta"},
		{"LocalQueue/beta-queue", "spec.clusterQueue", "beta"},
	} {
		obj, ok := byKey[c.obj]
		if !ok {
			t.Errorf("%s: not rendered", c.obj)
			continue
		}
		if got := lookup(obj, c.path); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %s = %#v, want %#v", c.obj, c.path, got, c.want)
		}
	}
}

// lookup follows a dot-separated path with [i] list indexes; nil when a step is missing.
func lookup(v any, path string) any {
	for _, step := range strings.Split(path, ".") {
		name, idx, indexed := strings.Cut(step, "[")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[name]
		if indexed {
			i, err := strconv.Atoi(strings.TrimSuffix(idx, "]"))
			l, ok := v.([]any)
			if err != nil || !ok || i >= len(l) {
				return nil
			}
			v = l[i]
		}
	}
	return v
}

func TestObjectsValidate(t *testing.T) {
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range examples {
		objs, err := loadExample(t, name).Objects(Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := v.Validate(o); err != nil {
				t.Errorf("%s: %s %s: %v", name, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
			}
		}
	}
}

// TestValidatorCatchesBadQueue guards TestObjectsValidate against a validator that accepts
// anything: a rendered ClusterQueue broken after the fact must be rejected (a CEL rule).
func TestValidatorCatchesBadQueue(t *testing.T) {
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := loadExample(t, "teams").Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if cq, ok := o.(*kueue.ClusterQueue); ok {
			cq.Spec.Preemption.ReclaimWithinCohort = kueue.PreemptionPolicyNever
			if err := v.Validate(cq); err == nil {
				t.Fatal("validator accepted reclaimWithinCohort=Never with borrowWithinCohort=LowerPriority")
			}
			return
		}
	}
	t.Fatal("no ClusterQueue rendered")
}

func TestObjectsShape(t *testing.T) {
	objs, err := loadExample(t, "teams").Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]int{"Namespace": 0, "WorkloadPriorityClass": 1, "ResourceFlavor": 2, "Topology": 3, "Cohort": 4, "ClusterQueue": 5, "LocalQueue": 6, "Node": 7}
	last, gpus, nodes := -1, int64(0), 0
	for _, o := range objs {
		k := o.GetObjectKind().GroupVersionKind().Kind
		if order[k] < last {
			t.Errorf("%s %s out of apply order", k, o.GetName())
		}
		last = order[k]
		if n, ok := o.(*corev1.Node); ok {
			nodes++
			q := n.Status.Allocatable["nvidia.com/gpu"]
			gpus += q.Value()
			if n.Annotations["kwok.x-k8s.io/node"] != "fake" || n.Spec.Taints[0].Key != "kwok.x-k8s.io/node" {
				t.Errorf("node %s lacks KWOK annotation or taint", n.Name)
			}
		}
	}
	if nodes != 16 || gpus != 96 {
		t.Errorf("teams.yaml: %d nodes, %d GPUs; want 16 and 96", nodes, gpus)
	}
	objs, err = loadExample(t, "teams").Objects(Options{OmitNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, ok := o.(*corev1.Node); ok {
			t.Fatal("OmitNodes rendered a Node")
		}
	}
}
