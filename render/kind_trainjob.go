package render

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/kueuelab/kueuelab/model/trace"
)

// TrainingRuntimeName is the ClusterTrainingRuntime every rendered TrainJob references.
const TrainingRuntimeName = "kueuelab-torch-distributed"

// trainerNode is the replicatedJob and container name Trainer's torch plugin fills in
// (github.com/kubeflow/trainer/v2/pkg/constants.Node; that package drags in the controller's deps).
const trainerNode = "node"

// TrainJob renders a distributed training run as a Kubeflow Trainer v2 TrainJob on the
// kueuelab-torch-distributed runtime: numNodes = workers, resourcesPerNode = a worker's requests.
// torchrun's rendezvous runs on node 0, so the trace's CPU-only launcher has no pod of its own here.
type TrainJob struct{}

// Name implements Kind.
func (TrainJob) Name() string { return "TrainJob" }

// Families implements Kind.
func (TrainJob) Families() []trace.Family { return []trace.Family{trace.DistributedTraining} }

// Render implements Kind.
func (TrainJob) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if err := b.requireRoles("TrainJob", trace.RoleLauncher, trace.RoleWorker); err != nil {
		return nil, err
	}
	wk := b.roleIndex(trace.RoleWorker)
	if wk < 0 {
		return nil, fmt.Errorf("a TrainJob needs workers")
	}
	r := &b.roles[wk]
	// The pod template lives in the runtime; this TrainJob's pods get their part of it through
	// an override: the contract, placement and tolerations.
	tmpl, err := b.podTemplate(r, trainerNode, corev1.RestartPolicyNever)
	if err != nil {
		return nil, err
	}
	c := tmpl.Spec.Containers[0]
	tj := &trainerv1alpha1.TrainJob{
		TypeMeta:   typeMeta(trainerv1alpha1.GroupVersion.String(), trainerv1alpha1.TrainJobKind),
		ObjectMeta: b.topMeta(),
		Spec: trainerv1alpha1.TrainJobSpec{
			RuntimeRef: trainerv1alpha1.RuntimeRef{
				Name:     TrainingRuntimeName,
				APIGroup: ptr.To(trainerv1alpha1.GroupVersion.Group),
				Kind:     ptr.To(trainerv1alpha1.ClusterTrainingRuntimeKind),
			},
			Trainer: &trainerv1alpha1.Trainer{
				Image:            ptr.To(c.Image),
				Command:          c.Command,
				NumNodes:         ptr.To(int32(r.Replicas)),
				ResourcesPerNode: &c.Resources,
			},
			PodTemplateOverrides: []trainerv1alpha1.PodTemplateOverride{{
				TargetJobs: []trainerv1alpha1.PodTemplateOverrideTargetJob{{Name: trainerNode}},
				Metadata:   &metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations},
				Spec: &trainerv1alpha1.PodTemplateSpecOverride{
					NodeSelector: tmpl.Spec.NodeSelector,
					Tolerations:  tmpl.Spec.Tolerations,
				},
			}},
			Suspend: ptr.To(true),
		},
	}
	return []client.Object{tj}, nil
}

// TrainingRuntimes returns the cluster-scoped runtimes rendered TrainJobs reference; they belong
// once in the cluster part of the output. The runtime follows Trainer's own torch-distributed
// runtime, with the target's image so that a TrainJob that overrides nothing still runs.
func TrainingRuntimes(o Options) []client.Object {
	image := KWOKImage
	if o.Target == TargetReal {
		image = o.Image
		if image == "" {
			image = DefaultRealImage
		}
	}
	rt := &trainerv1alpha1.ClusterTrainingRuntime{
		TypeMeta: typeMeta(trainerv1alpha1.GroupVersion.String(), trainerv1alpha1.ClusterTrainingRuntimeKind),
		ObjectMeta: metav1.ObjectMeta{
			Name:   TrainingRuntimeName,
			Labels: map[string]string{"trainer.kubeflow.org/framework": "torch"},
		},
		Spec: trainerv1alpha1.TrainingRuntimeSpec{
			MLPolicy: &trainerv1alpha1.MLPolicy{
				NumNodes: ptr.To(int32(1)),
				MLPolicySource: trainerv1alpha1.MLPolicySource{
					Torch: &trainerv1alpha1.TorchMLPolicySource{NumProcPerNode: ptr.To(intstr.FromString("auto"))},
				},
			},
			Template: trainerv1alpha1.JobSetTemplateSpec{
				Spec: jobsetv1alpha2.JobSetSpec{
					ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
						Name:     trainerNode,
						Replicas: 1,
						Template: batchv1.JobTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
							Spec: batchv1.JobSpec{
								BackoffLimit: ptr.To(int32(0)),
								Template: corev1.PodTemplateSpec{
									Spec: corev1.PodSpec{
										RestartPolicy: corev1.RestartPolicyNever,
										Containers:    []corev1.Container{{Name: trainerNode, Image: image}},
									},
								},
							},
						},
					}},
				},
			},
		},
	}
	return []client.Object{rt}
}
