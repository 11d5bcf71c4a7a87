package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	config "sigs.k8s.io/kueue/apis/config/v1beta2"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// KueueConfig is the part of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) the sim
// engine models; a section's presence turns it on, as in v1beta2.
type KueueConfig struct {
	FairSharing          *config.FairSharing          `json:"fairSharing,omitempty"`
	AdmissionFairSharing *config.AdmissionFairSharing `json:"admissionFairSharing,omitempty"`
	// WaitForPodsReady is on in Kueue v0.19 whether or not the section is given (its defaults:
	// 30 min timeout, recoveryTimeout = timeout, requeuing backoff 60 s doubling to 3,600 s);
	// blockAdmission is not modelled.
	WaitForPodsReady *config.WaitForPodsReady `json:"waitForPodsReady,omitempty"`
	// FeatureGates are Kueue's feature gates by name, set in the linked Kueue's process-wide gate
	// for the run (one set of gates per process at a time: kueuelib.SetFeatureGates), as Kueue's
	// main sets them from its Configuration; DisableWaitForPodsReady also drops waitForPodsReady
	// (which cannot be turned off by configuration in v0.19).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// ClientConnection is Kueue's API client rate limit, which the control-plane model applies
	// (no effect without one).
	ClientConnection *config.ClientConnection `json:"clientConnection,omitempty"`
	// Resources holds the DRA deviceClassMappings (its other fields but quotaCheckStrategy are
	// not modelled). A cluster spec with MIG-partitioned pools adds its own
	// (rcluster.Spec.KueueResources), as `run` configures the local cluster's Kueue.
	Resources *config.Resources `json:"resources,omitempty"`
	// QuotaCheckStrategy is resources.quotaCheckStrategy, kept apart from Resources: the
	// releases before v0.18 have no such field, and refuse it naming the release.
	QuotaCheckStrategy string `json:"-"`
	// PriorityBooster runs Kueue's experimental kueue-priority-booster beside Kueue, configured
	// as its own config file is (timeSharing.interval, timeSharing.negativeBoost,
	// workloadSelector, maxWorkloadPriority); it needs the PriorityBoost gate. Not a field of
	// Kueue's Configuration: the booster is a controller of its own.
	PriorityBooster map[string]any `json:"priorityBooster,omitempty"`
}

// KueueVersion is the Kueue release the sim links.
const KueueVersion = kueuelib.KueueVersion

// disableWaitForPodsReady is Kueue's gate that turns waitForPodsReady off.
const disableWaitForPodsReady = "DisableWaitForPodsReady"

// KueueConfigFromFields reads top-level Configuration fields, as experiment variants give them
// to the cluster engine (runtime/experiment KueueConfig.Fields, with durations in trace time),
// rejecting fields the sim does not model.
func KueueConfigFromFields(fields map[string]any) (KueueConfig, error) {
	var k KueueConfig
	if len(fields) == 0 {
		return k, nil
	}
	if res, ok := fields["resources"].(map[string]any); ok {
		if v, ok := res["quotaCheckStrategy"]; ok {
			qcs, ok := v.(string)
			if !ok {
				return k, fmt.Errorf("kueue config: resources.quotaCheckStrategy: %v: want a string", v)
			}
			k.QuotaCheckStrategy = qcs
			rest := maps.Clone(res)
			delete(rest, "quotaCheckStrategy")
			fields = maps.Clone(fields)
			if len(rest) == 0 {
				delete(fields, "resources")
			} else {
				fields["resources"] = rest
			}
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return k, fmt.Errorf("kueue config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		return k, fmt.Errorf("kueue config for the sim engine: %w (it models fairSharing, admissionFairSharing, waitForPodsReady, clientConnection, resources.deviceClassMappings, resources.quotaCheckStrategy and featureGates, and runs the priorityBooster)", err)
	}
	return k, k.check()
}

// CheckKueueConfig checks k as a run's Kueue configuration.
func CheckKueueConfig(k KueueConfig) error { return k.check() }

func (k KueueConfig) check() error {
	var errs []error
	if err := kueuelib.CheckFeatureGates(k.FeatureGates); err != nil {
		errs = append(errs, fmt.Errorf("kueue config: featureGates: %w", err))
	}
	if w := k.WaitForPodsReady; w != nil && w.BlockAdmission != nil && *w.BlockAdmission {
		errs = append(errs, errors.New("kueue config: waitForPodsReady.blockAdmission: the sim engine does not model it (Kueue's scheduler then waits, blocked, for the admitted pods); use the cluster engine"))
	}
	if a := k.AdmissionFairSharing; a != nil {
		if a.UsageHalfLifeTime.Duration < 0 || a.UsageSamplingInterval.Duration < 0 {
			errs = append(errs, fmt.Errorf("kueue config: admissionFairSharing durations must be ≥ 0"))
		}
	}
	if err := kueuelib.CheckQuotaCheckStrategy(k.QuotaCheckStrategy); err != nil {
		errs = append(errs, fmt.Errorf("kueue config: %w", err))
	}
	if k.PriorityBooster != nil {
		if err := kueuelib.CheckPriorityBooster(k.PriorityBooster, k.FeatureGates); err != nil {
			errs = append(errs, fmt.Errorf("kueue config: %w", err))
		}
	}
	if r := k.Resources; r != nil {
		if len(r.ExcludeResourcePrefixes) > 0 || len(r.Transformations) > 0 {
			errs = append(errs, errors.New("kueue config: resources: the sim engine models deviceClassMappings and quotaCheckStrategy only (not excludeResourcePrefixes or transformations); use the cluster engine"))
		}
		if len(r.DeviceClassMappings) > 0 {
			if err := kueuelib.CounterQuota(); err != nil {
				errs = append(errs, fmt.Errorf("kueue config: resources.deviceClassMappings: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// withSpec is k with the resources section spec's Kueue needs (the deviceClassMappings that
// charge MIG slices), merged as the cluster engine merges it into the local cluster's
// configuration (rcluster.Spec.WithKueueResources).
func (k KueueConfig) withSpec(spec *rcluster.Spec) (KueueConfig, error) {
	if spec.KueueResources() == nil {
		return k, nil
	}
	if err := kueuelib.CounterQuota(); err != nil {
		return k, fmt.Errorf("cluster spec %s has MIG-partitioned node pools: %w", replay.SpecName(spec), err)
	}
	fields := map[string]any{}
	if k.Resources != nil {
		b, err := json.Marshal(k.Resources)
		if err != nil {
			return k, fmt.Errorf("kueue config: resources: %w", err)
		}
		var res map[string]any
		if err := json.Unmarshal(b, &res); err != nil {
			return k, fmt.Errorf("kueue config: resources: %w", err)
		}
		fields["resources"] = res
	}
	fields, err := spec.WithKueueResources(fields)
	if err != nil {
		return k, err
	}
	b, err := json.Marshal(fields["resources"])
	if err != nil {
		return k, fmt.Errorf("kueue config: resources: %w", err)
	}
	var res config.Resources
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return k, fmt.Errorf("cluster spec %s: Kueue's resources section: %w", replay.SpecName(spec), err)
	}
	k.Resources = &res
	return k, nil
}

// options returns the kueuelib options, with Kueue's own defaults filled in.
func (k KueueConfig) options() (kueuelib.Options, error) {
	cfg := config.Configuration{FairSharing: k.FairSharing, AdmissionFairSharing: k.AdmissionFairSharing}
	if k.WaitForPodsReady != nil {
		cfg.WaitForPodsReady = k.WaitForPodsReady.DeepCopy()
	}
	config.SetDefaults_Configuration(&cfg)
	if k.FeatureGates[disableWaitForPodsReady] {
		cfg.WaitForPodsReady = nil
	}
	o := kueuelib.Options{FairSharing: cfg.FairSharing, AdmissionFairSharing: cfg.AdmissionFairSharing,
		WaitForPodsReady: cfg.WaitForPodsReady}
	if k.Resources != nil {
		o.DeviceClassMappings = k.Resources.DeviceClassMappings
	}
	o.QuotaCheckStrategy = k.QuotaCheckStrategy
	o.PriorityBooster = k.PriorityBooster
	return o, nil
}

// clientRate is Kueue's client rate limit, Kueue's defaults filled in (a negative QPS turns
// client-side rate limiting off, as in client-go).
func (k KueueConfig) clientRate() (float64, int) {
	cfg := config.Configuration{}
	if k.ClientConnection != nil {
		cfg.ClientConnection = k.ClientConnection.DeepCopy()
	}
	config.SetDefaults_Configuration(&cfg)
	return float64(*cfg.ClientConnection.QPS), int(*cfg.ClientConnection.Burst)
}

// kueueMeta is the summary's account of the Kueue the sim runs with o (Kueue's defaults filled
// in): the version its seams are checked on, which is the linked one.
func kueueMeta(o kueuelib.Options, gates map[string]bool) *results.KueueMeta {
	return &results.KueueMeta{Version: kueuelib.KueueVersion, Source: "the sim engine's Kueue configuration", Clock: results.ClockTrace, FeatureGates: gates,
		WaitForPodsReady: kueuewl.WaitForPodsReadyOf(o.WaitForPodsReady).Meta()}
}
