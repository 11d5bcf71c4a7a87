package experiment

import (
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/results"
)

var v19 = kueuever.MustLookup("v0.19.2")

// TestKueueDefaultsInTraceTime: a variant that leaves waitForPodsReady to Kueue v0.19 (on by
// default) gets Kueue's documented defaults (timeout 30 min, recovery = timeout,
// backoff 60 s doubling to 3,600 s, blockAdmission false, requeue timestamp Eviction) written into
// Kueue's Configuration as the trace durations they are, since the local Kueue runs on the trace
// clock; a variant's own settings stay as written; enable: false turns Kueue's default off.
func TestKueueDefaultsInTraceTime(t *testing.T) {
	var none *KueueConfig
	// Before v0.19 Kueue's Configuration leaves waitForPodsReady off.
	if f := none.WithKueueDefaults(kueuever.MustLookup("v0.18.3")).Fields(); f["waitForPodsReady"] != nil || f["featureGates"] != nil {
		t.Errorf("v0.18.3 defaults: %v, want no waitForPodsReady", f)
	}
	d := none.WithKueueDefaults(v19)
	w := d.Fields()["waitForPodsReady"].(map[string]any)
	rs := w["requeuingStrategy"].(map[string]any)
	if w["timeout"] != "30m0s" || w["recoveryTimeout"] != "30m0s" || w["blockAdmission"] != false ||
		rs["backoffBaseSeconds"] != int32(60) || rs["backoffMaxSeconds"] != int32(3600) || rs["timestamp"] != "Eviction" {
		t.Errorf("defaults: %v", w)
	}
	if tm := d.Timers(); tm.PodsReadyTimeout != 1800 || tm.RecoveryTimeout != 1800 || tm.BackoffBase != 60 || tm.BackoffMax != 3600 {
		t.Errorf("timers %+v", tm)
	}
	if m := d.Meta(); m.Clock != results.ClockTrace || m.WaitForPodsReady == nil || m.WaitForPodsReady.BackoffBaseSec != 60 {
		t.Errorf("meta %+v", m)
	}
	own := &KueueConfig{WaitForPodsReady: &WaitForPodsReady{Enable: true, Timeout: "10m"}}
	if f := own.WithKueueDefaults(v19).Fields()["waitForPodsReady"].(map[string]any); f["timeout"] != "10m0s" ||
		f["requeuingStrategy"].(map[string]any)["backoffBaseSeconds"] != int32(60) {
		t.Errorf("the variant's settings changed: %v", f)
	}
	// Kueue takes the backoff in whole seconds: a fraction is refused, named.
	frac := &KueueConfig{WaitForPodsReady: &WaitForPodsReady{Enable: true, Timeout: "10m",
		RequeuingStrategy: &RequeuingStrategy{BackoffBase: "1500ms"}}}
	if err := frac.check(); err == nil || !strings.Contains(err.Error(), "backoffBaseSeconds: Kueue takes whole seconds, got 1.5s") {
		t.Errorf("err = %v, want the fractional backoff named", err)
	}
	// Fair sharing alone: Kueue's waitForPodsReady defaults come with it.
	fs := (&KueueConfig{FairSharing: &KueueFairSharing{Enable: true}}).WithKueueDefaults(v19).Fields()
	if fs["fairSharing"] == nil || fs["waitForPodsReady"] == nil {
		t.Errorf("fields %v", fs)
	}
	off := &KueueConfig{WaitForPodsReady: &WaitForPodsReady{Enable: false}}
	f := off.WithKueueDefaults(v19).Fields()
	if g, _ := f["featureGates"].(map[string]any); g["DisableWaitForPodsReady"] != true || f["waitForPodsReady"] != nil {
		t.Errorf("enable: false: fields %v", f)
	}
	if tm := off.WithKueueDefaults(v19).Timers(); tm.PodsReadyTimeout != 0 {
		t.Errorf("enable: false: timers %+v", tm)
	}
	if off.Empty() {
		t.Error("enable: false changes Kueue v0.19's configuration: not empty")
	}
	// Without WithKueueDefaults (the sim engine's path) nothing is added.
	if len(none.Fields()) != 0 || len(off.Fields()) != 0 {
		t.Errorf("fields without defaults: %v %v", none.Fields(), off.Fields())
	}
}
