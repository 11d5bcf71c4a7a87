package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"

	"github.com/kueuelab/kueuelab/model/trace"
)

const mpiModule, mpiVersion = "github.com/kubeflow/mpi-operator", "v0.8.2"

var mpiJobIntegration = Integration{
	Kind:        MPIJob{},
	GVK:         mpiv2beta1.SchemeGroupVersion.WithKind(mpiv2beta1.Kind),
	Resource:    "mpijobs",
	AddToScheme: mpiv2beta1.AddToScheme,
	Kueue:       []KueueIntegration{{Framework: "kubeflow.org/mpijob", Kind: mpiv2beta1.SchemeGroupVersion.WithKind(mpiv2beta1.Kind), Resource: "mpijobs"}},
	CRDs: []CRDSource{{Module: mpiModule, Version: mpiVersion, Dir: "mpi-operator",
		Files: []string{"manifests/base/kubeflow.org_mpijobs.yaml"}, Install: mpiOperator.Install}},
	Operators: []*Operator{mpiOperator},
	Status:    statusOf(mpiJobStatus),
	PodSets: podSetsOf(func(j *mpiv2beta1.MPIJob) []PodSet {
		var out []PodSet
		for _, typ := range []mpiv2beta1.MPIReplicaType{mpiv2beta1.MPIReplicaTypeLauncher, mpiv2beta1.MPIReplicaTypeWorker} {
			if r := j.Spec.MPIReplicaSpecs[typ]; r != nil { // a launcher-less run (runLauncherAsWorker) has no Launcher
				out = append(out, PodSet{Name: string(typ), Count: int(ptr.Deref(r.Replicas, 1)), Template: r.Template})
			}
		}
		return out
	}),
	// mpi-operator v0.8.2 creates the launcher Job before Kueue admits the MPIJob (launcherCreationPolicy
	// AtStartup) too, but on resume it copies the admitted template's node selector, tolerations and
	// scheduling gates into the Job (syncLauncherSchedulingDirectives): the launcher pod gets the
	// flavor's node labels like every other pod, so no pod set keeps its pre-admission template.
}

// mpiOperator runs v2beta1 MPIJobs. Its leader election is always on, in its own namespace.
var mpiOperator = &Operator{
	Name: "mpi-operator", Module: mpiModule, Version: mpiVersion, Package: "./cmd/mpi-operator",
	SourceCopy: true, Patch: "mpi-operator-v0.8.2-health-address.patch",
	Install:   "install mpi-operator " + mpiVersion + " (its v2beta1 MPIJob CRD, not training-operator's v1 one): kubectl apply --server-side -f https://raw.githubusercontent.com/kubeflow/mpi-operator/" + mpiVersion + "/deploy/v2beta1/mpi-operator.yaml",
	Namespace: "mpi-operator", StaleLease: "mpi-operator",
	Ports: []string{"health"},
	Run: func(e OperatorEnv) OperatorProcess {
		q := itoa(e.QPS)
		// The operator puts every event of an MPIJob on its work queue rate-limited: a token
		// bucket of 10 events/s (burst 100) shared by all MPIJobs. A replay holds its trace clock
		// while an MPIJob's pods are created or removed, so that bucket, not CPU, sets the wall
		// time of every MPIJob step once a run has used its burst (with it, on the README job:
		// admission to pods p50 0.5 s, eviction to quota released p50 1.9 s). The queue therefore
		// gets the client's rate.
		return OperatorProcess{
			Args: []string{e.Binary, "--kubeConfig=" + e.Kubeconfig, "--lock-namespace=mpi-operator", "--health-address=" + e.Addr("health"),
				"--kube-api-qps=" + q, "--kube-api-burst=" + q, "--threadiness=4",
				"--controller-queue-rate-limit=" + q, "--controller-queue-burst=" + q},
			Env:        []string{"KUBECONFIG=" + e.Kubeconfig},
			HealthPort: "health", HealthPath: "/healthz",
		}
	},
}

func mpiJobStatus(j *mpiv2beta1.MPIJob) Status {
	s := Status{Suspended: ptr.Deref(j.Spec.RunPolicy.Suspend, false)}
	for _, c := range j.Status.Conditions {
		s.Detail += fmt.Sprintf("%s=%s ", c.Type, c.Status)
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case mpiv2beta1.JobSucceeded:
			s.Finished, s.Succeeded = true, true
		case mpiv2beta1.JobFailed:
			s.Finished = true
		}
	}
	return s
}

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
	workerRestart := mpiv2beta1.DefaultRestartPolicy
	if b.restarts() > 0 {
		// A worker whose process dies restarts in place (render/restarts.go).
		workerRestart = mpiv2beta1.RestartPolicyOnFailure
	}
	parts := []spec{
		{&b.roles[wk], b.roles[wk].Replicas, mpiv2beta1.MPIReplicaTypeWorker, workerRestart},
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
	if b.restarts() > 0 {
		job.Spec.RunPolicy.BackoffLimit = b.runPolicyBackoffLimit()
	}
	return []client.Object{job}, nil
}
