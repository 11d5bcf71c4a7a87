package experiment

import (
	"cmp"
	"errors"
	"fmt"
	"math"
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
	// RequeuingBackoffBase and RequeuingBackoffMax bound the backoff before a workload evicted
	// for not starting in time is queued again (base × 2^(n−1), at most max), in trace time
	// (Kueue's defaults: 60s and 1h). Kueue gets them divided by the speedup, in its whole
	// seconds and at least 1 s as the timeouts: at speedup 1000 the base is 1 s (1000 trace
	// seconds, not 60: Kueue cannot wait less; 0 would requeue at once, every time) and the
	// maximum 4 s, where Kueue's own 60 s would be 17 trace hours out of the queue.
	RequeuingBackoffBase string `yaml:"requeuingBackoffBase,omitempty"`
	RequeuingBackoffMax  string `yaml:"requeuingBackoffMax,omitempty"`
}

// Kueue's requeuing backoff defaults (config v1beta2), read as trace time.
const (
	defaultRequeuingBackoffBase = "60s"
	defaultRequeuingBackoffMax  = "1h"
)

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
		base, baseErr := time.ParseDuration(cmp.Or(w.RequeuingBackoffBase, defaultRequeuingBackoffBase))
		if baseErr != nil || base < 0 {
			errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingBackoffBase: want a non-negative duration, got %q", w.RequeuingBackoffBase))
		}
		if m, err := time.ParseDuration(cmp.Or(w.RequeuingBackoffMax, defaultRequeuingBackoffMax)); err != nil || m <= 0 || (baseErr == nil && m < base) {
			errs = append(errs, fmt.Errorf("waitForPodsReady.requeuingBackoffMax: want a positive duration not below the base, got %q", w.RequeuingBackoffMax))
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
		base := wallSeconds(cmp.Or(w.RequeuingBackoffBase, defaultRequeuingBackoffBase), speedup)
		m["requeuingStrategy"] = map[string]any{"backoffBaseSeconds": base,
			"backoffMaxSeconds": max(base, wallSeconds(cmp.Or(w.RequeuingBackoffMax, defaultRequeuingBackoffMax), speedup))}
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

// wallSeconds converts a checked trace-time duration to Kueue's whole wall seconds at speedup,
// rounded, at least 1 (as wall) unless the duration is 0.
func wallSeconds(traceDur string, speedup float64) int32 {
	d, _ := time.ParseDuration(traceDur) // checked by check
	if d == 0 {
		return 0
	}
	return max(1, int32(math.Round(d.Seconds()/speedup)))
}
