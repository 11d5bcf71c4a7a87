package snapshot

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/runtime/cluster"
)

// RESTConfig is the client configuration of a kubeconfig ("" for the default loading rules:
// $KUBECONFIG, then ~/.kube/config) and one of its contexts ("" for its current one).
func RESTConfig(kubeconfig, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s (context %q): %w", kubeconfig, kubeContext, err)
	}
	rc.QPS, rc.Burst = 50, 100
	return rc, nil
}

// Namespace is the namespace a kubeconfig's context names ("default" when it names none), the one
// kubectl gives an object that names none.
func Namespace(kubeconfig, kubeContext string) (string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).Namespace()
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s (context %q): %w", kubeconfig, kubeContext, err)
	}
	return ns, nil
}

// FromConfig reads the cluster behind rc: Read, with Kueue's version taken from its controller
// Deployment's image when opts has none (runtime/cluster.InspectKueue, as `cluster install` reads
// it).
func FromConfig(ctx context.Context, rc *rest.Config, opts Options) (*Snapshot, error) {
	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("snapshot: client: %w", err)
	}
	var versionWarning string
	if opts.KueueVersion == "" {
		opts.KueueVersion, versionWarning = kueueVersion(ctx, rc)
	}
	s, err := Read(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	if versionWarning != "" {
		s.Warnings = append([]string{versionWarning}, s.Warnings...)
	}
	return s, nil
}

// kueueVersion is the tag of Kueue's controller image, or "" and why it is unknown.
func kueueVersion(ctx context.Context, rc *rest.Config) (string, string) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", fmt.Sprintf("Kueue version: unknown (%v)", err)
	}
	k, err := cluster.InspectKueue(ctx, cs)
	switch {
	case apierrors.IsForbidden(err):
		return "", "Kueue version: unknown: listing Deployments is forbidden (RBAC list deployments.apps cluster-wide); give --kueue-version"
	case err != nil:
		return "", fmt.Sprintf("Kueue version: unknown (%v); give --kueue-version", err)
	case k.Version() == "":
		return "", "Kueue version: unknown: no kueue-controller-manager Deployment with a tagged image (Kueue runs as a process, as on kueuelab's local cluster); give --kueue-version"
	}
	return k.Version(), ""
}
