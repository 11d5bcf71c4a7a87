package experiment

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// KueueConfig are the Kueue Configuration settings a variant changes. They apply when Kueue
// starts, so a variant that sets them needs a fresh local cluster (not --kubeconfig).
//
// Every duration is in trace time and reaches Kueue as written: the local cluster's Kueue runs on
// the replay's trace clock (runtime/kueueclock), so its timers fire at their trace times at any
// speedup.
type KueueConfig struct {
	FairSharing          *KueueFairSharing     `yaml:"fairSharing,omitempty"`
	WaitForPodsReady     *WaitForPodsReady     `yaml:"waitForPodsReady,omitempty"`
	AdmissionFairSharing *AdmissionFairSharing `yaml:"admissionFairSharing,omitempty"`
	// ClientConnection is Kueue's API client rate limit. On the sim engine a control-plane model
	// turns it into trace time (runtime/controlplane); the cluster engine's Kueue runs with it,
	// but its trace clock waits for Kueue whatever its rate.
	ClientConnection *ClientConnection `yaml:"clientConnection,omitempty"`
	// FeatureGates are Kueue feature gates by name, as in its Configuration. Gates are
	// process-wide: on the sim engine a variant with gates runs in a kueuelab process of its own;
	// the cluster engine's Kueue reads them from its Configuration (a fresh local cluster per run).
	FeatureGates map[string]bool `yaml:"featureGates,omitempty"`
	// Resources is Kueue's resources section, as far as a what-if varies it.
	Resources *KueueResources `yaml:"resources,omitempty"`
	// PriorityBooster runs Kueue's experimental kueue-priority-booster beside Kueue (sim engine
	// only), configured as its own config file is: timeSharing.interval (trace time),
	// timeSharing.negativeBoost, workloadSelector, maxWorkloadPriority. It needs the PriorityBoost
	// gate (Kueue v0.18 and later).
	PriorityBooster map[string]any `yaml:"priorityBooster,omitempty"`

	// kueueDefaults marks a configuration completed by WithKueueDefaults: a waitForPodsReady
	// with enable: false then turns Kueue's default off (its DisableWaitForPodsReady gate).
	kueueDefaults bool
}

// Kueue v0.19's waitForPodsReady defaults (apis/config/v1beta2 SetDefaults_Configuration): on
// unless turned off, 30 min timeout, recoveryTimeout = timeout, requeuing backoff from 60 s
// doubling to 3,600 s, counted from the eviction, and no blocking of other admissions.
const (
	defaultPodsReadyTimeout = "30m"
	defaultRequeueTimestamp = "Eviction"
)

// WithKueueDefaults returns the configuration Kueue release v runs for k, with its defaults made
// explicit in trace time: Kueue v0.19 turns waitForPodsReady on when its Configuration has no
// such section, with durations that are wall time to it, so a local cluster that left them to
// Kueue would time gangs out after 30 wall minutes (weeks of trace time at speedup 1000). Here a
// variant without waitForPodsReady gets those defaults as trace durations, scaled like any other
// setting, on a release that has them (v0.19 on); one with enable: false turns it off.
func (k *KueueConfig) WithKueueDefaults(v kueuever.Version) *KueueConfig {
	out := &KueueConfig{kueueDefaults: true}
	if k != nil {
		out.FairSharing, out.WaitForPodsReady, out.AdmissionFairSharing = k.FairSharing, k.WaitForPodsReady, k.AdmissionFairSharing
		out.ClientConnection, out.FeatureGates, out.Resources, out.PriorityBooster = k.ClientConnection, k.FeatureGates, k.Resources, k.PriorityBooster
	}
	if out.WaitForPodsReady == nil && v.DefaultsWaitForPodsReady() {
		no := false
		out.WaitForPodsReady = &WaitForPodsReady{Enable: true, Timeout: defaultPodsReadyTimeout, BlockAdmission: &no,
			RecoveryTimeout: defaultPodsReadyTimeout, RequeuingStrategy: &RequeuingStrategy{Timestamp: defaultRequeueTimestamp,
				BackoffBase: defaultBackoffBase.String(), BackoffMax: defaultBackoffMax.String()}}
	}
	return out
}

// KueueResources is Configuration.resources: QuotaCheckStrategy is BlockUndeclared (Kueue's
// default: a Workload's resources its ClusterQueue does not cover make it inadmissible) or
// IgnoreUndeclared (they are not checked against quota). Kueue v0.18 introduced it, behind its
// QuotaCheckStrategy gate (on by default from v0.19).
type KueueResources struct {
	QuotaCheckStrategy string `yaml:"quotaCheckStrategy,omitempty"`
}

// KueueFairSharing turns Kueue's fair sharing on. PreemptionStrategies default to
// [LessThanOrEqualToFinalShare, LessThanInitialShare], Kueue's documented default.
type KueueFairSharing struct {
	Enable               bool     `yaml:"enable"`
	PreemptionStrategies []string `yaml:"preemptionStrategies,omitempty"`
}

// WaitForPodsReady turns Kueue's all-or-nothing admission on. Durations are trace time ("10m").
type WaitForPodsReady struct {
	Enable          bool   `yaml:"enable"`
	Timeout         string `yaml:"timeout,omitempty"`
	BlockAdmission  *bool  `yaml:"blockAdmission,omitempty"`
	RecoveryTimeout string `yaml:"recoveryTimeout,omitempty"`
	// RequeuingStrategy is the backoff of a workload evicted for not getting ready in time.
	RequeuingStrategy *RequeuingStrategy `yaml:"requeuingStrategy,omitempty"`
}

// RequeuingStrategy is waitForPodsReady.requeuingStrategy with its backoff in trace time: Kueue
// waits backoffBase × 2^(n−1) (at most backoffMax) before requeuing a workload evicted n times.
type RequeuingStrategy struct {
	Timestamp         string `yaml:"timestamp,omitempty"`
	BackoffLimitCount *int32 `yaml:"backoffLimitCount,omitempty"`
	// BackoffBase defaults to Kueue's 60s, BackoffMax to its 3600s.
	BackoffBase string `yaml:"backoffBase,omitempty"`
	BackoffMax  string `yaml:"backoffMax,omitempty"`
}

// AdmissionFairSharing configures Kueue's admission fair sharing (the ClusterQueues that use it
// set admissionScope). Its usage decays on Kueue's clock, the trace clock.
type AdmissionFairSharing struct {
	UsageHalfLifeTime     string             `yaml:"usageHalfLifeTime"`
	UsageSamplingInterval string             `yaml:"usageSamplingInterval,omitempty"`
	ResourceWeights       map[string]float64 `yaml:"resourceWeights,omitempty"`
}

// validStrategies are the strategy lists Kueue 0.15 accepts (pkg/config/validation.go).
var validStrategies = [][]string{
	{"LessThanOrEqualToFinalShare"},
	{"LessThanInitialShare"},
	{"LessThanOrEqualToFinalShare", "LessThanInitialShare"},
}

// Kueue's defaults for the requeuing backoff (pkg/controller/core: 60 s, 3600 s).
const (
	defaultBackoffBase = time.Minute
	defaultBackoffMax  = time.Hour
)

func parsePositive(field, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: want a positive trace-time duration such as 10m, got %q", field, v)
	}
	return d, nil
}

func (k *KueueConfig) check() error {
	if k == nil {
		return nil
	}
	var errs []error
	if fs := k.FairSharing; fs != nil && len(fs.PreemptionStrategies) > 0 {
		ok := slices.ContainsFunc(validStrategies, func(v []string) bool { return slices.Equal(v, fs.PreemptionStrategies) })
		if !ok {
			errs = append(errs, fmt.Errorf("fairSharing.preemptionStrategies: %v is not one of %v", fs.PreemptionStrategies, validStrategies))
		}
	}
	if c := k.ClientConnection; c != nil {
		if c.QPS == 0 {
			errs = append(errs, errors.New("clientConnection.qps: 0 (a negative qps turns client-side rate limiting off)"))
		}
		if c.QPS > 0 && c.Burst < 1 {
			errs = append(errs, fmt.Errorf("clientConnection.burst: %d: client-go's token bucket needs a burst of at least 1", c.Burst))
		}
	}
	for g := range k.FeatureGates {
		if g == "" {
			errs = append(errs, errors.New("featureGates: a gate without a name"))
		}
	}
	if r := k.Resources; r != nil {
		switch r.QuotaCheckStrategy {
		case "", "BlockUndeclared", "IgnoreUndeclared":
		default:
			errs = append(errs, fmt.Errorf("resources.quotaCheckStrategy: %q: want BlockUndeclared or IgnoreUndeclared", r.QuotaCheckStrategy))
		}
	}
	return errors.Join(append(errs, k.checkDurations())...)
}

// OwnGates are the feature gates the variant sets itself (those that need a process of their
// own on the sim engine).
func (k *KueueConfig) OwnGates() map[string]bool {
	if k == nil {
		return nil
	}
	return k.FeatureGates
}

// ClientConnection is Kueue's Configuration clientConnection.
type ClientConnection struct {
	QPS   float32 `yaml:"qps"`
	Burst int32   `yaml:"burst"`
}

// checkDurations checks the duration settings k sets.
func (k *KueueConfig) checkDurations() error {
	var errs []error
	add := func(path, v string, def time.Duration, whole bool) time.Duration {
		d := def
		if v != "" {
			var err error
			if d, err = parsePositive(path, v); err != nil {
				errs = append(errs, err)
				return 0
			}
		}
		if whole && d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("%s: Kueue takes whole seconds, got %s", path, d))
			return 0
		}
		return d
	}
	if w := k.WaitForPodsReady; w != nil && w.Enable {
		if w.Timeout == "" {
			_, err := parsePositive("waitForPodsReady.timeout", w.Timeout)
			errs = append(errs, err)
		}
		add("waitForPodsReady.timeout", w.Timeout, 0, false)
		add("waitForPodsReady.recoveryTimeout", w.RecoveryTimeout, 0, false)
		// Kueue's default backoff is always written, so that the summary shows it.
		rs := w.RequeuingStrategy
		if rs == nil {
			rs = &RequeuingStrategy{}
		}
		{
			base := add("waitForPodsReady.requeuingStrategy.backoffBaseSeconds", rs.BackoffBase, defaultBackoffBase, true)
			maxB := add("waitForPodsReady.requeuingStrategy.backoffMaxSeconds", rs.BackoffMax, defaultBackoffMax, true)
			if base > 0 && maxB > 0 && maxB < base {
				errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy: backoffMax %s < backoffBase %s", maxB, base))
			}
			if rs.Timestamp != "" && rs.Timestamp != "Eviction" && rs.Timestamp != "Creation" {
				errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingStrategy.timestamp: want Eviction or Creation, got %q", rs.Timestamp))
			}
		}
	}
	if a := k.AdmissionFairSharing; a != nil {
		if a.UsageHalfLifeTime == "" {
			errs = append(errs, errors.New("admissionFairSharing.usageHalfLifeTime: required"))
		}
		add("admissionFairSharing.usageHalfLifeTime", a.UsageHalfLifeTime, 0, false)
		add("admissionFairSharing.usageSamplingInterval", a.UsageSamplingInterval, 5*time.Minute, false)
	}
	return errors.Join(errs...)
}

// durationOr is v, a duration check has accepted, or def when v is empty.
func durationOr(v string, def time.Duration) time.Duration {
	if v == "" {
		return def
	}
	d, _ := time.ParseDuration(v) // checked by check
	return d
}

// Empty reports whether k changes nothing in Kueue's configuration. A waitForPodsReady with
// enable: false turns Kueue v0.19's default off (WithKueueDefaults): a change.
func (k *KueueConfig) Empty() bool {
	return k == nil || ((k.FairSharing == nil || !k.FairSharing.Enable) && k.WaitForPodsReady == nil &&
		k.AdmissionFairSharing == nil && (k.Resources == nil || k.Resources.QuotaCheckStrategy == ""))
}

// Fields returns the top-level fields of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)
// that k sets, for localcluster.Options.KueueConfig. Its durations are trace durations as they
// stand: the local Kueue runs on the replay's trace clock (runtime/kueueclock). In v1beta2 a
// section's presence enables it.
func (k *KueueConfig) Fields() map[string]any {
	out := map[string]any{}
	if k == nil {
		return out
	}
	if fs := k.FairSharing; fs != nil && fs.Enable {
		s := fs.PreemptionStrategies
		if len(s) == 0 {
			s = validStrategies[2]
		}
		out["fairSharing"] = map[string]any{"preemptionStrategies": slices.Clone(s)}
	}
	gates := map[string]any{}
	for g, on := range k.FeatureGates {
		gates[g] = on
	}
	if w := k.WaitForPodsReady; w != nil && !w.Enable && k.kueueDefaults {
		gates["DisableWaitForPodsReady"] = true
	}
	if len(gates) > 0 {
		out["featureGates"] = gates
	}
	if w := k.WaitForPodsReady; w != nil && w.Enable {
		m := map[string]any{"timeout": durationOr(w.Timeout, 0).String()}
		if w.BlockAdmission != nil {
			m["blockAdmission"] = *w.BlockAdmission
		}
		if w.RecoveryTimeout != "" {
			m["recoveryTimeout"] = durationOr(w.RecoveryTimeout, 0).String()
		}
		rs := w.RequeuingStrategy
		if rs == nil {
			rs = &RequeuingStrategy{}
		}
		{
			r := map[string]any{
				"backoffBaseSeconds": int32(durationOr(rs.BackoffBase, defaultBackoffBase) / time.Second),
				"backoffMaxSeconds":  int32(durationOr(rs.BackoffMax, defaultBackoffMax) / time.Second),
			}
			if rs.Timestamp != "" {
				r["timestamp"] = rs.Timestamp
			}
			if rs.BackoffLimitCount != nil {
				r["backoffLimitCount"] = *rs.BackoffLimitCount
			}
			m["requeuingStrategy"] = r
		}
		out["waitForPodsReady"] = m
	}
	if a := k.AdmissionFairSharing; a != nil {
		m := map[string]any{"usageHalfLifeTime": durationOr(a.UsageHalfLifeTime, 0).String(),
			"usageSamplingInterval": durationOr(a.UsageSamplingInterval, 5*time.Minute).String()}
		if len(a.ResourceWeights) > 0 {
			m["resourceWeights"] = a.ResourceWeights
		}
		out["admissionFairSharing"] = m
	}
	if c := k.ClientConnection; c != nil {
		out["clientConnection"] = map[string]any{"qps": c.QPS, "burst": c.Burst}
	}
	if r := k.Resources; r != nil && r.QuotaCheckStrategy != "" {
		out["resources"] = map[string]any{"quotaCheckStrategy": r.QuotaCheckStrategy}
	}
	if k.PriorityBooster != nil {
		out["priorityBooster"] = k.PriorityBooster
	}
	return out
}

// Meta is the summary's account of the local cluster's Kueue running k.
func (k *KueueConfig) Meta() *results.KueueMeta {
	qps, burst := localcluster.KueueClientRate()
	if c := k.ClientConnection; c != nil {
		qps, burst = c.QPS, c.Burst
	}
	m := &results.KueueMeta{Version: tools.KueueVersion, Source: "the local cluster's Kueue configuration",
		ClientQPS: float64(qps), ClientBurst: int(burst), Clock: results.ClockTrace, FeatureGates: k.FeatureGates}
	if t := k.Timers(); t.PodsReadyTimeout > 0 {
		m.WaitForPodsReady = &results.PodsReadyMeta{TimeoutSec: t.PodsReadyTimeout, RecoveryTimeoutSec: t.RecoveryTimeout,
			BackoffBaseSec: t.BackoffBase, BackoffMaxSec: t.BackoffMax, BlockAdmission: ptr.Deref(k.WaitForPodsReady.BlockAdmission, false)}
	}
	return m
}

// Timers are k's waitForPodsReady settings in trace seconds.
func (k *KueueConfig) Timers() runner.KueueTimers {
	var t runner.KueueTimers
	if k == nil || k.WaitForPodsReady == nil || !k.WaitForPodsReady.Enable {
		return t
	}
	w := k.WaitForPodsReady
	sec := func(v string, def time.Duration) float64 { return durationOr(v, def).Seconds() }
	t.PodsReadyTimeout = sec(w.Timeout, 0)
	t.RecoveryTimeout = sec(w.RecoveryTimeout, 0)
	rs := w.RequeuingStrategy
	if rs == nil {
		rs = &RequeuingStrategy{}
	}
	t.BackoffBase, t.BackoffMax = sec(rs.BackoffBase, defaultBackoffBase), sec(rs.BackoffMax, defaultBackoffMax)
	return t
}
