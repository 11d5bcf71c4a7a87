package render

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
)

// jobIntegration: kube-controller-manager runs Jobs; Kueue's batch/job integration queues them.
var jobIntegration = Integration{
	Kind:        Job{},
	GVK:         batchv1.SchemeGroupVersion.WithKind("Job"),
	Resource:    "jobs",
	AddToScheme: batchv1.AddToScheme,
	Kueue:       []KueueIntegration{batchJobKueue},
	Status:      statusOf(jobStatus),
	PodSets: podSetsOf(func(j *batchv1.Job) []PodSet {
		return []PodSet{{Name: "main", Count: int(ptr.Deref(j.Spec.Parallelism, 1)), Template: j.Spec.Template}}
	}),
}

// batchJobKueue is Kueue's batch/v1 Job integration (also what queues a Katib Experiment's trials).
var batchJobKueue = KueueIntegration{Framework: "batch/job", Kind: batchv1.SchemeGroupVersion.WithKind("Job"), Resource: "jobs"}

func jobStatus(j *batchv1.Job) Status {
	s := Status{Suspended: ptr.Deref(j.Spec.Suspend, false), Detail: fmt.Sprintf("active=%d succeeded=%d failed=%d", j.Status.Active, j.Status.Succeeded, j.Status.Failed)}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			s.Finished, s.Succeeded = true, true
		case batchv1.JobFailed:
			s.Finished = true
		}
		s.Detail += " " + string(c.Type)
	}
	return s
}

// Job renders a single-role workload as a batch/v1 Job.
type Job struct{}

// Name implements Kind.
func (Job) Name() string { return "Job" }

// Families implements Kind.
func (Job) Families() []trace.Family {
	return []trace.Family{trace.SingleGPUTraining, trace.DebugEval, trace.CPUPreprocess, trace.CPUAnalytics}
}

// Render implements Kind.
func (Job) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if len(b.roles) != 1 {
		return nil, fmt.Errorf("a Job holds one pod group, the workload has %d", len(b.roles))
	}
	r := &b.roles[0]
	tmpl, err := b.podTemplate(r, "main", corev1.RestartPolicyNever)
	if err != nil {
		return nil, err
	}
	job := &batchv1.Job{
		TypeMeta:   typeMeta(batchv1.SchemeGroupVersion.String(), "Job"),
		ObjectMeta: b.topMeta(),
		Spec:       batchJobSpec(r.Replicas, tmpl),
	}
	job.Spec.BackoffLimit = b.jobBackoffLimit()
	return []client.Object{job}, nil
}

// batchJobSpec is a suspended Job of n pods that fails on the first pod failure: the trace decides
// failures, not retries.
func batchJobSpec(n int, tmpl corev1.PodTemplateSpec) batchv1.JobSpec {
	return batchv1.JobSpec{
		Parallelism:  ptr.To(int32(n)),
		Completions:  ptr.To(int32(n)),
		BackoffLimit: ptr.To(int32(0)),
		Suspend:      ptr.To(true),
		Template:     tmpl,
	}
}
