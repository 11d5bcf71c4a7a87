package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kueuelab/kueuelab/render/contract"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// prerequisite is a CRD an existing cluster must serve, and how to get it.
type prerequisite struct {
	crd, version, fix string
}

var prerequisites = []prerequisite{
	{"workloads.kueue.x-k8s.io", "v1beta1", "install Kueue v0.15.0: kubectl apply --server-side -f https://github.com/kubernetes-sigs/kueue/releases/download/v0.15.0/manifests.yaml"},
	{"clusterqueues.kueue.x-k8s.io", "v1beta1", "install Kueue v0.15.0 (see above)"},
	{"localqueues.kueue.x-k8s.io", "v1beta1", "install Kueue v0.15.0 (see above)"},
	{"resourceflavors.kueue.x-k8s.io", "v1beta1", "install Kueue v0.15.0 (see above)"},
	{"jobsets.jobset.x-k8s.io", "v1alpha2", "install JobSet v0.10.1: kubectl apply --server-side -f https://github.com/kubernetes-sigs/jobset/releases/download/v0.10.1/manifests.yaml"},
	{"pytorchjobs.kubeflow.org", "v1", "install the Kubeflow training-operator v1.9.3: kubectl apply --server-side -k \"github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=v1.9.3\""},
	{"mpijobs.kubeflow.org", "v2beta1", "install mpi-operator v0.7.0 (its v2beta1 MPIJob CRD, not training-operator's v1 one): kubectl apply --server-side -f https://raw.githubusercontent.com/kubeflow/mpi-operator/v0.7.0/deploy/v2beta1/mpi-operator.yaml"},
	{"stages.kwok.x-k8s.io", "v1alpha1", "install KWOK v0.7.0 with its Stage CRD: kubectl apply -f https://github.com/kubernetes-sigs/kwok/releases/download/v0.7.0/kwok.yaml"},
}

// Install prepares an existing cluster (e.g. kind + KWOK with Kueue installed by its user): it
// checks the prerequisites and applies only what kueuelab owns: its completion stages, plus objs.
// It reports what the cluster's kube-scheduler runs without changing it; scoring, when not
// empty, is the strategy a spec's scheduler section asks for, which applies to local clusters.
func Install(ctx context.Context, kubeconfig string, objs []client.Object, scoring string, out io.Writer) error {
	cfg, err := RESTConfig(kubeconfig)
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
	var problems []string
	for _, p := range prerequisites {
		var crd apiextensionsv1.CustomResourceDefinition
		err := c.Get(ctx, client.ObjectKey{Name: p.crd}, &crd)
		switch {
		case apierrors.IsNotFound(err):
			problems = append(problems, fmt.Sprintf("CRD %s missing: %s", p.crd, p.fix))
			continue
		case err != nil:
			return fmt.Errorf("read CRD %s: %w", p.crd, err)
		}
		served := slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			return v.Name == p.version && v.Served
		})
		if !served {
			problems = append(problems, fmt.Sprintf("CRD %s does not serve %s: %s", p.crd, p.version, p.fix))
			continue
		}
		fmt.Fprintf(out, "  ok  %s (%s)\n", p.crd, p.version)
	}
	var dep appsv1.Deployment
	switch err := c.Get(ctx, client.ObjectKey{Namespace: kueueNamespace, Name: "kueue-controller-manager"}, &dep); {
	case err == nil:
		for _, ctr := range dep.Spec.Template.Spec.Containers {
			if tag := imageTag(ctr.Image); ctr.Name == "manager" && tag != "" {
				if !strings.HasPrefix(tag, "v0.15.") {
					problems = append(problems, fmt.Sprintf("Kueue %s is installed (image %s); kueuelab targets v0.15.x", tag, ctr.Image))
				} else {
					fmt.Fprintf(out, "  ok  Kueue %s\n", tag)
				}
			}
		}
	case apierrors.IsNotFound(err):
		fmt.Fprintf(out, "  ??  no Deployment %s/kueue-controller-manager: Kueue's version not checked\n", kueueNamespace)
	default:
		return fmt.Errorf("read Kueue Deployment: %w", err)
	}
	reportScheduler(ctx, c, scoring, out)
	if len(problems) > 0 {
		return fmt.Errorf("cluster prerequisites not met:\n  - %s", strings.Join(problems, "\n  - "))
	}
	stages, err := ownStages()
	if err != nil {
		return err
	}
	if err := applyUnstructured(ctx, c, stages); err != nil {
		return err
	}
	fmt.Fprintf(out, "  applied %d stages (pod completion: annotation %s=true|fail; node faults: label %s=%s)\n",
		len(stages), contract.Complete, contract.Fault, contract.FaultNodeDown)
	if len(objs) > 0 {
		if err := ApplyObjects(ctx, cfg, objs); err != nil {
			return errors.Join(errors.New("apply cluster objects"), err)
		}
		fmt.Fprintf(out, "  applied %d cluster objects\n", len(objs))
	}
	return nil
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
