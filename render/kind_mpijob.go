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
// launcher as Launcher, the workers as Worker. A run the trace gives as workers only (Joulie's
// diurnal mode writes a multi-GPU run as one worker pod) becomes what mpi-operator offers for it:
// the first worker is the Launcher and runs ranks too (runLauncherAsWorker), the others are Workers.
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
	if wk < 0 || (l >= 0 && b.roles[l].Replicas != 1) {
		return nil, fmt.Errorf("an MPIJob needs at most one launcher and at least one worker")
	}
	type spec struct {
		r        *role
		replicas int
		typ      mpiv2beta1.MPIReplicaType
		restart  mpiv2beta1.RestartPolicy
	}
	// mpi-operator's defaults: the launcher Job retries on failure, workers do not.
	parts := []spec{
		{&b.roles[wk], b.roles[wk].Replicas, mpiv2beta1.MPIReplicaTypeWorker, mpiv2beta1.DefaultRestartPolicy},
	}
	launcherAsWorker := l < 0
	if launcherAsWorker {
		parts[0].replicas--
		parts = append(parts, spec{&b.roles[wk], 1, mpiv2beta1.MPIReplicaTypeLauncher, mpiv2beta1.DefaultLauncherRestartPolicy})
	} else {
		parts = append(parts, spec{&b.roles[l], 1, mpiv2beta1.MPIReplicaTypeLauncher, mpiv2beta1.DefaultLauncherRestartPolicy})
	}
	specs := make(map[mpiv2beta1.MPIReplicaType]*mpiv2beta1.ReplicaSpec, 2)
	for _, x := range parts {
		if x.replicas == 0 {
			continue
		}
		tmpl, err := b.podTemplate(x.r, "mpi", corev1.RestartPolicy(x.restart))
		if err != nil {
			return nil, err
		}
		specs[x.typ] = &mpiv2beta1.ReplicaSpec{Replicas: ptr.To(int32(x.replicas)), RestartPolicy: x.restart, Template: tmpl}
	}
	var asWorker *bool
	if launcherAsWorker {
		asWorker = ptr.To(true)
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
			RunLauncherAsWorker:    asWorker,
			SSHAuthMountPath:       "/root/.ssh",
			MPIImplementation:      mpiv2beta1.MPIImplementationOpenMPI,
			LauncherCreationPolicy: mpiv2beta1.LauncherCreationPolicyAtStartup,
			MPIReplicaSpecs:        specs,
		},
	}
	return []client.Object{job}, nil
}
