package kueuewl

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	kueueconfigv1beta1 "sigs.k8s.io/kueue/apis/config/v1beta1"
	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// Configuration is what kueuelab reads from a Kueue Configuration, as the Kueue it belongs to runs
// it (either API version, converted to v1beta2, with Kueue's own defaults).
type Configuration struct {
	APIVersion         string
	Frameworks         []string
	MetricsBindAddress string
	LeaderElectionName string
	// ClientQPS and ClientBurst are Kueue's API client rate (clientConnection).
	ClientQPS   float32
	ClientBurst int32
	// FeatureGates are the gates the Configuration sets.
	FeatureGates map[string]bool
	// WaitForPodsReady is Kueue's waitForPodsReady with its defaults filled in (nil: off by the
	// DisableWaitForPodsReady gate the Configuration sets).
	WaitForPodsReady *WaitForPodsReady

	// The sections a forecast replays, as the document sets them (v1beta2, Kueue's defaults
	// within a section filled in); nil where the document has no such section, so that the
	// replaying release applies its own default (waitForPodsReady is on by default from v0.19,
	// the client rate differs by release).
	FairSharing          *kueueconfig.FairSharing
	AdmissionFairSharing *kueueconfig.AdmissionFairSharing
	Resources            *kueueconfig.Resources
	WaitForPodsReadySet  *kueueconfig.WaitForPodsReady
	ClientConnectionSet  *kueueconfig.ClientConnection
}

// WaitForPodsReady is waitForPodsReady's settings. Durations are wall time, as Kueue reads them.
type WaitForPodsReady struct {
	Timeout, RecoveryTimeout time.Duration
	BackoffBase, BackoffMax  time.Duration
	BlockAdmission           bool
	// Default: the Configuration has no waitForPodsReady section; Kueue v0.19 runs it anyway.
	Default bool
}

// DisableWaitForPodsReady is Kueue v0.19's gate that turns its default waitForPodsReady off.
const DisableWaitForPodsReady = "DisableWaitForPodsReady"

// DefaultClientRate is Kueue v0.19's own API client rate (its code's and its manifests' default).
func DefaultClientRate() (qps float32, burst int32) {
	return kueueconfig.DefaultClientConnectionQPS, kueueconfig.DefaultClientConnectionBurst
}

// configScheme decodes Kueue's Configuration as Kueue v0.19.2 does (its pkg/config).
var configScheme = func() *apiruntime.Scheme {
	s := apiruntime.NewScheme()
	utilruntime.Must(kueueconfigv1beta1.AddToScheme(s))
	utilruntime.Must(kueueconfig.AddToScheme(s))
	return s
}()

// ParseConfiguration reads a Configuration of either version. Not strict, unlike Kueue: a field
// this reader does not know must not hide the settings it does.
func ParseConfiguration(b []byte) (*Configuration, error) {
	var head struct {
		APIVersion       string          `json:"apiVersion"`
		Kind             string          `json:"kind"`
		WaitForPodsReady json.RawMessage `json:"waitForPodsReady"`
		ClientConnection json.RawMessage `json:"clientConnection"`
	}
	if err := yaml.Unmarshal(b, &head); err != nil {
		return nil, err
	}
	if head.Kind != "Configuration" || !strings.HasPrefix(head.APIVersion, "config.kueue.x-k8s.io/") {
		return nil, fmt.Errorf("apiVersion %q kind %q: want config.kueue.x-k8s.io Configuration", head.APIVersion, head.Kind)
	}
	var c kueueconfig.Configuration
	if err := apiruntime.DecodeInto(serializer.NewCodecFactory(configScheme).UniversalDecoder(), b, &c); err != nil {
		return nil, err
	}
	s := &Configuration{APIVersion: head.APIVersion, MetricsBindAddress: c.Metrics.BindAddress, FeatureGates: map[string]bool{}}
	if c.Integrations != nil {
		s.Frameworks = c.Integrations.Frameworks
	}
	if c.LeaderElection != nil {
		s.LeaderElectionName = c.LeaderElection.ResourceName
	}
	if cc := c.ClientConnection; cc != nil {
		s.ClientQPS, s.ClientBurst = ptr.Deref(cc.QPS, 0), ptr.Deref(cc.Burst, 0)
	}
	maps.Copy(s.FeatureGates, c.FeatureGates)
	if s.WaitForPodsReady = WaitForPodsReadyOf(c.WaitForPodsReady); s.WaitForPodsReady != nil {
		s.WaitForPodsReady.Default = len(head.WaitForPodsReady) == 0 || string(head.WaitForPodsReady) == "null"
	}
	set := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	s.FairSharing, s.AdmissionFairSharing, s.Resources = c.FairSharing, c.AdmissionFairSharing, c.Resources
	if set(head.WaitForPodsReady) {
		s.WaitForPodsReadySet = c.WaitForPodsReady
	}
	if set(head.ClientConnection) {
		s.ClientConnectionSet = c.ClientConnection
	}
	return s, nil
}

// ReplayDocument is a v1beta2 Configuration holding what of c a replay of Kueue's scheduling
// models (fairSharing, admissionFairSharing, waitForPodsReady and clientConnection as c's
// document sets them, resources.deviceClassMappings and quotaCheckStrategy, and the feature
// gates, gates overriding c's as the manager's --feature-gates flag does), and what it leaves out
// of c, one line each. defaultsOn says whether the cluster's release turns waitForPodsReady on
// when a Configuration has no such section (v0.19 on): c then off (a v1beta1 document without
// it, or with enable: false) is written as the release's gate that turns it off.
func (c *Configuration) ReplayDocument(gates map[string]bool, defaultsOn bool) (doc []byte, left []string, err error) {
	out := kueueconfig.Configuration{FairSharing: c.FairSharing, AdmissionFairSharing: c.AdmissionFairSharing,
		WaitForPodsReady: c.WaitForPodsReadySet, ClientConnection: c.ClientConnectionSet}
	if w := out.WaitForPodsReady; w != nil && ptr.Deref(w.BlockAdmission, false) {
		// The sim refuses blockAdmission (Kueue's cycle then blocks until admitted pods are
		// ready): the rest of the section is replayed, with a warning.
		w = w.DeepCopy()
		w.BlockAdmission = nil
		out.WaitForPodsReady = w
		left = append(left, "waitForPodsReady.blockAdmission: true is not replayed (the sim does not model Kueue's cycle blocking on it)")
	}
	// The group version by name: the releases' config packages name its variable differently.
	out.APIVersion, out.Kind = "config.kueue.x-k8s.io/v1beta2", "Configuration"
	// resources is read as JSON: which fields a release's section has differs by release.
	var resources map[string]any
	if r := c.Resources; r != nil {
		var fields map[string]any
		if b, err := json.Marshal(r); err == nil && json.Unmarshal(b, &fields) == nil {
			resources = map[string]any{}
			var others []string
			for k, v := range fields {
				switch k {
				case "deviceClassMappings", "quotaCheckStrategy":
					resources[k] = v
				default:
					others = append(others, k)
				}
			}
			if len(others) > 0 {
				slices.Sort(others)
				left = append(left, "resources: only deviceClassMappings and quotaCheckStrategy are replayed, not "+strings.Join(others, ", "))
			}
		}
	}
	fg := maps.Clone(c.FeatureGates)
	if fg == nil {
		fg = map[string]bool{}
	}
	maps.Copy(fg, gates)
	if c.WaitForPodsReady == nil && defaultsOn {
		fg[DisableWaitForPodsReady] = true
	}
	if len(fg) > 0 {
		out.FeatureGates = fg
	}
	// The Configuration type has sections without omitempty (health, metrics, webhook, ...): the
	// document keeps the replayed ones alone.
	j, err := json.Marshal(&out)
	if err != nil {
		return nil, nil, fmt.Errorf("kueue configuration: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, nil, fmt.Errorf("kueue configuration: %w", err)
	}
	keep := []string{"apiVersion", "kind", "fairSharing", "admissionFairSharing", "waitForPodsReady", "clientConnection", "featureGates"}
	for k := range m {
		if !slices.Contains(keep, k) {
			delete(m, k)
		}
	}
	if len(resources) > 0 {
		m["resources"] = resources
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return nil, nil, fmt.Errorf("kueue configuration: %w", err)
	}
	return b, left, nil
}

// WaitForPodsReadyOf is the settings of Kueue's waitForPodsReady section w (its defaults filled
// in); nil when w is (off).
func WaitForPodsReadyOf(w *kueueconfig.WaitForPodsReady) *WaitForPodsReady {
	if w == nil {
		return nil
	}
	r := &WaitForPodsReady{Timeout: w.Timeout.Duration, BlockAdmission: ptr.Deref(w.BlockAdmission, false)}
	if w.RecoveryTimeout != nil {
		r.RecoveryTimeout = w.RecoveryTimeout.Duration
	}
	if rs := w.RequeuingStrategy; rs != nil {
		r.BackoffBase = time.Duration(ptr.Deref(rs.BackoffBaseSeconds, 0)) * time.Second
		r.BackoffMax = time.Duration(ptr.Deref(rs.BackoffMaxSeconds, 0)) * time.Second
	}
	return r
}

// Meta is the summary's account of w, its durations in seconds; nil when w is (off).
func (w *WaitForPodsReady) Meta() *results.PodsReadyMeta {
	if w == nil {
		return nil
	}
	return &results.PodsReadyMeta{TimeoutSec: w.Timeout.Seconds(), RecoveryTimeoutSec: w.RecoveryTimeout.Seconds(),
		BackoffBaseSec: w.BackoffBase.Seconds(), BackoffMaxSec: w.BackoffMax.Seconds(), BlockAdmission: w.BlockAdmission}
}
