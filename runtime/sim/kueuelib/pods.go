package kueuelib

import (
	"iter"

	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/podset"
	utiltas "sigs.k8s.io/kueue/pkg/util/tas"
)

// What Kueue's job integrations and its topology ungater do to the pods of an admitted Workload,
// each through Kueue's own function.

// PodTemplate gives pod, the template of pod set ps of an admitted Workload, what its admission
// psa assigns, as Kueue's job integrations do when they start the job: podset.FromAssignment
// collects the assigned flavors' node labels and tolerations (read from the Store) and, with a
// topology assignment, the topology scheduling gate and annotation, and podset.Merge merges them
// into pod's metadata and spec (an error when they conflict with the template's).
func (k *Kueue) PodTemplate(pod *corev1.Pod, psa *kueue.PodSetAssignment, ps *kueue.PodSet) error {
	info, err := podset.FromAssignment(k.ctx, k.Store, psa, ps)
	if err != nil {
		return err
	}
	return mergePodSet(k.log, &pod.ObjectMeta, &pod.Spec, info)
}

// CheckAssignment is PodTemplate's podset.FromAssignment alone, for a pod set whose template
// keeps its pre-admission form: it fails as PodTemplate would when an assigned flavor is
// missing, and changes nothing.
func (k *Kueue) CheckAssignment(psa *kueue.PodSetAssignment, ps *kueue.PodSet) error {
	_, err := podset.FromAssignment(k.ctx, k.Store, psa, ps)
	return err
}

// TopologyDomains yields the domains of a topology assignment in Kueue's order, each as its
// values (one per level of ta.Levels) and the number of pods assigned to it: Kueue's
// tas.InternalSeqFrom, which expands the assignment's compressed slices. A nil ta has none.
func TopologyDomains(ta *kueue.TopologyAssignment) iter.Seq2[[]string, int] {
	return func(yield func([]string, int) bool) {
		if ta == nil {
			return
		}
		for d := range utiltas.InternalSeqFrom(ta) {
			if !yield(d.Values, int(d.Count)) {
				return
			}
		}
	}
}
