package validate

import (
	katibcommon "github.com/kubeflow/katib/pkg/apis/controller/common/v1beta1"
	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"
	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	trainerv1alpha1 "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Builders for one valid object of every supported kind, shaped like what render emits.

const ns = "team-a"

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
		"kueue.x-k8s.io/queue-name":     "team-a-lq",
		"kueue.x-k8s.io/priority-class": "standard",
	}}
}

func podSpec(gpus int64, restart corev1.RestartPolicy) corev1.PodTemplateSpec {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
	}
	lim := corev1.ResourceList{}
	if gpus > 0 {
		res["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
		lim["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"kueuelab.io/workload": "w-000001", "kueuelab.io/role": "worker"},
			Annotations: map[string]string{"kueuelab.io/work-units": "3600"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: res, Limits: lim},
			}},
			NodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
			Tolerations:  []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
}

func jobSet() *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet"},
		ObjectMeta: meta("w-000001-ps"),
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend: ptr.To(true),
			ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{
				{Name: "ps", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), BackoffLimit: ptr.To[int32](0),
					Template: podSpec(0, corev1.RestartPolicyNever),
				}}},
				{Name: "worker", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](8), Completions: ptr.To[int32](8), BackoffLimit: ptr.To[int32](0),
					Template: podSpec(8, corev1.RestartPolicyNever),
				}}},
			},
		},
	}
}

func job() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: meta("w-000002"),
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true), Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1),
			Template: podSpec(1, corev1.RestartPolicyNever),
		},
	}
}

func replicaSpec(n int32, gpus int64) *kftov1.ReplicaSpec {
	return &kftov1.ReplicaSpec{Replicas: ptr.To(n), RestartPolicy: kftov1.RestartPolicyNever, Template: podSpec(gpus, corev1.RestartPolicyNever)}
}

func pyTorchJob() *kftov1.PyTorchJob {
	return &kftov1.PyTorchJob{
		ObjectMeta: meta("w-000003"),
		Spec: kftov1.PyTorchJobSpec{
			RunPolicy: kftov1.RunPolicy{Suspend: ptr.To(true)},
			PyTorchReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
				kftov1.PyTorchJobReplicaTypeMaster: replicaSpec(1, 0),
				kftov1.PyTorchJobReplicaTypeWorker: replicaSpec(4, 8),
			},
		},
	}
}

func tfJob() *kftov1.TFJob {
	return &kftov1.TFJob{
		ObjectMeta: meta("w-000004"),
		Spec: kftov1.TFJobSpec{
			RunPolicy: kftov1.RunPolicy{Suspend: ptr.To(true)},
			TFReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
				kftov1.TFJobReplicaTypePS:     replicaSpec(2, 0),
				kftov1.TFJobReplicaTypeWorker: replicaSpec(4, 1),
			},
		},
	}
}

func mpiJob() *mpiv2beta1.MPIJob {
	return &mpiv2beta1.MPIJob{
		ObjectMeta: meta("w-000005"),
		Spec: mpiv2beta1.MPIJobSpec{
			SlotsPerWorker: ptr.To[int32](8),
			RunPolicy:      mpiv2beta1.RunPolicy{Suspend: ptr.To(true)},
			MPIReplicaSpecs: map[mpiv2beta1.MPIReplicaType]*mpiv2beta1.ReplicaSpec{
				mpiv2beta1.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: podSpec(0, corev1.RestartPolicyOnFailure)},
				mpiv2beta1.MPIReplicaTypeWorker:   {Replicas: ptr.To[int32](4), Template: podSpec(8, corev1.RestartPolicyNever)},
			},
		},
	}
}

func clusterTrainingRuntime() *trainerv1alpha1.ClusterTrainingRuntime {
	return &trainerv1alpha1.ClusterTrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: "kueuelab-torch"},
		Spec: trainerv1alpha1.TrainingRuntimeSpec{
			MLPolicy: &trainerv1alpha1.MLPolicy{NumNodes: ptr.To[int32](1), MLPolicySource: trainerv1alpha1.MLPolicySource{
				Torch: &trainerv1alpha1.TorchMLPolicySource{},
			}},
			Template: trainerv1alpha1.JobSetTemplateSpec{Spec: jobsetv1alpha2.JobSetSpec{
				ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{
					Name: "node", Replicas: 1,
					Template: batchv1.JobTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
						Spec:       batchv1.JobSpec{Template: podSpec(0, corev1.RestartPolicyNever)},
					},
				}},
			}},
		},
	}
}

func trainJob() *trainerv1alpha1.TrainJob {
	return &trainerv1alpha1.TrainJob{
		ObjectMeta: meta("w-000006"),
		Spec: trainerv1alpha1.TrainJobSpec{
			RuntimeRef: trainerv1alpha1.RuntimeRef{Name: "kueuelab-torch"},
			Trainer: &trainerv1alpha1.Trainer{
				NumNodes:         ptr.To[int32](4),
				ResourcesPerNode: &corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
			},
			Suspend: ptr.To(true),
		},
	}
}

func experiment(trial runtime.Object) *katibv1beta1.Experiment {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(trial)
	if err != nil {
		panic(err)
	}
	delete(content, "status")
	return &katibv1beta1.Experiment{
		ObjectMeta: metav1.ObjectMeta{Name: "w-000007", Namespace: ns},
		Spec: katibv1beta1.ExperimentSpec{
			Objective: &katibcommon.ObjectiveSpec{
				Type: katibcommon.ObjectiveTypeMaximize, Goal: ptr.To(0.99), ObjectiveMetricName: "accuracy",
			},
			Algorithm:          &katibcommon.AlgorithmSpec{AlgorithmName: "random"},
			ParallelTrialCount: ptr.To[int32](4),
			MaxTrialCount:      ptr.To[int32](12),
			Parameters: []katibv1beta1.ParameterSpec{{
				Name: "lr", ParameterType: katibv1beta1.ParameterTypeDouble,
				FeasibleSpace: katibv1beta1.FeasibleSpace{Min: "0.0001", Max: "0.1"},
			}},
			TrialTemplate: &katibv1beta1.TrialTemplate{
				PrimaryContainerName: "main",
				TrialParameters:      []katibv1beta1.TrialParameterSpec{{Name: "learningRate", Reference: "lr"}},
				TrialSource:          katibv1beta1.TrialSource{TrialSpec: &unstructured.Unstructured{Object: content}},
				SuccessCondition:     `status.conditions.#(type=="Complete")#|#(status=="True")#`,
				FailureCondition:     `status.conditions.#(type=="Failed")#|#(status=="True")#`,
			},
		},
	}
}

// trialJob is a Katib trial template: a Job without a name of its own.
func trialJob() *batchv1.Job {
	j := job()
	j.TypeMeta = metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}
	j.ObjectMeta = metav1.ObjectMeta{Labels: j.Labels}
	return j
}

func clusterQueue() *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: kueue.ClusterQueueSpec{
			CohortName:        "org",
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{"cpu", "memory", "nvidia.com/gpu"},
				Flavors: []kueue.FlavorQuotas{{
					Name: "h100-sxm",
					Resources: []kueue.ResourceQuota{
						{Name: "cpu", NominalQuota: resource.MustParse("512")},
						{Name: "memory", NominalQuota: resource.MustParse("4Ti")},
						{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("64"), BorrowingLimit: ptr.To(resource.MustParse("16")), LendingLimit: ptr.To(resource.MustParse("32"))},
					},
				}},
			}},
			Preemption: &kueue.ClusterQueuePreemption{
				ReclaimWithinCohort: kueue.PreemptionPolicyAny,
				WithinClusterQueue:  kueue.PreemptionPolicyLowerPriority,
				BorrowWithinCohort:  &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority},
			},
			FlavorFungibility: &kueue.FlavorFungibility{WhenCanBorrow: kueue.TryNextFlavor, WhenCanPreempt: kueue.MayStopSearch},
			FairSharing:       &kueue.FairSharing{Weight: ptr.To(resource.MustParse("2"))},
		},
	}
}

func clusterQueueA100() *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "team-b"},
		Spec: kueue.ClusterQueueSpec{
			CohortName:        "org",
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{"cpu", "nvidia.com/gpu"},
				Flavors: []kueue.FlavorQuotas{{
					Name: "a100",
					Resources: []kueue.ResourceQuota{
						{Name: "cpu", NominalQuota: resource.MustParse("256")},
						{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("32")},
					},
				}},
			}},
		},
	}
}

// clusterQueueV1beta1 is a ClusterQueue as a user's manifest may still hold it: Kueue v0.19 serves
// v1beta1 (deprecated), and `kueuelab validate` checks it against that version's schema. It is
// built unstructured because nothing kueuelab emits is v1beta1.
func clusterQueueV1beta1() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta1",
		"kind":       "ClusterQueue",
		"metadata":   map[string]any{"name": "legacy"},
		"spec": map[string]any{
			"cohort":            "org",
			"namespaceSelector": map[string]any{},
			"flavorFungibility": map[string]any{"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"nvidia.com/gpu"},
				"flavors": []any{map[string]any{
					"name":      "h100-sxm",
					"resources": []any{map[string]any{"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "8"}},
				}},
			}},
		},
	}}
}

func kueueClusterObjects() []runtime.Object {
	return []runtime.Object{
		&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h100-sxm"}, Spec: kueue.ResourceFlavorSpec{
			NodeLabels:   map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
			Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			TopologyName: ptr.To[kueue.TopologyReference]("default"),
		}},
		&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "a100"}, Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpu": "a100"}}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: kueue.CohortSpec{
			ParentName:  "org",
			FairSharing: &kueue.FairSharing{Weight: ptr.To(resource.MustParse("2"))},
		}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "team-a-lq", Namespace: ns}, Spec: kueue.LocalQueueSpec{ClusterQueue: "team-a"}},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "performance"}, Value: 1000, Description: "performance class"},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "eco"}, Value: 10},
		&kueue.Topology{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: kueue.TopologySpec{Levels: []kueue.TopologyLevel{
			{NodeLabel: "cloud.provider.com/topology-block"}, {NodeLabel: "kubernetes.io/hostname"},
		}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: "h100-sxm-0001", Labels: map[string]string{"type": "kwok"}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
			Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}},
		},
	}
}

// stage is a KWOK Stage; kwok's Go module is not a dependency, so it is built unstructured.
func stage() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       "Stage",
		"metadata":   map[string]any{"name": "kueuelab-pod-complete"},
		"spec": map[string]any{
			"resourceRef": map[string]any{"apiGroup": "v1", "kind": "Pod"},
			"selector":    map[string]any{"matchAnnotations": map[string]any{"kueuelab.io/complete": "Succeeded"}},
			"next":        map[string]any{"statusTemplate": "phase: Succeeded\n"},
		},
	}}
}
