package render

import (
	"fmt"
	"math/rand/v2"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"
	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

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

// podSets derives the pod sets of an object the way Kueue's integrations do: replicas × pods per
// replica for each template (JobSet: replicas × parallelism; Job: parallelism; kubeflow kinds:
// replicas; TrainJob: numNodes × resourcesPerNode; Katib: each trial a one-pod Job, K of them).
func podSets(t *testing.T, obj client.Object) []podSet {
	t.Helper()
	ps := func(n int32, tmpl *corev1.PodTemplateSpec, labels map[string]string) podSet {
		return podSet{count: int(n), requests: tmpl.Spec.Containers[0].Resources.Requests, meta: tmpl.Annotations, labels: labels}
	}
	switch o := obj.(type) {
	case *batchv1.Job:
		return []podSet{ps(*o.Spec.Parallelism, &o.Spec.Template, o.Labels)}
	case *jobsetv1alpha2.JobSet:
		var out []podSet
		for _, rj := range o.Spec.ReplicatedJobs {
			out = append(out, ps(rj.Replicas**rj.Template.Spec.Parallelism, &rj.Template.Spec.Template, o.Labels))
		}
		return out
	case *mpiv2beta1.MPIJob:
		var out []podSet
		for _, typ := range []mpiv2beta1.MPIReplicaType{mpiv2beta1.MPIReplicaTypeLauncher, mpiv2beta1.MPIReplicaTypeWorker} {
			if r := o.Spec.MPIReplicaSpecs[typ]; r != nil { // a launcher-less run has no Worker with one pod
				out = append(out, ps(*r.Replicas, &r.Template, o.Labels))
			}
		}
		return out
	case *kftov1.PyTorchJob:
		return kubeflowPodSets(o.Spec.PyTorchReplicaSpecs, o.Labels, ps)
	case *kftov1.TFJob:
		return kubeflowPodSets(o.Spec.TFReplicaSpecs, o.Labels, ps)
	case *trainerv1alpha1.TrainJob:
		tmpl := corev1.PodTemplateSpec{}
		tmpl.Annotations = o.Spec.PodTemplateOverrides[0].Metadata.Annotations
		tmpl.Spec.Containers = []corev1.Container{{Resources: *o.Spec.Trainer.ResourcesPerNode}}
		return []podSet{ps(*o.Spec.Trainer.NumNodes, &tmpl, o.Labels)}
	case *katibv1beta1.Experiment:
		var trial batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Spec.TrialTemplate.TrialSpec.Object, &trial); err != nil {
			t.Fatal(err)
		}
		return []podSet{ps(*o.Spec.MaxTrialCount**trial.Spec.Parallelism, &trial.Spec.Template, trial.Labels)}
	}
	t.Fatalf("no pod sets for %T", obj)
	return nil
}

func kubeflowPodSets(specs map[kftov1.ReplicaType]*kftov1.ReplicaSpec, labels map[string]string, ps func(int32, *corev1.PodTemplateSpec, map[string]string) podSet) []podSet {
	var out []podSet
	for _, typ := range []kftov1.ReplicaType{"Master", "PS", "Worker"} {
		if r, ok := specs[typ]; ok {
			out = append(out, ps(*r.Replicas, &r.Template, labels))
		}
	}
	return out
}

// dropped is the role a kind leaves to someone else (see the kinds' comments).
var dropped = map[string]string{"Experiment": trace.RoleController, "TrainJob": trace.RoleLauncher}

// TestPodSetsMatchTrace renders 10,000 random workloads with every kind that supports them and
// checks that Kueue would see exactly the trace's pods and requests, that the contract parses back,
// and that every object validates against the upstream CRDs.
func TestPodSetsMatchTrace(t *testing.T) {
	n := 10000
	if testing.Short() {
		n = 500
	}
	v, err := validate.New()
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
			if err := checkPodSets(t, w, kind, p, objs); err != nil {
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

func checkPodSets(t *testing.T, w *trace.Workload, kind string, p Placement, objs []client.Object) error {
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
		for _, s := range podSets(t, o) {
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
			if _, dup := got[c.Role]; dup {
				return fmt.Errorf("role %s has two pod sets", c.Role)
			}
			got[c.Role] = s
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("pod sets for roles %v, want %v", keys(got), keys(want))
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
