package snapshot

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
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
	k, kerr := inspectKueue(ctx, rc)
	var warnings []string
	if opts.KueueVersion == "" {
		var w string
		if opts.KueueVersion, w = kueueVersion(k, kerr); w != "" {
			warnings = append(warnings, w)
		}
	}
	s, err := Read(ctx, c, opts)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, s.kueueConfig(k, kerr)...)
	s.Warnings = append(warnings, s.Warnings...)
	return s, nil
}

func inspectKueue(ctx context.Context, rc *rest.Config) (*cluster.RemoteKueue, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return cluster.InspectKueue(ctx, cs)
}

// kueueConfig keeps what of the Kueue Configuration k found a forecast replays
// (kueuewl.Configuration.ReplayDocument), and returns what the state cannot carry.
func (s *Snapshot) kueueConfig(k *cluster.RemoteKueue, err error) []string {
	switch {
	case apierrors.IsForbidden(err):
		return []string{"Kueue configuration: not read: reading Deployments or ConfigMaps is forbidden (RBAC get configmaps in Kueue's namespace); a forecast runs the release's defaults"}
	case err != nil:
		return []string{fmt.Sprintf("Kueue configuration: not read (%v); a forecast runs the release's defaults", err)}
	case k.Config == nil || k.Config.Parsed == nil:
		return []string{"Kueue configuration: no ConfigMap with " + cluster.KueueConfigKey + " found; a forecast runs the release's defaults"}
	}
	// The cluster's release decides what a Configuration without waitForPodsReady means.
	rel, verr := kueuever.ForCluster(s.State.KueueVersion)
	doc, left, err := k.Config.Parsed.ReplayDocument(k.Config.FlagGates, verr == nil && rel.DefaultsWaitForPodsReady())
	if err != nil {
		return []string{fmt.Sprintf("Kueue configuration (%s): %v; a forecast runs the release's defaults", k.ConfigSource, err)}
	}
	s.KueueConfig, s.KueueConfigSource = doc, k.ConfigSource
	s.State.KueueConfig = state.KueueConfigFile
	var out []string
	for _, l := range left {
		out = append(out, fmt.Sprintf("Kueue configuration (%s): %s", k.ConfigSource, l))
	}
	return out
}

// kueueVersion is the tag of Kueue's controller image, or "" and why it is unknown.
func kueueVersion(k *cluster.RemoteKueue, err error) (string, string) {
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
