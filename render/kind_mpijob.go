package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"

	"github.com/kueuelab/kueuelab/model/trace"
)

// MPIJob renders a distributed training run as an mpi-operator v2beta1 MPIJob: the CPU-only
// launcher as Launcher, the workers as Worker.
type MPIJob struct{}

// Name implements Kind.
func (MPIJob) Name() string { return "MPIJob" }

// Families implements Kind.
func (MPIJob) Families() []trace.Family { return []trace.Family{trace.DistributedTraining} }

// Render implements Kind.
func (MPIJob) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if err := b.requireRoles("MPIJob", trace.RoleLauncher, trace.RoleWorker); err != nil {
		return nil, err
	}
	l, wk := b.roleIndex(trace.RoleLauncher), b.roleIndex(trace.RoleWorker)
	if l < 0 || wk < 0 || b.roles[l].Replicas != 1 {
		return nil, fmt.Errorf("an MPIJob needs one launcher and at least one worker")
	}
	workerRestart := mpiv2beta1.DefaultRestartPolicy
	if b.restarts() > 0 {
		// A worker whose process dies restarts in place (render/restarts.go).
		workerRestart = mpiv2beta1.RestartPolicyOnFailure
	}
	specs := make(map[mpiv2beta1.MPIReplicaType]*mpiv2beta1.ReplicaSpec, 2)
	for _, x := range []struct {
		i       int
		typ     mpiv2beta1.MPIReplicaType
		restart mpiv2beta1.RestartPolicy
	}{
		// mpi-operator's defaults: the launcher Job retries on failure, workers do not.
		{l, mpiv2beta1.MPIReplicaTypeLauncher, mpiv2beta1.DefaultLauncherRestartPolicy},
		{wk, mpiv2beta1.MPIReplicaTypeWorker, workerRestart},
	} {
		r := &b.roles[x.i]
		tmpl, err := b.podTemplate(r, "mpi", corev1.RestartPolicy(x.restart))
		if err != nil {
			return nil, err
		}
		specs[x.typ] = &mpiv2beta1.ReplicaSpec{Replicas: ptr.To(int32(r.Replicas)), RestartPolicy: x.restart, Template: tmpl}
	}
	job := &mpiv2beta1.MPIJob{
		TypeMeta:   typeMeta(mpiv2beta1.SchemeGroupVersion.String(), mpiv2beta1.Kind),
		ObjectMeta: b.topMeta(),
		Spec: mpiv2beta1.MPIJobSpec{
			SlotsPerWorker: ptr.To(int32(1)),
			RunPolicy: mpiv2beta1.RunPolicy{
				// Running: when the launcher finishes, the workers are deleted and free their quota.
				CleanPodPolicy: ptr.To(mpiv2beta1.CleanPodPolicyRunning),
				Suspend:        ptr.To(true),
			},
			SSHAuthMountPath:       "/root/.ssh",
			MPIImplementation:      mpiv2beta1.MPIImplementationOpenMPI,
			LauncherCreationPolicy: mpiv2beta1.LauncherCreationPolicyAtStartup,
			MPIReplicaSpecs:        specs,
		},
	}
	if b.restarts() > 0 {
		job.Spec.RunPolicy.BackoffLimit = b.runPolicyBackoffLimit()
	}
	return []client.Object{job}, nil
}
