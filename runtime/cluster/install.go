package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// prerequisite is a CRD an existing cluster must serve, and how to get it. Without an optional
// one only its kinds are unavailable.
type prerequisite struct {
	crd, version, fix string
	kinds             []string
	optional          bool
}

// prerequisites are Kueue's and KWOK's CRDs, and those of every kind in render's registry: the
// kinds of the default mapping that an operator runs are required, the others optional.
func prerequisites() []prerequisite {
	kueueFix := "install Kueue " + tools.KueueVersion + ": kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/releases/download/" + tools.KueueVersion + "/manifests.yaml"
	out := []prerequisite{
		{crd: "workloads.kueue.x-k8s.io", version: "v1beta2", fix: kueueFix},
		{crd: "clusterqueues.kueue.x-k8s.io", version: "v1beta2", fix: kueueFix},
		{crd: "localqueues.kueue.x-k8s.io", version: "v1beta2", fix: kueueFix},
		{crd: "resourceflavors.kueue.x-k8s.io", version: "v1beta2", fix: kueueFix},
		{crd: "stages.kwok.x-k8s.io", version: "v1alpha1", fix: "install KWOK v0.7.0 with its Stage CRD: kubectl apply -f https://github.com/kubernetes-sigs/kwok/releases/download/v0.7.0/kwok.yaml"},
	}
	reg := render.DefaultRegistry()
	defaults := render.DefaultMapping()
	for _, in := range reg.Integrations() {
		if len(in.CRDs) == 0 {
			continue // a built-in kind
		}
		required := len(in.Operators) > 0 && slices.Contains(slices.Collect(maps.Values(defaults)), in.Name())
		crd := in.Resource + "." + in.GVK.Group
		i := slices.IndexFunc(out, func(p prerequisite) bool { return p.crd == crd })
		if i < 0 {
			out = append(out, prerequisite{crd: crd, version: in.GVK.Version, fix: in.CRDs[0].Install, optional: true})
			i = len(out) - 1
		}
		out[i].kinds = append(out[i].kinds, in.Name())
		out[i].optional = out[i].optional && !required
	}
	return out
}

// InstallOptions configure Install.
type InstallOptions struct {
	Kubeconfig string
	// Objects are a cluster spec's objects (namespaces, priority classes, flavors, queues, nodes).
	Objects []client.Object
	// Metrics say where Kueue's and kube-scheduler's metrics are (empty: found through their pods).
	Metrics RemoteMetricsOptions
	// Inexact accepts a cluster whose Kueue or kube-scheduler metrics cannot be read (runs on it
	// then need --inexact or --agent in-cluster).
	Inexact bool
	// Go is the go command that locates KWOK's module for its stages ("go" when empty; not run
	// when $KUEUELAB_MODULE_DIR is set).
	Go string
	// Timeout bounds the wait for the spec's KWOK nodes to be Ready (default 2 minutes).
	Timeout time.Duration
	// Scoring is the node scoring strategy a spec's scheduler section asks for: install only
	// reports that it is not applied (kueuelab never changes a foreign cluster's scheduler).
	Scoring string
	Out     io.Writer
}

// Install prepares an existing cluster (e.g. kind + KWOK with Kueue installed by its user). It
// checks what kueuelab cannot install (the CRDs and versions of Kueue, KWOK and the job
// operators, the Kueue integrations the default kinds need, no KWOK stage that completes pods on
// its own, readable Kueue and kube-scheduler metrics for the exact trace clock) and refuses with
// every problem and its fix; then it installs what kueuelab owns: KWOK's node and pod lifecycle
// stages where the cluster has none of that name, kueuelab's completion stages, the metrics
// reader's ServiceAccount and RBAC, and the spec's objects, and waits for the spec's KWOK nodes.
func Install(ctx context.Context, o InstallOptions) error {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	cfg, err := RESTConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	c, err := newClient(cfg, scheme)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var problems []string
	for _, p := range prerequisites() {
		var crd apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, client.ObjectKey{Name: p.crd}, &crd)
		problem := ""
		switch {
		case apierrors.IsNotFound(err):
			problem = fmt.Sprintf("CRD %s missing: %s", p.crd, p.fix)
		case err != nil:
			return fmt.Errorf("read CRD %s: %w", p.crd, err)
		case !slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == p.version && v.Served
		}):
			problem = fmt.Sprintf("CRD %s does not serve %s: %s", p.crd, p.version, p.fix)
		}
		switch {
		case problem == "":
			fmt.Fprintf(out, "  ok  %s (%s)\n", p.crd, p.version)
		case p.optional:
			fmt.Fprintf(out, "  --  %s unavailable (a mapping naming it will fail): %s\n", strings.Join(p.kinds, ", "), problem)
		default:
			problems = append(problems, problem)
		}
	}
	k, err := InspectKueue(ctx, cs)
	if err != nil {
		return err
	}
	problems = append(problems, checkKueue(k, out)...)
	stages, err := listStages(ctx, c)
	if err != nil {
		return err
	}
	problems = append(problems, checkStages(stages, out)...)
	m, err := ConnectMetrics(ctx, cfg, o.Metrics)
	switch {
	case err != nil && o.Inexact:
		fmt.Fprintf(out, "  !!  metrics not readable (--inexact: runs need --inexact or --agent in-cluster): %v\n", err)
	case err != nil:
		problems = append(problems, fmt.Sprintf("exact runs read Kueue's and kube-scheduler's metrics: %v\n    (give --kueue-metrics / --scheduler-metrics, or --inexact to accept runs whose clock settles on quiet periods)",
			strings.ReplaceAll(err.Error(), "\n", "\n    ")))
	default:
		fmt.Fprintf(out, "  ok  Kueue %s metrics via %s\n  ok  kube-scheduler %s metrics via %s\n", m.KueueVersion, m.KueueVia, m.SchedulerVersion, m.SchedulerVia)
		if p := KueueVersionProblem(m.KueueVersion, "its kueue_build_info"); p != "" {
			problems = append(problems, p)
		}
		m.Close()
	}
	reportScheduler(ctx, c, o.Scoring, out)
	if len(problems) > 0 {
		return fmt.Errorf("cluster prerequisites not met:\n  - %s", strings.Join(problems, "\n  - "))
	}

	// Install what kueuelab owns.
	var own []*unstructured.Unstructured
	have := map[string]bool{}
	for _, st := range stages {
		have[st.GetName()] = true
	}
	stock, err := kwokStages(ctx, o.Go)
	if err != nil {
		return err
	}
	for _, st := range stock {
		if have[st.GetName()] {
			fmt.Fprintf(out, "  ok  KWOK stage %s (the cluster's own)\n", st.GetName())
			continue
		}
		own = append(own, st)
	}
	complete, err := OwnStages()
	if err != nil {
		return err
	}
	own = append(own, complete...)
	if err := ApplyUnstructured(ctx, c, own); err != nil {
		return err
	}
	fmt.Fprintf(out, "  applied %d KWOK stages (%d of KWOK's, %d of kueuelab's: pod completion by annotation %s=true|fail, node faults by label %s=%s)\n",
		len(own), len(own)-len(complete), len(complete), contract.Complete, contract.Fault, contract.FaultNodeDown)
	if len(o.Objects) > 0 {
		if err := ApplyObjects(ctx, cfg, o.Objects); err != nil {
			return errors.Join(errors.New("apply cluster objects"), err)
		}
		fmt.Fprintf(out, "  applied %d cluster objects\n", len(o.Objects))
		if slices.ContainsFunc(o.Objects, func(obj client.Object) bool { _, ok := obj.(*corev1.Node); return ok }) {
			n, err := WaitNodesReady(ctx, c, o.Timeout)
			if err != nil {
				return fmt.Errorf("KWOK nodes not Ready (is the KWOK controller running and managing nodes annotated %s=fake?): %w", KWOKNodeAnnotation, err)
			}
			fmt.Fprintf(out, "  ok  %d KWOK nodes Ready\n", n)
		}
	}
	return nil
}

// frameworksByKind maps each kind of render's registry to the Kueue integrations that admit it
// (a Katib Experiment's trials are batch Jobs): the kind's own facts, in its Integration.
func frameworksByKind() map[string][]string {
	out := map[string][]string{}
	for _, in := range render.DefaultRegistry().Integrations() {
		for _, k := range in.Kueue {
			out[in.Name()] = append(out[in.Name()], k.Framework)
		}
	}
	return out
}

// checkKueue checks Kueue's version (its image tag) against the supported ones, reports the
// settings of its Configuration a replay carries, and checks that its integrations include the
// frameworks of the default mapping's kinds (required) and of the other kinds (reported).
func checkKueue(k *RemoteKueue, out io.Writer) []string {
	var problems []string
	switch v := k.Version(); {
	case k.Deployment == nil:
		fmt.Fprintf(out, "  ??  no Deployment %s: Kueue's version is checked on its metrics\n", kueueDeployment)
	case v == "":
		fmt.Fprintf(out, "  ??  Kueue image %s has no tag: its version is checked on its metrics\n", k.Image)
	case !KueueSupported(v):
		problems = append(problems, KueueVersionProblem(v, "image "+k.Image))
	default:
		fmt.Fprintf(out, "  ok  Kueue %s (Deployment %s/%s)\n", v, k.Deployment.Namespace, k.Deployment.Name)
	}
	if k.Config == nil {
		fmt.Fprintf(out, "  ??  Kueue's configuration not found (no ConfigMap mounted by %s, no %s/kueue-manager-config): integrations not checked, and a replay cannot hold its trace clock for waitForPodsReady, which Kueue v0.19 runs by default\n", kueueDeployment, KueueNamespace)
		return problems
	}
	fmt.Fprintf(out, "  ok  Kueue configuration (%s, %s), carried into every replay: %s\n", k.ConfigSource, k.Config.APIVersion, k.Config.Describe())
	byKind := frameworksByKind()
	required := map[string][]string{}
	for fam, kind := range render.DefaultMapping() {
		for _, fw := range byKind[kind] {
			required[fw] = append(required[fw], fmt.Sprintf("%s (%s)", kind, fam))
		}
	}
	var fws []string
	for _, l := range byKind {
		fws = append(fws, l...)
	}
	slices.Sort(fws)
	fws = slices.Compact(fws)
	for _, fw := range fws {
		switch {
		case slices.Contains(k.Config.Frameworks, fw):
			fmt.Fprintf(out, "  ok  Kueue integration %s\n", fw)
		case len(required[fw]) > 0:
			slices.Sort(required[fw])
			problems = append(problems, fmt.Sprintf("Kueue integration %s is not enabled (%s lists %v), and the default kinds need it: %s; add it to integrations.frameworks and restart Kueue",
				fw, k.ConfigSource, k.Config.Frameworks, strings.Join(required[fw], ", ")))
		default:
			fmt.Fprintf(out, "  --  Kueue integration %s not enabled: a mapping naming its kind will not be admitted\n", fw)
		}
	}
	return problems
}

// listStages lists the cluster's KWOK Stages.
func listStages(ctx context.Context, c client.Client) ([]unstructured.Unstructured, error) {
	var l unstructured.UnstructuredList
	l.SetAPIVersion("kwok.x-k8s.io/v1alpha1")
	l.SetKind("StageList")
	if err := c.List(ctx, &l); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil // no Stage CRD: reported with the CRDs
		}
		return nil, fmt.Errorf("list KWOK stages: %w", err)
	}
	return l.Items, nil
}

// checkStages refuses a Stage, other than kueuelab's, that ends pods by itself (KWOK's stock
// pod-complete ends every Job pod once it runs): only the agent may decide when a pod is done.
func checkStages(stages []unstructured.Unstructured, out io.Writer) []string {
	var problems []string
	for _, st := range stages {
		kind, _, _ := unstructured.NestedString(st.Object, "spec", "resourceRef", "kind")
		tmpl, _, _ := unstructured.NestedString(st.Object, "spec", "next", "statusTemplate")
		if kind != "Pod" || strings.HasPrefix(st.GetName(), "kueuelab-") {
			continue
		}
		if strings.Contains(tmpl, "phase: Succeeded") || strings.Contains(tmpl, "phase: Failed") {
			problems = append(problems, fmt.Sprintf("KWOK Stage %s ends pods on its own (its status template sets a terminal phase); kueuelab's agent decides when a pod is done: kubectl delete stage %s",
				st.GetName(), st.GetName()))
		}
	}
	if len(problems) == 0 {
		fmt.Fprintf(out, "  ok  no KWOK stage ends pods on its own (%d stages)\n", len(stages))
	}
	return problems
}

// kwokStages are KWOK's node and pod lifecycle stages (kwokStageFiles) from its module.
func kwokStages(ctx context.Context, goBin string) ([]*unstructured.Unstructured, error) {
	dir, err := tools.ModuleDir(ctx, goBin, tools.KWOKModule)
	if err != nil {
		return nil, fmt.Errorf("KWOK's stages: %w", err)
	}
	return KWOKStagesIn(dir)
}

// imageTag returns the tag of an image reference ("" when it has none or only a digest).
func imageTag(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return ""
	}
	return image[i+1:]
}

// CheckInstalled reports whether `cluster install` prepared the cluster: kueuelab's completion
// stages are there (install applies them last of the stages). A run on an unprepared cluster would
// wait for pods that no stage ever starts.
func CheckInstalled(ctx context.Context, rc *rest.Config) error {
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	c, err := newClient(rc, scheme)
	if err != nil {
		return err
	}
	stages, err := listStages(ctx, c)
	if err != nil {
		return err
	}
	complete, err := DecodeYAML(bytes.NewReader(completionStages), "stages-complete.yaml")
	if err != nil {
		return err
	}
	for _, want := range complete {
		if !slices.ContainsFunc(stages, func(s unstructured.Unstructured) bool { return s.GetName() == want.GetName() }) {
			return fmt.Errorf("the cluster has no KWOK stage %s: prepare it first with `kueuelab cluster install --kubeconfig ...`", want.GetName())
		}
	}
	return nil
}

// schedulerSelector selects the kube-scheduler static pods kubeadm and kind run in kube-system.
const schedulerSelector = "component=kube-scheduler"

// reportScheduler prints what places the cluster's pods, as far as the API shows it: kueuelab
// never changes a foreign cluster's scheduler, so a replay there runs under whatever it does.
func reportScheduler(ctx context.Context, c client.Client, scoring string, out io.Writer) {
	var pods corev1.PodList
	sel, err := labels.Parse(schedulerSelector)
	if err == nil {
		err = c.List(ctx, &pods, client.InNamespace("kube-system"), client.MatchingLabelsSelector{Selector: sel})
	}
	if err != nil {
		fmt.Fprintf(out, "  ??  kube-scheduler: cannot list its pods in kube-system (%v)\n", err)
	} else {
		for _, line := range describeSchedulers(pods.Items) {
			fmt.Fprintf(out, "  %s\n", line)
		}
	}
	if scoring != "" {
		fmt.Fprintf(out, "  !!  the spec's scheduler section (%s) is not applied: kueuelab does not change this cluster's scheduler, it sets up the local cluster's\n", scoring)
	}
}

// describeSchedulers says, per kube-scheduler pod, its image and what configures it.
func describeSchedulers(pods []corev1.Pod) []string {
	if len(pods) == 0 {
		return []string{"??  kube-scheduler: no pod labelled " + schedulerSelector + " in kube-system (a managed control plane?): how it scores nodes is not visible through the API"}
	}
	var out []string
	for _, p := range pods {
		for _, ctr := range p.Spec.Containers {
			if ctr.Name != "kube-scheduler" {
				continue
			}
			args := append(slices.Clone(ctr.Command), ctr.Args...)
			config := ""
			var flags []string
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--config="); ok {
					config = v
				}
				if strings.HasPrefix(a, "--") && !strings.Contains(a, "kubeconfig") && !strings.Contains(a, "bind-address") {
					flags = append(flags, a)
				}
			}
			what := "no --config: upstream's default profile (NodeResourcesFit LeastAllocated on cpu and memory), spreading pods over nodes"
			if config != "" {
				what = "configuration file " + config + " on its node (the API does not show it; look there for NodeResourcesFit's scoringStrategy)"
			}
			out = append(out, fmt.Sprintf("ok  kube-scheduler %s (pod %s): %s; flags %s", ctr.Image, p.Name, what, strings.Join(flags, " ")))
		}
	}
	return out
}
