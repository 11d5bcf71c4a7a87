//go:build !kueue_v0_15 && !kueue_v0_17

package kueuelib

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"sigs.k8s.io/kueue/cmd/experimental/kueue-priority-booster/pkg/config"
	"sigs.k8s.io/kueue/cmd/experimental/kueue-priority-booster/pkg/controller"
)

// parseBooster reads the booster's configuration as its own Load does (its defaults, then the
// document), refusing fields the booster does not have.
func parseBooster(doc map[string]any) (*config.ParsedConfiguration, error) {
	cfg := config.Default()
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("priorityBooster: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("priorityBooster: %w (the kueue-priority-booster's configuration: timeSharing.interval, timeSharing.negativeBoost, workloadSelector, maxWorkloadPriority)", err)
	}
	p, err := config.Parse(cfg)
	if err != nil {
		return nil, fmt.Errorf("priorityBooster: %w", err)
	}
	// The booster treats no interval as off; a variant that runs it wants it on.
	if p.TimeSharingInterval <= 0 || p.TimeSharingInterval%time.Second != 0 {
		return nil, fmt.Errorf("priorityBooster: timeSharing.interval %q: want a whole number of seconds > 0 (30m, 1h)", cfg.TimeSharing.Interval)
	}
	if p.NegativeBoostValue <= 0 {
		return nil, fmt.Errorf("priorityBooster: timeSharing.negativeBoost %d: want > 0 (the boost is its negative)", p.NegativeBoostValue)
	}
	return p, nil
}

// newBooster builds the booster's reconciler over k's Store; it returns its interval too.
func (k *Kueue) newBooster(doc map[string]any) (boosterReconciler, time.Duration, error) {
	p, err := parseBooster(doc)
	if err != nil {
		return nil, 0, err
	}
	return controller.NewPriorityBoostReconciler(boosterView{Client: k.Store, k: k}, discardRecorder{},
		controller.WithTimeSharingInterval(p.TimeSharingInterval), controller.WithNegativeBoostValue(p.NegativeBoostValue),
		controller.WithWorkloadSelector(p.WorkloadSelector), controller.WithMaxWorkloadPriority(p.MaxWorkloadPriority)), p.TimeSharingInterval, nil
}
