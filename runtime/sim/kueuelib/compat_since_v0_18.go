//go:build !kueue_v0_15 && !kueue_v0_17

package kueuelib

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/kueue/pkg/scheduler"
)

// discardRecorder drops Kueue's Kubernetes events (events.EventRecorder, from v0.18); the sim
// records its own.
type discardRecorder struct{}

var _ events.EventRecorder = discardRecorder{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
}

// quotaCheckOptions are the scheduler's options for Configuration.resources.quotaCheckStrategy
// s ("" for Kueue's default), checked as Kueue's configuration validation checks it. Kueue's
// flavor assigner applies it only with its QuotaCheckStrategy gate on, as here.
func quotaCheckOptions(s string) ([]scheduler.Option, error) {
	switch config.QuotaCheckStrategy(s) {
	case "":
		return nil, nil
	case config.QuotaCheckBlockUndeclared, config.QuotaCheckIgnoreUndeclared:
		return []scheduler.Option{scheduler.WithQuotaCheckStrategy(config.QuotaCheckStrategy(s))}, nil
	}
	return nil, fmt.Errorf("resources.quotaCheckStrategy: %q: want %s or %s", s, config.QuotaCheckBlockUndeclared, config.QuotaCheckIgnoreUndeclared)
}
