package render

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

// KubeRay, the version Kueue v0.19.2 requires.
const kubeRayModule, kubeRayVersion = "github.com/ray-project/kuberay/ray-operator", "v1.6.2"

// RayVersion and RealRayImage are the Ray release a rendered RayCluster declares and the image
// its containers run on a real target (KubeRay replaces their commands with `ray start`).
const (
	RayVersion   = "2.46.0"
	RealRayImage = "rayproject/ray:" + RayVersion
)

// RaySubmitterRole is the contract role of a RayJob's submitter pod, which runs `ray job submit`
// and lives as long as the Ray job.
const RaySubmitterRole = "submitter"

var rayJobIntegration = Integration{
	Kind:        RayJob{},
	GVK:         rayv1.GroupVersion.WithKind("RayJob"),
	Resource:    "rayjobs",
	AddToScheme: rayv1.AddToScheme,
	// Kueue's RayCluster integration admits a user's RayClusters; the RayCluster a RayJob makes
	// is admitted as part of the RayJob.
	Kueue: []KueueIntegration{
		{Framework: "ray.io/rayjob", Kind: rayv1.GroupVersion.WithKind("RayJob"), Resource: "rayjobs"},
		{Framework: "ray.io/raycluster", Kind: rayv1.GroupVersion.WithKind("RayCluster"), Resource: "rayclusters"},
	},
	// KubeRay's manager watches RayServices too and exits without their CRD.
	CRDs: []CRDSource{{Module: kubeRayModule, Version: kubeRayVersion, Dir: "kuberay", Install: kubeRayOperator.Install, Files: []string{
		"config/crd/bases/ray.io_rayclusters.yaml",
		"config/crd/bases/ray.io_rayjobs.yaml",
		"config/crd/bases/ray.io_rayservices.yaml",
	}}},
	Operators: []*Operator{kubeRayOperator},
	// KubeRay labels the head and the workers of every RayCluster so; they serve until KubeRay
	// deletes the cluster when the job ends (shutdownAfterJobFinishes).
	ServicePods: "ray.io/is-ray-node=yes",
	Status:      statusOf(rayJobStatus),
	PodSets:     podSetsOf(rayJobPodSets),
}

// rayJobPodSets are Kueue's: the head, each worker group, and in K8sJobMode the submitter.
func rayJobPodSets(j *rayv1.RayJob) []PodSet {
	var out []PodSet
	if c := j.Spec.RayClusterSpec; c != nil {
		out = append(out, PodSet{Name: "head", Count: 1, Template: c.HeadGroupSpec.Template})
		for _, g := range c.WorkerGroupSpecs {
			n := int(ptr.Deref(g.Replicas, 1))
			if g.NumOfHosts > 1 {
				n *= int(g.NumOfHosts)
			}
			out = append(out, PodSet{Name: g.GroupName, Count: n, Template: g.Template})
		}
	}
	if j.Spec.SubmissionMode == rayv1.K8sJobMode || j.Spec.SubmissionMode == "" {
		t := corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-job-submitter", Resources: *raySubmitterRequests.DeepCopy()}}}}
		if j.Spec.SubmitterPodTemplate != nil {
			t = *j.Spec.SubmitterPodTemplate
		}
		out = append(out, PodSet{Name: "submitter", Count: 1, Template: t})
	}
	return out
}

// kubeRayOperator is KubeRay's operator. A RayJob ends when the Ray head's job API says its job
// did, and a KWOK head has no API: the local cluster runs a stand-in for it (runtime/rayjobapi)
// and sends the operator's plain-HTTP requests, which only go to Ray dashboards, through it.
var kubeRayOperator = &Operator{
	Name: "kuberay-operator", Module: kubeRayModule, Version: kubeRayVersion, Package: ".",
	// `go install` needs the module's version list, which the proxy refuses (403).
	SourceCopy: true,
	File:       "kuberay-operator-" + kubeRayVersion,
	Install:    "install the KubeRay operator " + kubeRayVersion + ": helm install kuberay-operator kuberay/kuberay-operator --version " + kubeRayVersion[1:],
	Ports:      []string{"health", "metrics"},
	StandIn:    "ray-job-api",
	Run: func(e OperatorEnv) OperatorProcess {
		q := itoa(e.QPS)
		return OperatorProcess{
			Args: []string{e.Binary, "--metrics-addr=" + e.Addr("metrics"), "--health-probe-bind-address=" + e.Addr("health"),
				"--enable-leader-election=false", "--reconcile-concurrency=4", "--qps=" + q, "--burst=" + q,
				"--log-stdout-encoder=console"},
			// Go's default transport proxies plain-HTTP requests by $HTTP_PROXY and never those to
			// the API server (https, loopback).
			Env:        []string{"KUBECONFIG=" + e.Kubeconfig, "HTTP_PROXY=http://" + e.StandIn, "NO_PROXY=127.0.0.1,localhost"},
			HealthPort: "health", HealthPath: "/readyz",
		}
	},
}

func rayJobStatus(j *rayv1.RayJob) Status {
	d := j.Status.JobDeploymentStatus
	return Status{
		Suspended: j.Spec.Suspend,
		Finished:  d == rayv1.JobDeploymentStatusComplete || d == rayv1.JobDeploymentStatusFailed,
		Succeeded: d == rayv1.JobDeploymentStatusComplete && j.Status.JobStatus == rayv1.JobStatusSucceeded,
		Detail:    fmt.Sprintf("deployment=%s job=%s reason=%s %s", d, j.Status.JobStatus, j.Status.Reason, j.Status.Message),
	}
}

// RayJob renders a distributed training run as a KubeRay RayJob running Ray Train: the trace's
// CPU-only launcher is the Ray head (the coordinator), its workers one worker group (a run of
// workers only: the first worker is the head). The job is
// submitted by a Kubernetes Job (submissionMode K8sJobMode, KubeRay's default): its pod runs
// `ray job submit` and ends when the Ray job does, so on KWOK that pod's end is the job's end. It
// is rendered in the gang with head and workers, and KubeRay deletes the Ray cluster when the job
// ends, as Kueue requires (shutdownAfterJobFinishes).
type RayJob struct{}

// Name implements Kind.
func (RayJob) Name() string { return "RayJob" }

// Families implements Kind.
func (RayJob) Families() []trace.Family { return []trace.Family{trace.DistributedTraining} }

// Render implements Kind.
func (RayJob) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if err := b.requireRoles("RayJob", trace.RoleLauncher, trace.RoleWorker); err != nil {
		return nil, err
	}
	l, wk := b.roleIndex(trace.RoleLauncher), b.roleIndex(trace.RoleWorker)
	if wk < 0 || (l >= 0 && b.roles[l].Replicas != 1) {
		return nil, fmt.Errorf("a RayJob needs at most one launcher (its head) and at least one worker")
	}
	// A run the trace gives as workers only (Joulie's diurnal mode) has no coordinator: its first
	// worker is the Ray head and trains too (Ray schedules tasks on a head with GPUs), as an
	// MPIJob's launcher does with runLauncherAsWorker.
	headRole, n := l, int32(b.roles[wk].Replicas)
	if l < 0 {
		headRole, n = wk, n-1
	}
	sub, err := b.raySubmitter(&b.roles[headRole])
	if err != nil {
		return nil, err
	}
	head, err := b.podTemplate(&b.roles[headRole], "ray-head", corev1.RestartPolicyNever)
	if err != nil {
		return nil, err
	}
	worker, err := b.podTemplate(&b.roles[wk], "ray-worker", corev1.RestartPolicyNever)
	if err != nil {
		return nil, err
	}
	submitter, err := b.podTemplate(sub, "ray-job-submitter", corev1.RestartPolicyNever)
	if err != nil {
		return nil, err
	}
	entrypoint := "python train.py"
	if b.o.Target == TargetReal {
		for _, t := range []*corev1.PodTemplateSpec{&head, &worker, &submitter} {
			// KubeRay writes the ray start and ray job submit commands; the job itself sleeps.
			t.Spec.Containers[0].Image, t.Spec.Containers[0].Command = RealRayImage, nil
		}
		if entrypoint, err = b.command(trace.RoleWorker); err != nil {
			return nil, err
		}
	}
	var groups []rayv1.WorkerGroupSpec
	if n > 0 {
		groups = []rayv1.WorkerGroupSpec{{
			GroupName: trace.RoleWorker, Replicas: ptr.To(n), MinReplicas: ptr.To(n), MaxReplicas: ptr.To(n),
			RayStartParams: map[string]string{}, Template: worker,
		}}
	}
	rj := &rayv1.RayJob{
		TypeMeta:   typeMeta(rayv1.GroupVersion.String(), "RayJob"),
		ObjectMeta: b.topMeta(),
		Spec: rayv1.RayJobSpec{
			Entrypoint:     entrypoint,
			SubmissionMode: rayv1.K8sJobMode,
			// Kueue admits only RayJobs that delete their cluster at the end, which frees the quota.
			ShutdownAfterJobFinishes: true,
			Suspend:                  true,
			// One submitter attempt: a failure in the trace is final.
			SubmitterConfig:      &rayv1.SubmitterConfig{BackoffLimit: ptr.To(int32(0))},
			SubmitterPodTemplate: &submitter,
			RayClusterSpec: &rayv1.RayClusterSpec{
				RayVersion:       RayVersion,
				HeadGroupSpec:    rayv1.HeadGroupSpec{RayStartParams: map[string]string{}, Template: head},
				WorkerGroupSpecs: groups,
			},
		},
	}
	return []client.Object{rj}, nil
}

// raySubmitterRequests are KubeRay's default submitter resources (what Kueue assumes when a
// RayJob has no submitter template): requests 500m and 200Mi, limits 1 and 1Gi.
var raySubmitterRequests = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("200Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
}

// raySubmitter is the submitter pod as a role of its own: the launcher's contract with role
// submitter and KubeRay's default resources. It joins the gang, so it progresses in lockstep with
// head and workers and ends when their work is done, which ends the Ray job.
func (b *build) raySubmitter(launcher *role) (*role, error) {
	r := &role{PodGroup: trace.PodGroup{Role: RaySubmitterRole, Replicas: 1}, resources: *raySubmitterRequests.DeepCopy(), gang: launcher.gang}
	r.contract = launcher.contract
	r.contract.Role = RaySubmitterRole
	cpu := raySubmitterRequests.Requests.Cpu().AsApproximateFloat64()
	r.contract.Work = trace.Work{CPUUnits: work.Units(b.w.DurationSec, cpu, b.w.SharedIntensityProfile.CPUUtilization, b.o.Rates.CPUPerCore, RaySubmitterRole)}
	if r.contract.Sensitivity != nil {
		s := *r.contract.Sensitivity
		r.contract.Sensitivity = &s
	}
	if r.gang {
		// The submitter is one more member of the gang every member counts.
		for i := range b.roles {
			if b.roles[i].gang {
				b.roles[i].contract.GangSize++
			}
		}
		r.contract.GangSize = launcher.contract.GangSize
	}
	return r, nil
}
