package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	config "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// KueueConfig is the part of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2) the sim
// engine models; a section's presence turns it on, as in v1beta2.
type KueueConfig struct {
	FairSharing          *config.FairSharing          `json:"fairSharing,omitempty"`
	AdmissionFairSharing *config.AdmissionFairSharing `json:"admissionFairSharing,omitempty"`
	// WaitForPodsReady is refused: Kueue's all-or-nothing admission runs in its workload
	// controller's reconciler, whose clock cannot be made virtual in v0.15.0.
	WaitForPodsReady *config.WaitForPodsReady `json:"waitForPodsReady,omitempty"`
}

// KueueConfigFromFields reads top-level Configuration fields, as experiment variants give them
// to the cluster engine (runtime/experiment KueueConfig.Fields, with durations in trace time),
// rejecting fields the sim does not model.
func KueueConfigFromFields(fields map[string]any) (KueueConfig, error) {
	var k KueueConfig
	if len(fields) == 0 {
		return k, nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return k, fmt.Errorf("kueue config: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&k); err != nil {
		return k, fmt.Errorf("kueue config for the sim engine: %w (it models fairSharing and admissionFairSharing)", err)
	}
	return k, k.check()
}

func (k KueueConfig) check() error {
	var errs []error
	if k.WaitForPodsReady != nil {
		errs = append(errs, fmt.Errorf("kueue config: %w", replay.Require(results.EngineSim, replay.KueueTimers)))
	}
	if a := k.AdmissionFairSharing; a != nil {
		if a.UsageHalfLifeTime.Duration < 0 || a.UsageSamplingInterval.Duration < 0 {
			errs = append(errs, fmt.Errorf("kueue config: admissionFairSharing durations must be ≥ 0"))
		}
	}
	return errors.Join(errs...)
}

// options returns the kueuelib options, with Kueue's own defaults filled in.
func (k KueueConfig) options() (kueuelib.Options, error) {
	cfg := config.Configuration{FairSharing: k.FairSharing, AdmissionFairSharing: k.AdmissionFairSharing}
	config.SetDefaults_Configuration(&cfg)
	return kueuelib.Options{FairSharing: cfg.FairSharing, AdmissionFairSharing: cfg.AdmissionFairSharing}, nil
}
