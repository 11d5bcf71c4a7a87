package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/kueuelab/kueuelab/model/trace"
)

// PyTorchJob renders a distributed training run as a training-operator PyTorchJob: the CPU-only
// launcher as the Master replica (it keeps the launcher's requests), the workers as Worker.
type PyTorchJob struct{}

// Name implements Kind.
func (PyTorchJob) Name() string { return "PyTorchJob" }

// Families implements Kind.
func (PyTorchJob) Families() []trace.Family { return []trace.Family{trace.DistributedTraining} }

// Render implements Kind.
func (PyTorchJob) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if err := b.requireRoles("PyTorchJob", trace.RoleLauncher, trace.RoleWorker); err != nil {
		return nil, err
	}
	if l := b.roleIndex(trace.RoleLauncher); l >= 0 && b.roles[l].Replicas != 1 {
		return nil, fmt.Errorf("a PyTorchJob has one Master, the workload has %d launchers", b.roles[l].Replicas)
	}
	specs, err := kubeflowReplicas(b, kftov1.PyTorchJobDefaultContainerName, corev1.ContainerPort{Name: kftov1.PyTorchJobDefaultPortName, ContainerPort: kftov1.PyTorchJobDefaultPort},
		map[string]kftov1.ReplicaType{trace.RoleLauncher: kftov1.PyTorchJobReplicaTypeMaster, trace.RoleWorker: kftov1.PyTorchJobReplicaTypeWorker})
	if err != nil {
		return nil, err
	}
	job := &kftov1.PyTorchJob{
		TypeMeta:   typeMeta(kftov1.SchemeGroupVersion.String(), kftov1.PyTorchJobKind),
		ObjectMeta: b.topMeta(),
		Spec: kftov1.PyTorchJobSpec{
			RunPolicy:           kubeflowRunPolicy(),
			PyTorchReplicaSpecs: specs,
			NprocPerNode:        ptr.To(kftov1.DefaultNprocPerNode),
		},
	}
	job.Spec.RunPolicy.BackoffLimit = b.runPolicyBackoffLimit()
	return []client.Object{job}, nil
}

// kubeflowRunPolicy is a suspended run whose running pods are deleted when it ends, so a finished
// job frees its quota at once.
func kubeflowRunPolicy() kftov1.RunPolicy {
	return kftov1.RunPolicy{
		CleanPodPolicy: ptr.To(kftov1.CleanPodPolicyRunning),
		Suspend:        ptr.To(true),
	}
}

// kubeflowReplicas builds one training-operator replica per role. Restart policy Never: a failure
// in the trace is final, retrying would replay work the trace did not do; OnFailure when the
// workload has a restart budget (render/restarts.go).
func kubeflowReplicas(b *build, container string, port corev1.ContainerPort, types map[string]kftov1.ReplicaType) (map[kftov1.ReplicaType]*kftov1.ReplicaSpec, error) {
	specs := make(map[kftov1.ReplicaType]*kftov1.ReplicaSpec, len(b.roles))
	for i := range b.roles {
		r := &b.roles[i]
		restart := b.kubeflowRestartPolicy()
		tmpl, err := b.podTemplate(r, container, podRestartPolicy(restart))
		if err != nil {
			return nil, err
		}
		// The operator's defaulting webhook would add this port; validation does not default.
		tmpl.Spec.Containers[0].Ports = []corev1.ContainerPort{port}
		specs[types[r.Role]] = &kftov1.ReplicaSpec{Replicas: ptr.To(int32(r.Replicas)), RestartPolicy: restart, Template: tmpl}
	}
	return specs, nil
}
