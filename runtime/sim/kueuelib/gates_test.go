package kueuelib

import (
	"strings"
	"testing"
	"time"
)

// TestFeatureGates sets a gate the sim's Kueue reads (SchedulerLongRequeueInterval: the requeue
// batch period of pkg/cache/queue getRequeueBatchPeriod, 1 s, 10 s with the gate), refuses an
// unknown one and another run's different gates, and puts the gate back on the last release.
func TestFeatureGates(t *testing.T) {
	if requeueBatchPeriod() != time.Second {
		t.Fatalf("batch period %s before, want 1s", requeueBatchPeriod())
	}
	on := map[string]bool{"SchedulerLongRequeueInterval": true}
	release, err := SetFeatureGates(on)
	if err != nil {
		t.Fatal(err)
	}
	if requeueBatchPeriod() != 10*time.Second {
		t.Errorf("batch period %s with the gate, want 10s", requeueBatchPeriod())
	}
	if _, err := SetFeatureGates(nil); err == nil || !strings.Contains(err.Error(), "process-wide") {
		t.Errorf("a second run with other gates: %v, want refused", err)
	}
	again, err := SetFeatureGates(on)
	if err != nil {
		t.Errorf("a second run with the same gates: %v", err)
	} else {
		again()
	}
	release()
	if requeueBatchPeriod() != time.Second {
		t.Errorf("batch period %s after the release, want 1s", requeueBatchPeriod())
	}
	if _, err := SetFeatureGates(map[string]bool{"DynamicResourceAllocation": true, "NoSuchGate": false}); err == nil ||
		!strings.Contains(err.Error(), "Kueue v0.19.2 has no feature gate DynamicResourceAllocation, NoSuchGate (DynamicResourceAllocation was renamed KueueDRAIntegration in v0.18.0") {
		t.Errorf("unknown gates: %v", err)
	}
}
