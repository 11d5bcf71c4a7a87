package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/kueuelab/kueuelab/model/trace"
)

// trainingModule is the training-operator release kueuelab runs (what Kueue v0.19.2 requires).
const trainingModule, trainingVersion = "github.com/kubeflow/training-operator", "v1.9.3"

var pyTorchJobIntegration = Integration{
	Kind:        PyTorchJob{},
	GVK:         kftov1.SchemeGroupVersion.WithKind(kftov1.PyTorchJobKind),
	Resource:    "pytorchjobs",
	AddToScheme: kftov1.AddToScheme,
	Kueue:       []KueueIntegration{{Framework: "kubeflow.org/pytorchjob", Kind: kftov1.SchemeGroupVersion.WithKind(kftov1.PyTorchJobKind), Resource: "pytorchjobs"}},
	CRDs:        []CRDSource{trainingCRDs("kubeflow.org_pytorchjobs.yaml")},
	Operators:   []*Operator{trainingOperator},
	Status: statusOf(func(j *kftov1.PyTorchJob) Status {
		return kubeflowStatus(j.Spec.RunPolicy.Suspend, j.Status)
	}),
	PodSets: podSetsOf(func(j *kftov1.PyTorchJob) []PodSet { return kubeflowPodSets(j.Spec.PyTorchReplicaSpecs) }),
}

// trainingCRDs are CRD files of training-operator. Its kubeflow.org_mpijobs.yaml (MPIJob v1) is
// never used: kubeflow.org/MPIJob comes from mpi-operator (v2beta1) under the same name.
func trainingCRDs(files ...string) CRDSource {
	src := CRDSource{Module: trainingModule, Version: trainingVersion, Dir: "training-operator", Install: trainingOperator.Install}
	for _, f := range files {
		src.Files = append(src.Files, "manifests/base/crds/"+f)
	}
	return src
}

// trainingOperator runs PyTorchJobs and TFJobs. Its certificate rotator cannot be turned off:
// it gets a seeded Secret, and its serving certificate where it looks for it (a fixed path).
var trainingOperator = &Operator{
	Name: "training-operator", Module: trainingModule, Version: trainingVersion,
	Package:   trainingModule + "/cmd/training-operator.v1",
	Install:   "install the Kubeflow training-operator " + trainingVersion + `: kubectl apply --server-side -k "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=` + trainingVersion + `"`,
	Namespace: "kubeflow",
	Ports:     []string{"webhook", "health", "metrics"},
	Webhooks: &OperatorWebhooks{File: "manifests/base/webhook/manifests.yaml",
		// The name training-operator's cert rotator injects its CA into.
		Name: "validator.training-operator.kubeflow.org",
		Skip: []string{"validator.jaxjob.training-operator.kubeflow.org", "validator.paddlejob.training-operator.kubeflow.org",
			"validator.xgboostjob.training-operator.kubeflow.org"},
		RotatorSecret: "training-operator-webhook-cert", RotatorService: "training-operator.kubeflow.svc", CertName: "training",
		HardcodedCertDir: controllerRuntimeCertDir,
	},
	Run: func(e OperatorEnv) OperatorProcess {
		q := itoa(e.QPS)
		return OperatorProcess{
			Args: []string{e.Binary, "--kubeconfig=" + e.Kubeconfig, "--enable-scheme=pytorchjob", "--enable-scheme=tfjob",
				"--metrics-bind-address=" + e.Addr("metrics"), "--health-probe-bind-address=" + e.Addr("health"),
				"--webhook-server-port=" + itoa(e.Ports["webhook"]),
				"--kube-api-qps=" + q, "--kube-api-burst=" + q, "--controller-threads=4"},
			Env:        []string{"MY_POD_NAMESPACE=kubeflow", "KUBECONFIG=" + e.Kubeconfig},
			HealthPort: "health", HealthPath: "/readyz",
		}
	},
}

// controllerRuntimeCertDir is where a controller-runtime webhook server reads its certificate
// when nobody sets CertDir (training-operator v1.9.3 and Trainer v2.2.1 do not let one).
const controllerRuntimeCertDir = "/tmp/k8s-webhook-server/serving-certs"

// kubeflowPodSets is one pod set per replica type, in Kueue's order.
func kubeflowPodSets(specs map[kftov1.ReplicaType]*kftov1.ReplicaSpec) []PodSet {
	var out []PodSet
	for _, typ := range []kftov1.ReplicaType{"Master", "Chief", "PS", "Worker", "Evaluator"} {
		if r, ok := specs[typ]; ok {
			out = append(out, PodSet{Name: string(typ), Count: int(ptr.Deref(r.Replicas, 1)), Template: r.Template})
		}
	}
	return out
}

// kubeflowStatus reads a training-operator job's run policy and status.
func kubeflowStatus(suspend *bool, st kftov1.JobStatus) Status {
	s := Status{Suspended: ptr.Deref(suspend, false)}
	for _, c := range st.Conditions {
		s.Detail += fmt.Sprintf("%s=%s ", c.Type, c.Status)
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case kftov1.JobSucceeded:
			s.Finished, s.Succeeded = true, true
		case kftov1.JobFailed:
			s.Finished = true
		}
	}
	return s
}

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
