package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// RemoteKueue is what kueuelab reads of a Kueue it did not install: its controller Deployment
// (manifests or Helm chart) and the Configuration that Deployment mounts from a ConfigMap.
type RemoteKueue struct {
	// Deployment is Kueue's controller Deployment (nil when there is none, e.g. Kueue run as a
	// process); Image its manager container's image.
	Deployment *appsv1.Deployment
	Image      string
	// Config is Kueue's Configuration (nil when none was found); ConfigSource says where from.
	Config       *KueueSettings
	ConfigSource string
}

// KueueSettings are the settings of Kueue's Configuration a replay depends on, as that Kueue runs
// them: the ConfigMap read the way Kueue v0.19.2 reads its configuration file (either API version,
// converted to v1beta2, Kueue's defaults filled in), with the feature gates of its Deployment.
type KueueSettings struct {
	APIVersion         string
	Frameworks         []string
	MetricsBindAddress string
	LeaderElectionName string
	// ClientQPS and ClientBurst are Kueue's API client rate (clientConnection).
	ClientQPS   float32
	ClientBurst int32
	// FeatureGates are the gates the Configuration and the manager's --feature-gates set.
	FeatureGates map[string]bool
	// WaitForPodsReady is nil when all-or-nothing admission is off. Durations are wall time.
	WaitForPodsReady *RemoteWaitForPodsReady
	// Parsed is the Configuration as read, and FlagGates the manager's --feature-gates, which
	// override its gates (a forecast replays them: kueuewl.Configuration.ReplayDocument).
	Parsed    *kueuewl.Configuration
	FlagGates map[string]bool
}

// RemoteWaitForPodsReady is waitForPodsReady with Kueue's defaults filled in.
type RemoteWaitForPodsReady = kueuewl.WaitForPodsReady

// KueueConfigKey is the ConfigMap key of Kueue's manifests and chart.
const KueueConfigKey = "controller_manager_config.yaml"

// InspectKueue finds Kueue's controller Deployment in any namespace and its Configuration: the
// ConfigMap the Deployment mounts, else kueue-system/kueue-manager-config.
func InspectKueue(ctx context.Context, cs kubernetes.Interface) (*RemoteKueue, error) {
	deps, err := cs.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + kueueDeployment})
	if err != nil {
		return nil, fmt.Errorf("look for Kueue's Deployment %s: %w", kueueDeployment, err)
	}
	k := &RemoteKueue{}
	sort.Slice(deps.Items, func(i, j int) bool { return deps.Items[i].Namespace < deps.Items[j].Namespace })
	var cmRefs [][2]string
	var gateFlag string
	for i := range deps.Items {
		d := &deps.Items[i]
		if k.Deployment != nil && d.Namespace != KueueNamespace {
			continue
		}
		k.Deployment = d
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				k.Image = c.Image
				for _, a := range append(slices.Clone(c.Command), c.Args...) {
					if v, ok := strings.CutPrefix(a, "--feature-gates="); ok {
						gateFlag = v
					}
				}
			}
		}
		cmRefs = nil
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				cmRefs = append(cmRefs, [2]string{d.Namespace, v.ConfigMap.Name})
			}
		}
	}
	gates, err := parseFeatureGates(gateFlag)
	if err != nil {
		return nil, fmt.Errorf("deployment %s (Kueue's): --feature-gates: %w", kueueDeployment, err)
	}
	cmRefs = append(cmRefs, [2]string{KueueNamespace, "kueue-manager-config"})
	for _, ref := range cmRefs {
		cm, err := cs.CoreV1().ConfigMaps(ref[0]).Get(ctx, ref[1], metav1.GetOptions{})
		if err := ignoreNotFound(err); err != nil {
			return nil, fmt.Errorf("read Kueue's configuration %s/%s: %w", ref[0], ref[1], err)
		}
		if err != nil {
			continue
		}
		doc, ok := cm.Data[KueueConfigKey]
		if !ok {
			continue
		}
		src := fmt.Sprintf("ConfigMap %s/%s key %s", ref[0], ref[1], KueueConfigKey)
		s, err := parseKueueConfig([]byte(doc), gates)
		if err != nil {
			return nil, fmt.Errorf("configuration of Kueue (%s): %w", src, err)
		}
		k.Config, k.ConfigSource = s, src
		break
	}
	return k, nil
}

// parseFeatureGates reads a --feature-gates value: Name=true|false, comma-separated.
func parseFeatureGates(v string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, kv := range strings.Split(v, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if !ok || err != nil {
			return nil, fmt.Errorf("%q: want Name=true or Name=false", kv)
		}
		out[strings.TrimSpace(name)] = b
	}
	return out, nil
}

// Version is the tag of Kueue's image ("" when unknown).
func (k *RemoteKueue) Version() string { return imageTag(k.Image) }

func (k *RemoteKueue) leaseHolder(ctx context.Context, cs kubernetes.Interface) string {
	name := "c1f6bfd2.kueue.x-k8s.io" // Kueue's default leaderElection.resourceName
	if k.Config != nil && k.Config.LeaderElectionName != "" {
		name = k.Config.LeaderElectionName
	}
	return leaseHolder(ctx, cs, k.Deployment.Namespace, name)
}

// SupportedKueue lists the Kueue minor versions kueuelab replays on a cluster it did not install:
// the one its local cluster and its sim engine run (tools.KueueVersion), whose API, Configuration
// defaults and behaviour the replay is built on.
var SupportedKueue = []string{minorOf(tools.KueueVersion)}

// minorOf is v0.19 for v0.19.2 ("" for a version that is not vMAJOR.MINOR.PATCH...).
func minorOf(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 3 || !strings.HasPrefix(parts[0], "v") {
		return ""
	}
	return parts[0] + "." + parts[1]
}

// KueueSupported reports whether version (a tag such as v0.19.2) is of a supported minor version.
func KueueSupported(version string) bool {
	m := minorOf(version)
	return m != "" && slices.Contains(SupportedKueue, m)
}

// KueueVersionProblem says why Kueue version, read from where, cannot be replayed on ("" when it
// can), naming the supported versions.
func KueueVersionProblem(version, where string) string {
	if KueueSupported(version) {
		return ""
	}
	var list []string
	for _, m := range SupportedKueue {
		list = append(list, m+".x")
	}
	return fmt.Sprintf("Kueue %s is running (%s); kueuelab supports Kueue %s (what its local cluster and sim engine run, %s): upgrade Kueue, or replay on kueuelab's local cluster",
		version, where, strings.Join(list, ", "), tools.KueueVersion)
}

// ReplayMeta is the summary's account of this Kueue, of version (its build info or image tag). Its
// timers run on wall time, which the trace clock waits for.
func (k *RemoteKueue) ReplayMeta(version string) *results.KueueMeta {
	m := &results.KueueMeta{Version: version, Clock: results.ClockWall}
	if k.Config == nil {
		return m
	}
	c := k.Config
	m.Source, m.ClientQPS, m.ClientBurst = k.ConfigSource, float64(c.ClientQPS), int(c.ClientBurst)
	m.WaitForPodsReady = c.WaitForPodsReady.Meta()
	return m
}

// Describe is one line of the settings a replay carries.
func (s *KueueSettings) Describe() string {
	out := fmt.Sprintf("clientConnection qps %g burst %d", s.ClientQPS, s.ClientBurst)
	w := s.WaitForPodsReady
	switch {
	case w == nil && s.FeatureGates[kueuewl.DisableWaitForPodsReady]:
		out += "; waitForPodsReady off (feature gate " + kueuewl.DisableWaitForPodsReady + ")"
	case w == nil:
		out += "; waitForPodsReady off"
	default:
		def := ""
		if w.Default {
			def = " (Kueue's default: the configuration has no waitForPodsReady section)"
		}
		out += fmt.Sprintf("; waitForPodsReady timeout %s, recoveryTimeout %s, requeue backoff %s..%s, blockAdmission %t%s",
			w.Timeout, w.RecoveryTimeout, w.BackoffBase, w.BackoffMax, w.BlockAdmission, def)
	}
	return out
}

// parseKueueConfig reads a Configuration of either version as the Kueue it belongs to runs it;
// gates are the manager's --feature-gates, which win over the Configuration's.
func parseKueueConfig(b []byte, gates map[string]bool) (*KueueSettings, error) {
	c, err := kueuewl.ParseConfiguration(b)
	if err != nil {
		return nil, err
	}
	s := &KueueSettings{APIVersion: c.APIVersion, Frameworks: c.Frameworks, MetricsBindAddress: c.MetricsBindAddress,
		LeaderElectionName: c.LeaderElectionName, ClientQPS: c.ClientQPS, ClientBurst: c.ClientBurst,
		FeatureGates: maps.Clone(c.FeatureGates), Parsed: c, FlagGates: gates}
	maps.Copy(s.FeatureGates, gates)
	if w := c.WaitForPodsReady; w != nil && !s.FeatureGates[kueuewl.DisableWaitForPodsReady] {
		r := *w
		s.WaitForPodsReady = &r
	}
	return s, nil
}
