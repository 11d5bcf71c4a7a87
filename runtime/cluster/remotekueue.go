package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
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

// KueueSettings are the fields of Kueue's Configuration (config.kueue.x-k8s.io v1beta1 or
// v1beta2) a replay depends on.
type KueueSettings struct {
	APIVersion         string
	Frameworks         []string
	MetricsBindAddress string
	LeaderElectionName string
	// WaitForPodsReady is nil when all-or-nothing admission is off. Durations are wall time.
	WaitForPodsReady *RemoteWaitForPodsReady
}

// RemoteWaitForPodsReady is waitForPodsReady with Kueue's defaults filled in.
type RemoteWaitForPodsReady struct {
	Timeout, RecoveryTimeout time.Duration
	BackoffBase, BackoffMax  time.Duration
}

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
	for i := range deps.Items {
		d := &deps.Items[i]
		if k.Deployment != nil && d.Namespace != KueueNamespace {
			continue
		}
		k.Deployment = d
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				k.Image = c.Image
			}
		}
		cmRefs = nil
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.ConfigMap != nil {
				cmRefs = append(cmRefs, [2]string{d.Namespace, v.ConfigMap.Name})
			}
		}
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
		s, err := parseKueueConfig([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("configuration of Kueue (%s): %w", src, err)
		}
		k.Config, k.ConfigSource = s, src
		break
	}
	return k, nil
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

// parseKueueConfig reads the fields kueuelab needs of a Configuration of either version.
func parseKueueConfig(b []byte) (*KueueSettings, error) {
	var c struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metrics    struct {
			BindAddress string `json:"bindAddress"`
		} `json:"metrics"`
		LeaderElection struct {
			ResourceName string `json:"resourceName"`
		} `json:"leaderElection"`
		Integrations struct {
			Frameworks []string `json:"frameworks"`
		} `json:"integrations"`
		WaitForPodsReady *struct {
			Enable            *bool            `json:"enable"` // v1beta1 only
			Timeout           *metav1.Duration `json:"timeout"`
			RecoveryTimeout   *metav1.Duration `json:"recoveryTimeout"`
			RequeuingStrategy *struct {
				BackoffBaseSeconds *int32 `json:"backoffBaseSeconds"`
				BackoffMaxSeconds  *int32 `json:"backoffMaxSeconds"`
			} `json:"requeuingStrategy"`
		} `json:"waitForPodsReady"`
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.Kind != "Configuration" || !strings.HasPrefix(c.APIVersion, "config.kueue.x-k8s.io/") {
		return nil, fmt.Errorf("apiVersion %q kind %q: want config.kueue.x-k8s.io Configuration", c.APIVersion, c.Kind)
	}
	s := &KueueSettings{APIVersion: c.APIVersion, Frameworks: c.Integrations.Frameworks,
		MetricsBindAddress: c.Metrics.BindAddress, LeaderElectionName: c.LeaderElection.ResourceName}
	w := c.WaitForPodsReady
	// In v1beta1 the block needs enable: true; in v1beta2 the block itself turns it on.
	if w != nil && strings.HasSuffix(c.APIVersion, "/v1beta1") && (w.Enable == nil || !*w.Enable) {
		w = nil
	}
	if w != nil {
		r := &RemoteWaitForPodsReady{Timeout: 5 * time.Minute, BackoffBase: time.Minute, BackoffMax: time.Hour}
		if w.Timeout != nil {
			r.Timeout = w.Timeout.Duration
		}
		if w.RecoveryTimeout != nil {
			r.RecoveryTimeout = w.RecoveryTimeout.Duration
		}
		if rs := w.RequeuingStrategy; rs != nil {
			if rs.BackoffBaseSeconds != nil {
				r.BackoffBase = time.Duration(*rs.BackoffBaseSeconds) * time.Second
			}
			if rs.BackoffMaxSeconds != nil {
				r.BackoffMax = time.Duration(*rs.BackoffMaxSeconds) * time.Second
			}
		}
		s.WaitForPodsReady = r
	}
	return s, nil
}
