package kueuelib

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	utiltas "sigs.k8s.io/kueue/pkg/util/tas"
)

// TestPodTemplate merges an assigned flavor's node labels and tolerations into a template.
func TestPodTemplate(t *testing.T) {
	f := newFixture(t)
	tol := corev1.Toleration{Key: "pool", Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule}
	if err := f.k.Store.AddObject(&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "x"},
		Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"pool": "x"}, Tolerations: []corev1.Toleration{tol}}}); err != nil {
		t.Fatal(err)
	}
	ps := &kueue.PodSet{Name: "main", Count: 2}
	psa := &kueue.PodSetAssignment{Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "x"}}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "z"}}}
	if err := f.k.CheckAssignment(psa, ps); err != nil {
		t.Fatal(err)
	}
	if err := f.k.PodTemplate(pod, psa, ps); err != nil {
		t.Fatal(err)
	}
	if pod.Spec.NodeSelector["pool"] != "x" || pod.Spec.NodeSelector["zone"] != "z" || !slices.Equal(pod.Spec.Tolerations, []corev1.Toleration{tol}) {
		t.Fatalf("merged template: selector %v, tolerations %v", pod.Spec.NodeSelector, pod.Spec.Tolerations)
	}
	psa.Flavors["nvidia.com/gpu"] = "missing"
	if err := f.k.CheckAssignment(psa, ps); err == nil {
		t.Error("CheckAssignment with a missing flavor must fail")
	}
	if err := f.k.PodTemplate(pod, psa, ps); err == nil {
		t.Error("PodTemplate with a missing flavor must fail")
	}
}

// TestTopologyDomains reads an assignment written by Kueue's own encoder back as Kueue's decoder
// does.
func TestTopologyDomains(t *testing.T) {
	for range TopologyDomains(nil) {
		t.Fatal("a nil assignment has domains")
	}
	want := &utiltas.TopologyAssignment{Levels: []string{"block", "rack"}, Domains: []utiltas.TopologyDomainAssignment{
		{Values: []string{"b1", "r1"}, Count: 2}, {Values: []string{"b1", "r2"}, Count: 2}, {Values: []string{"b2", "r7"}, Count: 1}}}
	ta := utiltas.V1Beta2From(want)
	var got []utiltas.TopologyDomainAssignment
	for values, n := range TopologyDomains(ta) {
		got = append(got, utiltas.TopologyDomainAssignment{Values: values, Count: int32(n)})
	}
	if len(got) != len(want.Domains) {
		t.Fatalf("%d domains, want %d", len(got), len(want.Domains))
	}
	for i := range got {
		if !slices.Equal(got[i].Values, want.Domains[i].Values) || got[i].Count != want.Domains[i].Count {
			t.Errorf("domain %d: %+v, want %+v", i, got[i], want.Domains[i])
		}
	}
	for range TopologyDomains(ta) {
		break // stopping early must not panic
	}
}
