package kueuelib

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueuelab/kueuelab/runtime/sim/des"
)

// cluster is one flavor with 8 GPUs in two ClusterQueues of one cohort (4 GPUs nominal each),
// and a LocalQueue per queue in namespaces a and b.
func cluster() []client.Object {
	q := func(name string, gpus string) *kueue.ClusterQueue {
		return &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{
			CohortName: "all", NamespaceSelector: &metav1.LabelSelector{},
			Preemption: &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny, WithinClusterQueue: kueue.PreemptionPolicyLowerPriority},
			ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
				Flavors: []kueue.FlavorQuotas{{Name: "gpu", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse(gpus)}}}}}},
		}}
	}
	return []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "all"}},
		q("qa", "4"), q("qb", "4"),
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "qa"}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "lq"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "qb"}},
	}
}

func job(ns, name string, gpus int64, prio string) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{constants.QueueLabel: "lq", constants.WorkloadPriorityClassLabel: prio}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(1)), Completions: ptr.To(int32(1)), Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
				Name: "c", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)},
					Limits:   corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}}},
	}
}

type fixture struct {
	t    *testing.T
	loop *des.Loop
	k    *Kueue
}

func newFixture(t *testing.T) *fixture { return newFixtureOf(t, cluster()) }

// newFixtureOf is a Kueue over the cluster objects objs.
func newFixtureOf(t *testing.T, objs []client.Object) *fixture {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	l := des.New(0)
	k, err := New(Options{Scheme: s, Clock: l.Clock()})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.AddObjects(objs); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, loop: l, k: k}
}

// submit creates the Workload of j and delivers the create.
func (f *fixture) submit(j *batchv1.Job) *kueue.Workload {
	f.t.Helper()
	wl, err := f.k.WorkloadFor(j, metav1.NewTime(f.loop.Clock().Now()))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.k.Store.Create(f.k.Context(), wl); err != nil {
		f.t.Fatal(err)
	}
	f.deliver()
	return wl
}

func (f *fixture) deliver() []Change {
	var all []Change
	for f.k.Store.HasChanges() {
		for _, c := range f.k.Store.TakeChanges() {
			f.k.Deliver(c)
			all = append(all, c)
		}
	}
	return all
}

// cycles runs up to n scheduling cycles while there are heads, delivering Kueue's writes after
// each.
func (f *fixture) cycles(n int) []Change {
	var all []Change
	for i := 0; i < n && f.k.HasHeads(); i++ {
		f.loop.After(1, func() {}) // a second of virtual time per cycle
		f.loop.Step()
		if _, err := f.k.Cycle(); err != nil {
			f.t.Fatal(err)
		}
		all = append(all, f.deliver()...)
	}
	return all
}

func (f *fixture) get(wl *kueue.Workload) *kueue.Workload {
	return f.k.Store.Workload(client.ObjectKeyFromObject(wl))
}

func TestSeams(t *testing.T) {
	f := newFixture(t)
	if f.k.HasHeads() {
		t.Fatal("heads before any workload")
	}
	if _, err := f.k.Cycle(); err == nil {
		t.Fatal("a cycle without heads must be refused, not block")
	}
	f.submit(job("a", "j1", 1, "low"))
	if !f.k.HasHeads() || f.k.Queued() != 1 {
		t.Fatalf("heads %v, queued %d after one submission", f.k.HasHeads(), f.k.Queued())
	}
	f.cycles(10)
	if f.k.Queued() != 0 {
		t.Fatalf("queued %d after the cycle", f.k.Queued())
	}
}

func TestAdmitBorrowPreempt(t *testing.T) {
	f := newFixture(t)
	// Two 3-GPU low-priority workloads in qa: the second borrows from qb's idle quota.
	w1 := f.submit(job("a", "j1", 3, "low"))
	f.loop.After(1, func() {})
	f.loop.Step()
	w2 := f.submit(job("a", "j2", 3, "low"))
	f.cycles(10)
	for _, w := range []*kueue.Workload{w1, w2} {
		got := f.get(w)
		if !workload.IsAdmitted(got) || got.Status.Admission.ClusterQueue != "qa" {
			t.Fatalf("%s: admitted %v, admission %+v", w.Name, workload.IsAdmitted(got), got.Status.Admission)
		}
	}
	// qb reclaims its quota: a 4-GPU workload there preempts the borrower (the one admitted
	// last, a cycle after the other).
	w3 := f.submit(job("b", "j3", 4, "high"))
	// The preemptor stays at its queue's head while the preemption is pending: every cycle
	// tries it again.
	changes := f.cycles(3)
	if !f.k.HasHeads() {
		t.Error("the preemptor left its queue's head while its preemption is pending")
	}
	evicted := 0
	for _, c := range changes {
		if c.Old != nil && c.New != nil && IsEvicted(c.New) && !IsEvicted(c.Old) {
			evicted++
			if c.New.Name != w2.Name {
				t.Errorf("evicted %s, want the borrower %s", c.New.Name, w2.Name)
			}
		}
	}
	if evicted != 1 {
		t.Fatalf("%d evictions, want 1", evicted)
	}
	if workload.IsAdmitted(f.get(w3)) {
		t.Fatal("the preemptor was admitted before the victim released its quota")
	}
}

// TestNamespaceSelectorMatchesTheName: a ClusterQueue that admits from the namespace labelled
// with its own name (kubernetes.io/metadata.name, which the API server sets on every namespace)
// admits a workload of that namespace, created without labels; a namespace it does not select
// stays out.
func TestNamespaceSelectorMatchesTheName(t *testing.T) {
	objs := cluster()
	for _, o := range objs {
		if cq, ok := o.(*kueue.ClusterQueue); ok {
			cq.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "a"}}
		}
	}
	f := newFixtureOf(t, objs)
	in, out := f.submit(job("a", "in", 1, "low")), f.submit(job("b", "out", 1, "low"))
	f.cycles(5)
	if !workload.IsAdmitted(f.get(in)) || workload.IsAdmitted(f.get(out)) {
		t.Errorf("admitted: namespace a %v (want true), namespace b %v (want false)", workload.IsAdmitted(f.get(in)), workload.IsAdmitted(f.get(out)))
	}
}
