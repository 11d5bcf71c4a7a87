package render

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kueuelab/kueuelab/model/trace"
)

// JobSet renders any workload as a JobSet with one replicatedJob per role, named after the role
// (launcher, worker, ps, controller, main; trials are laid out by trialReplicatedJob).
type JobSet struct{}

// Name implements Kind.
func (JobSet) Name() string { return "JobSet" }

// Families implements Kind.
func (JobSet) Families() []trace.Family { return trace.Families }

// Render implements Kind.
func (JobSet) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	js := &jobsetv1alpha2.JobSet{
		TypeMeta:   typeMeta(jobsetv1alpha2.GroupVersion.String(), "JobSet"),
		ObjectMeta: b.topMeta(),
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend: ptr.To(true),
			// What JobSet's webhook would fill in, written out because validation does not default.
			Network:        &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)},
			SuccessPolicy:  &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
			StartupPolicy:  &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder},
			ReplicatedJobs: make([]jobsetv1alpha2.ReplicatedJob, 0, len(b.roles)),
		},
	}
	for i := range b.roles {
		r := &b.roles[i]
		tmpl, err := b.podTemplate(r, "main", corev1.RestartPolicyNever)
		if err != nil {
			return nil, err
		}
		var rj jobsetv1alpha2.ReplicatedJob
		if r.Role == trace.RoleTrial {
			rj = trialReplicatedJob(r, tmpl)
		} else {
			rj = replicatedJob(r.Role, 1, r.Replicas, tmpl)
		}
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rj)
	}
	js.Spec.FailurePolicy = b.jobSetFailurePolicy()
	return []client.Object{js}, nil
}

// replicatedJob is replicas Jobs of pods indexed pods each; a pod failure fails its Job (the trace
// decides failures) and JobSet's failure policy then fails the set.
func replicatedJob(name string, replicas, pods int, tmpl corev1.PodTemplateSpec) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: int32(replicas),
		Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{
				Parallelism:    ptr.To(int32(pods)),
				Completions:    ptr.To(int32(pods)),
				BackoffLimit:   ptr.To(int32(0)),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template:       tmpl,
			},
		},
	}
}
