package render

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
)

// Integration is everything kueuelab knows about one kind, in one place, as Kueue keeps a job
// kind's facts in one jobframework.IntegrationCallbacks: how it renders (Kind), how the API server
// and Kueue know it, where its schema comes from, what a cluster needs before its objects can run
// (CRDs, cluster objects, operators) and how to read an object's state. The scheme, schema
// validation, the local cluster, `cluster install`, the runner, the agent and the tests iterate
// over the registered integrations; none of them lists kinds. Adding a kind is adding one
// Integration (in its kind_*.go file) to DefaultIntegrations.
type Integration struct {
	// Kind renders workloads as this kind.
	Kind
	// GVK is the kind's group, version and kind as rendered; Resource its plural.
	GVK      schema.GroupVersionKind
	Resource string
	// AddToScheme registers the kind's API group (and the groups its objects embed).
	AddToScheme func(*runtime.Scheme) error
	// Kueue lists the Kueue integrations that admit the kind's objects, or the objects the kind
	// makes (a Katib Experiment's trials are batch/v1 Jobs).
	Kueue []KueueIntegration
	// CRDs are the upstream CRD files the kind's objects need, its own and those of the objects
	// its operators create (a TrainJob's JobSet). Empty for built-in kinds.
	CRDs []CRDSource
	// ClusterObjects are the cluster-scoped objects rendered objects of the kind refer to, applied
	// once per cluster (a TrainJob's ClusterTrainingRuntime); nil when there are none.
	ClusterObjects func(Options) []client.Object
	// Operators run the kind's objects, in start order; nil when Kubernetes itself does (Job) or
	// nothing does on a KWOK cluster (Katib's Experiment, whose part the runner plays).
	Operators []*Operator
	// ServicePods is a label selector of the kind's pods that serve until their owner deletes them
	// instead of ending when their work is done (a Ray cluster's head and workers); "" for none.
	// The agent models their power and work but never ends them.
	ServicePods string
	// Status reads an object of the kind (tests and anyone asking whether it has ended).
	Status func(client.Object) (Status, error)
	// PodSets derives the pod sets Kueue makes of an object of the kind, as Kueue's
	// GenericJob.PodSets does (for a TrainJob: on kueuelab's runtime).
	PodSets func(client.Object) ([]PodSet, error)
	// PreAdmissionPodSets names (as Kueue names them) the pod sets of an object whose pods keep the template from
	// before Kueue admitted it: their operator builds them while the object is still suspended
	// and on resume only unsuspends them, so the admitting flavor's node labels and tolerations
	// never reach them and kube-scheduler places them on the template's own selector. nil: none.
	PreAdmissionPodSets func(client.Object) []string
}

// PodSet is Count pods of one template, as Kueue sees them.
type PodSet struct {
	Name     string
	Count    int
	Template corev1.PodTemplateSpec
}

// KueueIntegration is one Kueue job framework and the object kind it reconciles.
type KueueIntegration struct {
	// Framework is the name in Kueue's integrations.frameworks ("kubeflow.org/mpijob").
	Framework string
	// Kind is the object Kueue reconciles for it; Resource its plural, what admission webhook
	// rules name.
	Kind     schema.GroupVersionKind
	Resource string
}

// CRDSource is a set of CRD files inside an upstream Go module.
type CRDSource struct {
	// Module is the module path; Version the version the files are taken from, which for a module
	// go.mod requires is the version go.mod requires (a unit test checks).
	Module, Version string
	// Dir is the directory under render/validate/crds/ the files are copied to.
	Dir string
	// Files are paths inside the module.
	Files []string
	// Install is how a user installs these CRDs on a cluster kueuelab does not run.
	Install string
}

// ModuleVersion is "module@version".
func (c CRDSource) ModuleVersion() string { return c.Module + "@" + c.Version }

// Status is what an object of some kind says about its run.
type Status struct {
	// Suspended: the object waits for Kueue's admission (or was evicted).
	Suspended bool
	// Finished: the object reached its own terminal state; Succeeded says which one.
	Finished, Succeeded bool
	// Detail is a short human summary of the state (conditions), for test failures.
	Detail string
}

// Operator is a controller the local cluster runs for some kinds: built from its Go module by
// `kueuelab tools install`, started as a process on 127.0.0.1 by `kueuelab cluster up`, and
// checked for (with an install hint) by `kueuelab cluster install` on a cluster kueuelab does not run.
type Operator struct {
	// Name is the component name (cluster status, logs, PID files).
	Name string
	// Module and Version pin what is built; Package is the main package: an import path built
	// with `go install pkg@version`, or, with SourceCopy, a ./path inside a copy of the module
	// (for modules whose `go install` the proxy refuses, or that need Patch).
	Module, Version, Package string
	SourceCopy               bool
	// Patch is a file under runtime/tools/patches applied to the source copy.
	Patch   string
	LDFlags []string
	// File is the binary's file name in the tools cache (default Name). Operators added after the
	// cache's first set carry their version in it, so adding one never rebuilds the others.
	File string
	// Install tells a user how to install the operator on a cluster kueuelab does not run.
	Install string
	// Namespace is created before the operator starts (its leases and secrets live there).
	Namespace string
	// StaleLease, when set, is a leader-election Lease in Namespace deleted before a fresh start:
	// a lease left by the previous run would make the new process wait for it to expire.
	StaleLease string
	// Ports names the loopback ports the operator listens on, e.g. webhook, health, metrics.
	Ports []string
	// Webhooks are the operator's admission webhooks, nil when it has none.
	Webhooks *OperatorWebhooks
	// StandIn names a process kueuelab runs next to the operator to play a part a KWOK cluster
	// lacks (the Ray head's job API for KubeRay); its address is OperatorEnv.StandIn.
	StandIn string
	// Run describes the operator's process on the local cluster.
	Run func(OperatorEnv) OperatorProcess
	// InstallObjects are upstream objects a standard installation of the operator applies (its
	// default runtimes), as files inside Module; applied once the operator serves.
	InstallObjects []string
}

// OperatorWebhooks are an operator's admission webhook configurations, read from its module and
// pointed at its loopback port.
type OperatorWebhooks struct {
	// File is the kubebuilder webhook manifest inside the operator's module.
	File string
	// Name, when set, replaces every configuration's name: an operator's certificate rotator
	// injects its CA into configurations of a fixed name. Otherwise NamePrefix is prepended.
	Name, NamePrefix string
	// Skip lists webhooks of kinds the operator does not run here.
	Skip []string
	// Adjust, when set, edits each webhook (one entry of "webhooks") as a real installation's
	// overlay does.
	Adjust func(webhook map[string]any)
	// RotatorSecret, when set, is the Secret in the operator's Namespace its certificate rotator
	// reads: kueuelab seeds it with a CA of the operator's own and a serving certificate signed by
	// it, which the rotator accepts as-is, and registers the webhooks (with that CA) before the
	// operator starts, because the rotator waits for them. Without it the operator serves a
	// certificate of the cluster CA and its webhooks are registered once it is healthy.
	RotatorSecret string
	// RotatorService is the DNS name the seeded serving certificate is issued for.
	RotatorService string
	// CertName names the seeded CA and certificate in the cluster's pki dir (default Name).
	CertName string
	// HardcodedCertDir is where the operator reads its serving certificate from when it cannot
	// be told (controller-runtime's default): the process then runs in a private mount namespace
	// with its own cert dir bound there.
	HardcodedCertDir string
}

// OperatorEnv is what the local cluster gives an operator's Run.
type OperatorEnv struct {
	// Binary is the operator's executable, Kubeconfig the admin kubeconfig.
	Binary, Kubeconfig string
	// Ports maps each name of Operator.Ports to its port on 127.0.0.1.
	Ports map[string]int
	// CertDir holds tls.crt, tls.key and ca.crt for the operator's webhook server.
	CertDir string
	// ConfigDir is where the files of OperatorProcess.Files are written.
	ConfigDir string
	// QPS is the API request rate every controller gets (also its burst).
	QPS int
	// StandIn is the address of the operator's stand-in ("" without one).
	StandIn string
}

// Addr is 127.0.0.1:<port of name>.
func (e OperatorEnv) Addr(name string) string { return fmt.Sprintf("127.0.0.1:%d", e.Ports[name]) }

// OperatorProcess is how the local cluster runs an operator.
type OperatorProcess struct {
	// Args is the full command line, Args[0] the binary; Env is added to the environment.
	Args, Env []string
	// Files are configuration files (YAML of the value) written to ConfigDir before start.
	Files map[string]any
	// HealthPort and HealthPath are probed until they answer 200.
	HealthPort, HealthPath string
}

// DefaultIntegrations is every kind kueuelab renders, in the order the local cluster starts their
// operators.
func DefaultIntegrations() []Integration {
	return []Integration{
		jobIntegration, jobSetIntegration, pyTorchJobIntegration, tfJobIntegration, mpiJobIntegration,
		trainJobIntegration, experimentIntegration, rayJobIntegration,
	}
}

// Integrations returns the registered integrations in registration order.
func (r *Registry) Integrations() []Integration { return slices.Clone(r.order) }

// Integration returns the integration of kind name.
func (r *Registry) Integration(name string) (Integration, bool) {
	for _, in := range r.order {
		if in.Name() == name {
			return in, true
		}
	}
	return Integration{}, false
}

// IntegrationOf returns the integration whose rendered kind o is (by its apiVersion and kind).
func (r *Registry) IntegrationOf(o client.Object) (Integration, bool) {
	gvk := o.GetObjectKind().GroupVersionKind()
	for _, in := range r.order {
		if in.GVK == gvk {
			return in, true
		}
	}
	return Integration{}, false
}

// Operators returns every operator of the registered kinds once, in start order.
func (r *Registry) Operators() []*Operator {
	var out []*Operator
	for _, in := range r.order {
		for _, op := range in.Operators {
			if !slices.ContainsFunc(out, func(o *Operator) bool { return o.Name == op.Name }) {
				out = append(out, op)
			}
		}
	}
	return out
}

// CRDs returns every CRD source of the registered kinds once (a module's files merged).
func (r *Registry) CRDs() []CRDSource {
	var out []CRDSource
	for _, in := range r.order {
		for _, src := range in.CRDs {
			i := slices.IndexFunc(out, func(o CRDSource) bool { return o.Module == src.Module })
			if i < 0 {
				src.Files = slices.Clone(src.Files)
				out = append(out, src)
				continue
			}
			for _, f := range src.Files {
				if !slices.Contains(out[i].Files, f) {
					out[i].Files = append(out[i].Files, f)
				}
			}
		}
	}
	return out
}

// KueueIntegrations returns every Kueue integration the registered kinds need, once.
func (r *Registry) KueueIntegrations() []KueueIntegration {
	var out []KueueIntegration
	for _, in := range r.order {
		for _, k := range in.Kueue {
			if !slices.ContainsFunc(out, func(o KueueIntegration) bool { return o.Framework == k.Framework }) {
				out = append(out, k)
			}
		}
	}
	return out
}

// AddToScheme registers every kind's API group.
func (r *Registry) AddToScheme(s *runtime.Scheme) error {
	for _, in := range r.order {
		if err := in.AddToScheme(s); err != nil {
			return fmt.Errorf("scheme: %s: %w", in.Name(), err)
		}
	}
	return nil
}

// ServicePods returns the ServicePods selectors of the registered kinds.
func (r *Registry) ServicePods() []string {
	var out []string
	for _, in := range r.order {
		if in.ServicePods != "" {
			out = append(out, in.ServicePods)
		}
	}
	return out
}

// ClusterObjects returns the cluster objects the kinds of mapping m need, once each.
func (r *Registry) ClusterObjects(m Mapping, o Options) []client.Object {
	var out []client.Object
	seen := map[string]bool{}
	for _, f := range trace.Families {
		in, ok := r.Integration(m[f])
		if !ok || in.ClusterObjects == nil || seen[in.Name()] {
			continue
		}
		seen[in.Name()] = true
		out = append(out, in.ClusterObjects(o)...)
	}
	return out
}

// FamilyKinds returns, per family, the registered kinds that render it, sorted by name.
func (r *Registry) FamilyKinds() map[trace.Family][]string {
	out := map[trace.Family][]string{}
	for _, f := range trace.Families {
		for _, n := range r.Names() {
			if r.Supports(n, f) {
				out[f] = append(out[f], n)
			}
		}
	}
	return out
}

// statusOf adapts a typed status reader to Integration.Status.
func statusOf[T client.Object](f func(T) Status) func(client.Object) (Status, error) {
	return func(o client.Object) (Status, error) {
		t, ok := o.(T)
		if !ok {
			var want T
			return Status{}, fmt.Errorf("status: %T is not a %T", o, want)
		}
		return f(t), nil
	}
}

// podSetsOf adapts a typed pod set reader to Integration.PodSets.
func podSetsOf[T client.Object](f func(T) []PodSet) func(client.Object) ([]PodSet, error) {
	return func(o client.Object) ([]PodSet, error) {
		t, ok := o.(T)
		if !ok {
			var want T
			return nil, fmt.Errorf("pod sets: %T is not a %T", o, want)
		}
		return f(t), nil
	}
}
