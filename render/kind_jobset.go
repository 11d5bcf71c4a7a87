package render

import (
	"fmt"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/kueuelab/kueuelab/model/trace"
)

// jobSetModule is the JobSet release kueuelab runs (what Kueue v0.19.2 requires).
const jobSetModule, jobSetVersion = "sigs.k8s.io/jobset", "v0.12.0"

var jobSetIntegration = Integration{
	Kind:        JobSet{},
	GVK:         jobsetv1alpha2.GroupVersion.WithKind("JobSet"),
	Resource:    "jobsets",
	AddToScheme: jobsetv1alpha2.AddToScheme,
	Kueue:       []KueueIntegration{{Framework: "jobset.x-k8s.io/jobset", Kind: jobsetv1alpha2.GroupVersion.WithKind("JobSet"), Resource: "jobsets"}},
	CRDs:        []CRDSource{jobSetCRDs},
	Operators:   []*Operator{jobSetOperator},
	Status:      statusOf(jobSetStatus),
	PodSets: podSetsOf(func(js *jobsetv1alpha2.JobSet) []PodSet {
		var out []PodSet
		for _, rj := range js.Spec.ReplicatedJobs {
			out = append(out, PodSet{Name: rj.Name, Count: int(rj.Replicas) * int(ptr.Deref(rj.Template.Spec.Parallelism, 1)), Template: rj.Template.Spec.Template})
		}
		return out
	}),
}

var jobSetCRDs = CRDSource{Module: jobSetModule, Version: jobSetVersion, Dir: "jobset",
	Files:   []string{"config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"},
	Install: "install JobSet " + jobSetVersion + ": kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/" + jobSetVersion + "/manifests.yaml",
}

// jobSetOperator is JobSet's controller, configured by file; its webhooks use the cluster CA.
var jobSetOperator = &Operator{
	Name: "jobset", Module: jobSetModule, Version: jobSetVersion, Package: ".",
	// The proxy refuses `go install` of jobset (403 on @v/list): build in a copy of the module.
	SourceCopy: true,
	Install:    jobSetCRDs.Install,
	Ports:      []string{"webhook", "health", "metrics"},
	Webhooks: &OperatorWebhooks{File: "config/components/webhook/manifests.yaml", NamePrefix: "jobset-",
		// As upstream's kustomize patch does: JobSet's pod webhooks only see JobSet pods, on create.
		Adjust: func(w map[string]any) {
			if n := w["name"]; n == "mpod.kb.io" || n == "vpod.kb.io" {
				w["objectSelector"] = map[string]any{"matchExpressions": []any{map[string]any{"key": jobsetv1alpha2.JobSetNameKey, "operator": "Exists"}}}
				w["rules"] = []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"pods"}}}
			}
		}},
	Run: func(e OperatorEnv) OperatorProcess {
		return OperatorProcess{
			Args: []string{e.Binary, "--config=" + e.ConfigDir + "/jobset.yaml", "--zap-log-level=info"},
			Env:  []string{"KUBECONFIG=" + e.Kubeconfig},
			Files: map[string]any{"jobset.yaml": map[string]any{
				"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
				"kind":                   "Configuration",
				"leaderElection":         map[string]any{"leaderElect": false},
				"internalCertManagement": map[string]any{"enable": false},
				"webhook":                map[string]any{"host": "127.0.0.1", "port": e.Ports["webhook"], "certDir": e.CertDir},
				"metrics":                map[string]any{"bindAddress": e.Addr("metrics"), "certDir": e.CertDir},
				"health":                 map[string]any{"healthProbeBindAddress": e.Addr("health")},
				"clientConnection":       map[string]any{"qps": e.QPS, "burst": e.QPS},
			}},
			HealthPort: "health", HealthPath: "/readyz",
		}
	},
}

func jobSetStatus(js *jobsetv1alpha2.JobSet) Status {
	s := Status{Suspended: ptr.Deref(js.Spec.Suspend, false), Detail: "terminalState=" + js.Status.TerminalState}
	if meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetCompleted)) {
		s.Finished, s.Succeeded = true, true
	}
	if meta.IsStatusConditionTrue(js.Status.Conditions, string(jobsetv1alpha2.JobSetFailed)) {
		s.Finished = true
	}
	s.Detail += " " + conditions(js.Status.Conditions)
	return s
}

// conditions summarises metav1 conditions as type=status(reason).
func conditions(cs []metav1.Condition) string {
	out := ""
	for i, c := range cs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	return out
}

// itoa is strconv.Itoa for command lines.
func itoa(i int) string { return strconv.Itoa(i) }

// JobSet renders any workload as a JobSet with one replicatedJob per pod group, named after its
// role (launcher, worker, ps, controller, main; trials are laid out by trialReplicatedJob). A role
// the trace gives in several groups of different requests (Joulie's HPO trials) keeps each group's
// requests in its own replicatedJob, named role-1, role-2, ...
type JobSet struct{}

// Name implements Kind.
func (JobSet) Name() string { return "JobSet" }

// Families implements Kind.
func (JobSet) Families() []trace.Family { return trace.Families }

// Render implements Kind.
func (JobSet) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	js := &jobsetv1alpha2.JobSet{
		TypeMeta:   typeMeta(jobsetv1alpha2.GroupVersion.String(), "JobSet"),
		ObjectMeta: b.topMeta(),
		Spec: jobsetv1alpha2.JobSetSpec{
			Suspend: ptr.To(true),
			// What JobSet's webhook would fill in, written out because validation does not default.
			Network:        &jobsetv1alpha2.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)},
			SuccessPolicy:  &jobsetv1alpha2.SuccessPolicy{Operator: jobsetv1alpha2.OperatorAll},
			StartupPolicy:  &jobsetv1alpha2.StartupPolicy{StartupPolicyOrder: jobsetv1alpha2.AnyOrder},
			ReplicatedJobs: make([]jobsetv1alpha2.ReplicatedJob, 0, len(b.groups)),
		},
	}
	nth := map[string]int{}
	for i := range b.groups {
		r := &b.groups[i]
		tmpl, err := b.podTemplate(r, "main", corev1.RestartPolicyNever)
		if err != nil {
			return nil, err
		}
		var rj jobsetv1alpha2.ReplicatedJob
		if r.Role == trace.RoleTrial {
			rj = trialReplicatedJob(r, tmpl)
		} else {
			rj = replicatedJob(r.Role, 1, r.Replicas, tmpl)
		}
		if len(b.groups) > len(b.roles) && b.groupsOf(r.Role) > 1 {
			nth[r.Role]++
			rj.Name = groupName(r.Role, nth[r.Role])
		}
		js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, rj)
	}
	js.Spec.FailurePolicy = b.jobSetFailurePolicy()
	return []client.Object{js}, nil
}

// groupName names the n-th replicatedJob of a role with several pod groups: role-n, the role cut
// so the name keeps to the 10 characters MaxNameLength leaves for it.
func groupName(role string, n int) string {
	suffix := "-" + strconv.Itoa(n)
	if len(role)+len(suffix) > 10 {
		role = strings.TrimRight(role[:10-len(suffix)], "-")
	}
	return role + suffix
}

// groupsOf counts the pod groups of a role.
func (b *build) groupsOf(role string) int {
	n := 0
	for i := range b.groups {
		if b.groups[i].Role == role {
			n++
		}
	}
	return n
}

// replicatedJob is replicas Jobs of pods indexed pods each; a pod failure fails its Job (the trace
// decides failures) and JobSet's failure policy then fails the set.
func replicatedJob(name string, replicas, pods int, tmpl corev1.PodTemplateSpec) jobsetv1alpha2.ReplicatedJob {
	return jobsetv1alpha2.ReplicatedJob{
		Name:     name,
		Replicas: int32(replicas),
		Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{
				Parallelism:    ptr.To(int32(pods)),
				Completions:    ptr.To(int32(pods)),
				BackoffLimit:   ptr.To(int32(0)),
				CompletionMode: ptr.To(batchv1.IndexedCompletion),
				Template:       tmpl,
			},
		},
	}
}
