package kueuewl

import (
	"encoding/json"
	"fmt"
	"maps"
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
	return s, nil
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
