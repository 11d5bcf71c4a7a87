package experiment

import (
	"testing"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// TestKueueDefaultsInTraceTime: a variant that leaves waitForPodsReady to Kueue v0.19 (on by
// default) gets Kueue's defaults as trace durations, scaled like its own settings and tracked by
// the runner; a numeric speedup at which a default cannot be exact lowers the timer scale instead
// of refusing the run; enable: false turns Kueue's default off.
func TestKueueDefaultsInTraceTime(t *testing.T) {
	var none *KueueConfig
	d := none.WithKueueDefaults()
	for _, tc := range []struct {
		speedup results.Speedup
		want    float64
	}{{0, 60}, {1000, 60}, {60, 60}, {30, 30}, {1, 1}} {
		got, err := d.Scale(tc.speedup)
		if err != nil || got != tc.want {
			t.Errorf("speedup %g: scale %g, %v; want %g", float64(tc.speedup), got, err, tc.want)
		}
	}
	w := d.Fields(60)["waitForPodsReady"].(map[string]any)
	rs := w["requeuingStrategy"].(map[string]any)
	// The backoff at scale 12 (defaultBackoffMaxScale): 5 s of wall time outlasts the holds at the
	// eviction and Kueue's requeue batch a second later.
	if w["timeout"] != "30s" || w["recoveryTimeout"] != "30s" || w["blockAdmission"] != false ||
		rs["backoffBaseSeconds"] != int32(5) || rs["backoffMaxSeconds"] != int32(300) || rs["timestamp"] != "Eviction" {
		t.Errorf("defaults at scale 60: %v", w)
	}
	if tm := d.Timers(60); tm.PodsReadyTimeout != 1800 || tm.RecoveryTimeout != 1800 || tm.BackoffBase != 60 || tm.BackoffMax != 3600 ||
		tm.Scale != 60 || tm.BackoffScale != 12 {
		t.Errorf("timers %+v", tm)
	}
	if m := d.Meta(60); m.TimerScale != 60 || m.BackoffTimerScale != 12 || m.WaitForPodsReady == nil || m.WaitForPodsReady.BackoffBaseSec != 60 {
		t.Errorf("meta %+v", m)
	}
	// Below the cap the backoff follows the run's scale.
	if rs := d.Fields(10)["waitForPodsReady"].(map[string]any)["requeuingStrategy"].(map[string]any); rs["backoffBaseSeconds"] != int32(6) || rs["backoffMaxSeconds"] != int32(360) {
		t.Errorf("defaults at scale 10: %v", rs)
	}
	// The variant's own settings stay as they were, refused where they cannot be exact.
	own := &KueueConfig{WaitForPodsReady: &WaitForPodsReady{Enable: true, Timeout: "10m"}}
	if _, err := own.WithKueueDefaults().Scale(1000); err == nil {
		t.Error("a variant's backoff of 60 s at speedup 1000 must still be refused")
	}
	if f := own.WithKueueDefaults().Fields(60)["waitForPodsReady"].(map[string]any); f["timeout"] != "10s" ||
		f["requeuingStrategy"].(map[string]any)["backoffBaseSeconds"] != int32(1) {
		t.Errorf("the variant's settings changed: %v", f)
	}
	if tm := own.WithKueueDefaults().Timers(60); tm.BackoffScale != 0 {
		t.Errorf("the variant's backoff got its own scale: %+v", tm)
	}
	// Fair sharing alone: Kueue's waitForPodsReady defaults come with it.
	fs := (&KueueConfig{FairSharing: &KueueFairSharing{Enable: true}}).WithKueueDefaults().Fields(60)
	if fs["fairSharing"] == nil || fs["waitForPodsReady"] == nil {
		t.Errorf("fields %v", fs)
	}
	off := &KueueConfig{WaitForPodsReady: &WaitForPodsReady{Enable: false}}
	f := off.WithKueueDefaults().Fields(1000)
	if g, _ := f["featureGates"].(map[string]any); g["DisableWaitForPodsReady"] != true || f["waitForPodsReady"] != nil {
		t.Errorf("enable: false: fields %v", f)
	}
	if tm := off.WithKueueDefaults().Timers(1000); tm.PodsReadyTimeout != 0 {
		t.Errorf("enable: false: timers %+v", tm)
	}
	if off.Empty() {
		t.Error("enable: false changes Kueue v0.19's configuration: not empty")
	}
	// Without WithKueueDefaults (the sim engine's path) nothing is added.
	if len(none.Fields(1)) != 0 || len(off.Fields(1)) != 0 {
		t.Errorf("fields without defaults: %v %v", none.Fields(1), off.Fields(1))
	}
}
