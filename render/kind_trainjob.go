package render

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"

	"github.com/kueuelab/kueuelab/model/trace"
)

const trainerModule, trainerVersion = "github.com/kubeflow/trainer/v2", "v2.2.1"

var trainJobIntegration = Integration{
	Kind:        TrainJob{},
	GVK:         trainerv1alpha1.GroupVersion.WithKind(trainerv1alpha1.TrainJobKind),
	Resource:    "trainjobs",
	AddToScheme: trainerv1alpha1.AddToScheme,
	Kueue: []KueueIntegration{{Framework: "trainer.kubeflow.org/trainjob",
		Kind: trainerv1alpha1.GroupVersion.WithKind(trainerv1alpha1.TrainJobKind), Resource: "trainjobs"}},
	// Trainer runs a TrainJob as a JobSet built from its runtime.
	CRDs: []CRDSource{{Module: trainerModule, Version: trainerVersion, Dir: "trainer", Install: trainerOperator.Install, Files: []string{
		"manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
	}}, jobSetCRDs},
	ClusterObjects: TrainingRuntimes,
	Operators:      []*Operator{jobSetOperator, trainerOperator},
	Status:         statusOf(trainJobStatus),
	// Kueue reads the pod sets off the JobSet the runtime makes: for kueuelab's runtime, numNodes
	// pods of resourcesPerNode with the override's metadata.
	PodSets: podSetsOf(func(j *trainerv1alpha1.TrainJob) []PodSet {
		tmpl := corev1.PodTemplateSpec{}
		for _, p := range j.Spec.RuntimePatches {
			if p.Manager != runtimePatchManager || p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil ||
				p.TrainingRuntimeSpec.Template.Spec == nil {
				continue
			}
			for _, rj := range p.TrainingRuntimeSpec.Template.Spec.ReplicatedJobs {
				if rj.Name != trainerNode || rj.Template == nil || rj.Template.Spec == nil || rj.Template.Spec.Template == nil {
					continue
				}
				if m := rj.Template.Spec.Template.Metadata; m != nil {
					tmpl.Labels, tmpl.Annotations = m.Labels, m.Annotations
				}
			}
		}
		var res corev1.ResourceRequirements
		n := int32(1)
		if t := j.Spec.Trainer; t != nil {
			if t.ResourcesPerNode != nil {
				res = *t.ResourcesPerNode
			}
			n = ptr.Deref(t.NumNodes, 1)
		}
		tmpl.Spec.Containers = []corev1.Container{{Name: trainerNode, Resources: res}}
		return []PodSet{{Name: trainerNode, Count: int(n), Template: tmpl}}
	}),
}

// trainerOperator is Kubeflow Trainer's controller manager. Its own certificate management is
// off: it serves a certificate of the cluster CA from the path controller-runtime defaults to.
var trainerOperator = &Operator{
	Name: "trainer", Module: trainerModule, Version: trainerVersion,
	Package: trainerModule + "/cmd/trainer-controller-manager",
	File:    "trainer-controller-manager-" + trainerVersion,
	Install: "install Kubeflow Trainer " + trainerVersion + ` and its runtimes: kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/manager?ref=` + trainerVersion +
		`" && kubectl apply --server-side -k "https://github.com/kubeflow/trainer.git/manifests/overlays/runtimes?ref=` + trainerVersion + `"`,
	Ports: []string{"webhook", "health", "metrics"},
	Webhooks: &OperatorWebhooks{File: "manifests/base/webhook/manifests.yaml", NamePrefix: "trainer-",
		HardcodedCertDir: controllerRuntimeCertDir},
	Run: func(e OperatorEnv) OperatorProcess {
		return OperatorProcess{
			Args: []string{e.Binary, "--config=" + e.ConfigDir + "/trainer.yaml", "--zap-log-level=info"},
			Env:  []string{"KUBECONFIG=" + e.Kubeconfig},
			Files: map[string]any{"trainer.yaml": map[string]any{
				"apiVersion":     "config.trainer.kubeflow.org/v1alpha1",
				"kind":           "Configuration",
				"health":         map[string]any{"healthProbeBindAddress": e.Addr("health"), "readinessEndpointName": "readyz", "livenessEndpointName": "healthz"},
				"metrics":        map[string]any{"bindAddress": e.Addr("metrics"), "secureServing": false},
				"webhook":        map[string]any{"host": "127.0.0.1", "port": e.Ports["webhook"]},
				"leaderElection": map[string]any{"leaderElect": false},
				"certManagement": map[string]any{"enable": false},
				// Upstream's shipped values, so TrainJobs are not reconciled one at a time.
				"controller": map[string]any{"groupKindConcurrency": map[string]any{
					"TrainJob.trainer.kubeflow.org": 5, "TrainingRuntime.trainer.kubeflow.org": 1, "ClusterTrainingRuntime.trainer.kubeflow.org": 1}},
				"clientConnection": map[string]any{"qps": e.QPS, "burst": e.QPS},
			}},
			HealthPort: "health", HealthPath: "/readyz",
		}
	},
	// What `kubectl apply -k manifests/overlays/runtimes` installs, so a user's TrainJob naming
	// torch-distributed finds it.
	InstallObjects: []string{
		"manifests/base/runtimes/deepspeed_distributed.yaml",
		"manifests/base/runtimes/mlx_distributed.yaml",
		"manifests/base/runtimes/torch_distributed.yaml",
		"manifests/base/runtimes/jax_distributed.yaml",
		"manifests/base/runtimes/xgboost_distributed.yaml",
		"manifests/base/runtimes/torchtune/llama3_2/llama3_2_1B.yaml",
		"manifests/base/runtimes/torchtune/llama3_2/llama3_2_3B.yaml",
		"manifests/base/runtimes/torchtune/qwen2_5/qwen2_5_1.5B.yaml",
	},
}

func trainJobStatus(j *trainerv1alpha1.TrainJob) Status {
	s := Status{Suspended: ptr.Deref(j.Spec.Suspend, false), Detail: conditions(j.Status.Conditions)}
	if meta.IsStatusConditionTrue(j.Status.Conditions, trainerv1alpha1.TrainJobComplete) {
		s.Finished, s.Succeeded = true, true
	}
	if meta.IsStatusConditionTrue(j.Status.Conditions, trainerv1alpha1.TrainJobFailed) {
		s.Finished = true
	}
	return s
}

// TrainingRuntimeName is the ClusterTrainingRuntime every rendered TrainJob references.
const TrainingRuntimeName = "kueuelab-torch-distributed"

// trainerNode is the replicatedJob and container name Trainer's torch plugin fills in
// (github.com/kubeflow/trainer/v2/pkg/constants.Node; that package drags in the controller's deps).
const trainerNode = "node"

// runtimePatchManager owns the runtime patch kueuelab renders into a TrainJob (Trainer keys its
// patches by manager; Kueue writes its own entry beside it when it admits the job).
const runtimePatchManager = "kueuelab.io/render"

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
	b.dropRole(trace.RoleLauncher)
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
			RuntimePatches: []trainerv1alpha1.RuntimePatch{{
				Manager: runtimePatchManager,
				TrainingRuntimeSpec: &trainerv1alpha1.TrainingRuntimeSpecPatch{
					Template: &trainerv1alpha1.JobSetTemplatePatch{Spec: &trainerv1alpha1.JobSetSpecPatch{
						ReplicatedJobs: []trainerv1alpha1.ReplicatedJobPatch{{
							Name: trainerNode,
							Template: &trainerv1alpha1.JobTemplatePatch{Spec: &trainerv1alpha1.JobSpecPatch{
								Template: &trainerv1alpha1.PodTemplatePatch{
									Metadata: &metav1.ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations},
									Spec: &trainerv1alpha1.PodSpecPatch{
										NodeSelector: tmpl.Spec.NodeSelector,
										Tolerations:  tmpl.Spec.Tolerations,
									},
								},
							}},
						}},
					}},
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
					Torch: &trainerv1alpha1.TorchMLPolicySource{},
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
