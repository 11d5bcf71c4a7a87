package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/kueuelab/kueuelab/model/trace"
)

var tfJobIntegration = Integration{
	Kind:        TFJob{},
	GVK:         kftov1.SchemeGroupVersion.WithKind(kftov1.TFJobKind),
	Resource:    "tfjobs",
	AddToScheme: kftov1.AddToScheme,
	Kueue:       []KueueIntegration{{Framework: "kubeflow.org/tfjob", Kind: kftov1.SchemeGroupVersion.WithKind(kftov1.TFJobKind), Resource: "tfjobs"}},
	CRDs:        []CRDSource{trainingCRDs("kubeflow.org_tfjobs.yaml")},
	Operators:   []*Operator{trainingOperator},
	Status: statusOf(func(j *kftov1.TFJob) Status {
		return kubeflowStatus(j.Spec.RunPolicy.Suspend, j.Status)
	}),
	PodSets: podSetsOf(func(j *kftov1.TFJob) []PodSet { return kubeflowPodSets(j.Spec.TFReplicaSpecs) }),
}

// TFJob renders a parameter-server training run as a training-operator TFJob (PS + Worker).
type TFJob struct{}

// Name implements Kind.
func (TFJob) Name() string { return "TFJob" }

// Families implements Kind.
func (TFJob) Families() []trace.Family { return []trace.Family{trace.ParameterServerTraining} }

// Render implements Kind.
func (TFJob) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if err := b.requireRoles("TFJob", trace.RolePS, trace.RoleWorker); err != nil {
		return nil, err
	}
	if b.roleIndex(trace.RoleWorker) < 0 {
		return nil, fmt.Errorf("a TFJob needs workers")
	}
	specs, err := kubeflowReplicas(b, kftov1.TFJobDefaultContainerName, corev1.ContainerPort{Name: kftov1.TFJobDefaultPortName, ContainerPort: kftov1.TFJobDefaultPort},
		map[string]kftov1.ReplicaType{trace.RolePS: kftov1.TFJobReplicaTypePS, trace.RoleWorker: kftov1.TFJobReplicaTypeWorker})
	if err != nil {
		return nil, err
	}
	job := &kftov1.TFJob{
		TypeMeta:   typeMeta(kftov1.SchemeGroupVersion.String(), kftov1.TFJobKind),
		ObjectMeta: b.topMeta(),
		Spec: kftov1.TFJobSpec{
			RunPolicy:      kubeflowRunPolicy(),
			SuccessPolicy:  ptr.To(kftov1.SuccessPolicyDefault),
			TFReplicaSpecs: specs,
		},
	}
	job.Spec.RunPolicy.BackoffLimit = b.runPolicyBackoffLimit()
	return []client.Object{job}, nil
}
