package e2e

import (
	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/cluster"
)

const (
	queueLabel = "kueue.x-k8s.io/queue-name"
	gpu        = corev1.ResourceName("nvidia.com/gpu")
	gpuProduct = "nvidia.com/gpu.product"
)

func meta(ns, name, queue string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{queueLabel: queue}}
}

// podTemplate is one fake container asking for cpu and gpus (gpus may be 0).
func podTemplate(container string, gpus int64) corev1.PodTemplateSpec {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	lim := corev1.ResourceList{}
	if gpus > 0 {
		req[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
		lim[gpu] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: container, Image: "fake/" + container + ":latest",
			Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}},
	}}
}

func makeJob(ns, name, queue string, gpus int64) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: meta(ns, name, queue), Spec: batchv1.JobSpec{
		Suspend: ptr.To(true), Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
		Template: podTemplate("train", gpus),
	}}
}

func makeJobSet(ns, name, queue string, replicas int32, gpus int64) *jobsetv1alpha2.JobSet {
	return &jobsetv1alpha2.JobSet{ObjectMeta: meta(ns, name, queue), Spec: jobsetv1alpha2.JobSetSpec{
		Suspend: ptr.To(true),
		ReplicatedJobs: []jobsetv1alpha2.ReplicatedJob{{Name: "workers", Replicas: replicas, Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
				Template: podTemplate("train", gpus)}}}},
	}}
}

func makePyTorchJob(ns, name, queue string, workers int32, gpus int64) *kftov1.PyTorchJob {
	spec := func(n int32) *kftov1.ReplicaSpec {
		return &kftov1.ReplicaSpec{Replicas: ptr.To(n), RestartPolicy: kftov1.RestartPolicyNever, Template: podTemplate("pytorch", gpus)}
	}
	return &kftov1.PyTorchJob{ObjectMeta: meta(ns, name, queue), Spec: kftov1.PyTorchJobSpec{
		RunPolicy: kftov1.RunPolicy{Suspend: ptr.To(true)},
		PyTorchReplicaSpecs: map[kftov1.ReplicaType]*kftov1.ReplicaSpec{
			kftov1.PyTorchJobReplicaTypeMaster: spec(1),
			kftov1.PyTorchJobReplicaTypeWorker: spec(workers),
		},
	}}
}

// makeMPIJob has a cpu-only launcher and GPU workers; cleanPodPolicy Running so the workers free
// their nodes once the launcher succeeded.
func makeMPIJob(ns, name, queue string, workers int32, gpus int64) *mpiv2beta1.MPIJob {
	launcher := podTemplate("launcher", 0)
	launcher.Spec.Containers[0].Command = []string{"mpirun", "-n", "2", "python", "train.py"}
	return &mpiv2beta1.MPIJob{ObjectMeta: meta(ns, name, queue), Spec: mpiv2beta1.MPIJobSpec{
		SlotsPerWorker: ptr.To[int32](1),
		RunPolicy:      mpiv2beta1.RunPolicy{Suspend: ptr.To(true), CleanPodPolicy: ptr.To(mpiv2beta1.CleanPodPolicyRunning)},
		MPIReplicaSpecs: map[mpiv2beta1.MPIReplicaType]*mpiv2beta1.ReplicaSpec{
			mpiv2beta1.MPIReplicaTypeLauncher: {Replicas: ptr.To[int32](1), Template: launcher},
			mpiv2beta1.MPIReplicaTypeWorker:   {Replicas: ptr.To(workers), Template: podTemplate("worker", gpus)},
		},
	}}
}

// queueObjects are a flavor for the default H100 nodes, a ClusterQueue with gpus of quota (cpu and
// memory ample) admitting from ns only, and a LocalQueue; all three are called name.
func queueObjects(ns, name string, gpus int64) []client.Object {
	return []client.Object{
		&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{gpuProduct: cluster.GPUProduct}}},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpu},
				Flavors: []kueue.FlavorQuotas{{Name: kueue.ResourceFlavorReference(name), Resources: []kueue.ResourceQuota{
					{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("256")},
					{Name: corev1.ResourceMemory, NominalQuota: resource.MustParse("2Ti")},
					{Name: gpu, NominalQuota: *resource.NewQuantity(gpus, resource.DecimalSI)},
				}}},
			}},
		}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(name)}},
	}
}
