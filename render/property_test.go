package render

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/render/validate"
)

// podSet is what Kueue derives from one pod template: count pods of one shape.
type podSet struct {
	count    int
	requests corev1.ResourceList
	meta     map[string]string // the pod template's annotations
	labels   map[string]string // the labels Kueue reads the queue from
}

// podSets derives the pod sets of an object the way Kueue's integration of its kind does, with
// the labels Kueue reads the queue from (the top object's; a Katib trial's own).
func podSets(t *testing.T, reg *Registry, kind string, obj client.Object) []podSet {
	t.Helper()
	in, ok := reg.Integration(kind)
	if !ok {
		t.Fatalf("no integration %s", kind)
	}
	sets, err := in.PodSets(obj)
	if err != nil {
		t.Fatal(err)
	}
	labels := obj.GetLabels()
	if e, ok := obj.(*katibv1beta1.Experiment); ok {
		labels, _, _ = unstructured.NestedStringMap(e.Spec.TrialTemplate.TrialSpec.Object, "metadata", "labels")
	}
	out := make([]podSet, len(sets))
	for i, s := range sets {
		out[i] = podSet{count: s.Count, requests: s.Template.Spec.Containers[0].Resources.Requests, meta: s.Template.Annotations, labels: labels}
	}
	return out
}

// dropped is the role a kind leaves to someone else, added one it brings (see the kinds' comments).
var (
	dropped = map[string]string{"Experiment": trace.RoleController, "TrainJob": trace.RoleLauncher}
	added   = map[string]string{"RayJob": RaySubmitterRole}
)

// TestPodSetsMatchTrace renders 10,000 random workloads with every kind that supports them and
// checks that Kueue would see exactly the trace's pods and requests, that the contract parses back,
// and that every object validates against the upstream CRDs.
func TestPodSetsMatchTrace(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 500
	}
	v, err := validate.New(DefaultRegistry().AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	reg := DefaultRegistry()
	rng := rand.New(rand.NewPCG(3, 3))
	placer := testPlacer{topology: "cloud.provider.com/topology-block"}
	rendered := 0
	for i := range n {
		w := randomWorkload(rng, i)
		var jobs []*trace.Job
		if i%2 == 0 {
			jobs = jobsOf(w)
		}
		p, _ := placer.Place(w)
		opts := Options{}
		if i%3 == 0 {
			opts = Options{Target: TargetReal, Speedup: 10}
		}
		for _, kind := range reg.Names() {
			if !reg.Supports(kind, w.WorkloadType) {
				continue
			}
			k, _ := reg.Kind(kind)
			objs, err := k.Render(w, jobs, p, opts)
			if err != nil {
				t.Fatalf("%s as %s: %v", w.WorkloadID, kind, err)
			}
			rendered++
			if err := checkPodSets(t, reg, w, kind, p, objs); err != nil {
				t.Fatalf("%s as %s: %v", w.WorkloadID, kind, err)
			}
			if i%10 == 0 { // schema validation is the slow part; every 10th workload covers all shapes
				for _, o := range objs {
					if gvk := o.GetObjectKind().GroupVersionKind(); !v.Known(gvk) {
						t.Fatalf("%s as %s: the validator does not know %v", w.WorkloadID, kind, gvk)
					}
					if err := v.Validate(o); err != nil {
						t.Fatalf("%s as %s: %v", w.WorkloadID, kind, err)
					}
				}
			}
		}
	}
	t.Logf("%d workloads, %d renderings", n, rendered)
}

func checkPodSets(t *testing.T, reg *Registry, w *trace.Workload, kind string, p Placement, objs []client.Object) error {
	want := map[string]podSet{}
	for _, g := range w.Pods {
		if dropped[kind] == g.Role {
			continue
		}
		rr, _, err := resources(g.Requests, "")
		if err != nil {
			return err
		}
		want[g.Role] = podSet{count: g.Replicas, requests: rr.Requests}
	}
	got := map[string]podSet{}
	for _, o := range objs {
		if len(validation.IsDNS1035Label(o.GetName())) > 0 {
			return fmt.Errorf("name %q is not a DNS-1035 label", o.GetName())
		}
		for _, s := range podSets(t, reg, kind, o) {
			c, err := contract.Parse(s.meta)
			if err != nil {
				return err
			}
			if c.WorkloadID != w.WorkloadID || c.Family != w.WorkloadType || c.DurationSec != w.DurationSec {
				return fmt.Errorf("contract %+v does not describe the workload", c)
			}
			if s.labels[kueueconstants.QueueLabel] != p.Queue || s.labels[kueueconstants.WorkloadPriorityClassLabel] != p.PriorityClass {
				return fmt.Errorf("role %s: queue labels %v", c.Role, s.labels)
			}
			if c.Role == added[kind] {
				continue
			}
			if _, dup := got[c.Role]; dup {
				return fmt.Errorf("role %s has two pod sets", c.Role)
			}
			got[c.Role] = s
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("pod sets for roles %v, want %v", keys(got), keys(want))
	}
	// A gang is exactly the pods that carry its size: the agent waits for that many.
	gang, size := 0, 0
	for _, o := range objs {
		for _, s := range podSets(t, reg, kind, o) {
			c, _ := contract.Parse(s.meta)
			if c.GangSize > 0 {
				gang += s.count
				if size != 0 && size != c.GangSize {
					return fmt.Errorf("gang sizes %d and %d in one workload", size, c.GangSize)
				}
				size = c.GangSize
			}
		}
	}
	if gang != size {
		return fmt.Errorf("%d pods carry gang size %d", gang, size)
	}
	for role, ws := range want {
		gs, ok := got[role]
		if !ok {
			return fmt.Errorf("no pod set for role %s", role)
		}
		if gs.count != ws.count {
			return fmt.Errorf("role %s: %d pods, want %d", role, gs.count, ws.count)
		}
		if !equalTotals(gs, ws) {
			return fmt.Errorf("role %s: requests %v × %d, want %v × %d", role, gs.requests, gs.count, ws.requests, ws.count)
		}
	}
	return nil
}

// equalTotals compares count × requests per resource, exactly.
func equalTotals(a, b podSet) bool {
	if len(a.requests) != len(b.requests) {
		return false
	}
	for name, qa := range a.requests {
		qb, ok := b.requests[name]
		if !ok {
			return false
		}
		ta, tb := resource.Quantity{}, resource.Quantity{}
		for range a.count {
			ta.Add(qa)
		}
		for range b.count {
			tb.Add(qb)
		}
		if ta.Cmp(tb) != 0 {
			return false
		}
	}
	return true
}

func keys(m map[string]podSet) []string {
	var k []string
	for r := range m {
		k = append(k, r)
	}
	return k
}
