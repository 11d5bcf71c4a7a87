package experiment

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// KueueConfig are the Kueue Configuration settings a variant changes. They apply when Kueue
// starts, so a variant that sets them needs a fresh local cluster (not --kubeconfig).
type KueueConfig struct {
	FairSharing      *KueueFairSharing `yaml:"fairSharing,omitempty"`
	WaitForPodsReady *WaitForPodsReady `yaml:"waitForPodsReady,omitempty"`
}

// KueueFairSharing turns Kueue's fair sharing on. PreemptionStrategies default to
// [LessThanOrEqualToFinalShare, LessThanInitialShare], Kueue's documented default.
type KueueFairSharing struct {
	Enable               bool     `yaml:"enable"`
	PreemptionStrategies []string `yaml:"preemptionStrategies,omitempty"`
}

// WaitForPodsReady turns Kueue's all-or-nothing admission on. Timeout and RecoveryTimeout are in
// trace time ("10m"): Kueue gets them divided by the speedup, so the variant means the same at
// any speedup.
type WaitForPodsReady struct {
	Enable          bool   `yaml:"enable"`
	Timeout         string `yaml:"timeout,omitempty"`
	BlockAdmission  *bool  `yaml:"blockAdmission,omitempty"`
	RecoveryTimeout string `yaml:"recoveryTimeout,omitempty"`
}

// validStrategies are the strategy lists Kueue 0.15 accepts (pkg/config/validation.go).
var validStrategies = [][]string{
	{"LessThanOrEqualToFinalShare"},
	{"LessThanInitialShare"},
	{"LessThanOrEqualToFinalShare", "LessThanInitialShare"},
}

func (k *KueueConfig) check() error {
	var errs []error
	if fs := k.FairSharing; fs != nil && len(fs.PreemptionStrategies) > 0 {
		ok := slices.ContainsFunc(validStrategies, func(v []string) bool { return slices.Equal(v, fs.PreemptionStrategies) })
		if !ok {
			errs = append(errs, fmt.Errorf("fairSharing.preemptionStrategies: %v is not one of %v", fs.PreemptionStrategies, validStrategies))
		}
	}
	if w := k.WaitForPodsReady; w != nil && w.Enable {
		if d, err := time.ParseDuration(w.Timeout); err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("waitForPodsReady.timeout: want a positive trace-time duration such as 10m, got %q", w.Timeout))
		}
		if w.RecoveryTimeout != "" {
			if d, err := time.ParseDuration(w.RecoveryTimeout); err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("waitForPodsReady.recoveryTimeout: want a positive duration, got %q", w.RecoveryTimeout))
			}
		}
	}
	return errors.Join(errs...)
}

// Empty reports whether k changes nothing in Kueue's configuration.
func (k *KueueConfig) Empty() bool {
	return k == nil || ((k.FairSharing == nil || !k.FairSharing.Enable) && (k.WaitForPodsReady == nil || !k.WaitForPodsReady.Enable))
}

// Fields returns the top-level fields of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)
// that k sets, for cluster.Options.KueueConfig. In v1beta2 a section's presence enables it.
func (k *KueueConfig) Fields(speedup float64) map[string]any {
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
	if w := k.WaitForPodsReady; w != nil && w.Enable {
		m := map[string]any{"timeout": wall(w.Timeout, speedup)}
		if w.BlockAdmission != nil {
			m["blockAdmission"] = *w.BlockAdmission
		}
		if w.RecoveryTimeout != "" {
			m["recoveryTimeout"] = wall(w.RecoveryTimeout, speedup)
		}
		out["waitForPodsReady"] = m
	}
	return out
}

// wall converts a checked trace-time duration to wall time at speedup, at least 1 s (Kueue's
// timers are not finer).
func wall(traceDur string, speedup float64) string {
	d, _ := time.ParseDuration(traceDur) // checked by check
	w := time.Duration(float64(d) / speedup).Round(time.Second)
	if w < time.Second {
		w = time.Second
	}
	return w.String()
}
