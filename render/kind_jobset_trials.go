package render

import (
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// trialReplicatedJob lays out the K trials of an HPO workload rendered as a JobSet: one
// replicatedJob "trial" with K replicas of a one-pod Job, because trials are independent runs
// (each its own Job, its own completion, as under Katib), unlike a gang's workers, which are one
// indexed Job. The HPO controller is the replicatedJob "controller" next to it: outside Katib
// nothing else would run the search, so it is rendered rather than assumed.
func trialReplicatedJob(r *role, tmpl corev1.PodTemplateSpec) jobsetv1alpha2.ReplicatedJob {
	return replicatedJob(r.Role, r.Replicas, 1, tmpl)
}
