//go:build !kueue_v0_15 && !kueue_v0_17

package kueuelib

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// discardRecorder drops Kueue's Kubernetes events (events.EventRecorder, from v0.18); the sim
// records its own.
type discardRecorder struct{}

var _ events.EventRecorder = discardRecorder{}

func (discardRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {
}
