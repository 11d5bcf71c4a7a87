package sim

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// TestKueueConfigWaitForPodsReady: Kueue v0.19's waitForPodsReady is on with its defaults unless
// the DisableWaitForPodsReady gate is set; another gate the linked Kueue knows is accepted (and
// leaves waitForPodsReady on), one it does not know is refused.
func TestKueueConfigWaitForPodsReady(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fields  map[string]any
		timeout time.Duration // 0: off
		err     string
	}{
		{"defaults", nil, 30 * time.Minute, ""},
		{"own timeout", map[string]any{"waitForPodsReady": map[string]any{"timeout": "10m"}}, 10 * time.Minute, ""},
		{"gate off", map[string]any{"featureGates": map[string]any{"DisableWaitForPodsReady": true}}, 0, ""},
		{"other gate", map[string]any{"featureGates": map[string]any{"SchedulerLongRequeueInterval": true}}, 30 * time.Minute, ""},
		{"unknown gate", map[string]any{"featureGates": map[string]any{"NoSuchGate": true}}, 0,
			"featureGates: Kueue " + kueuelib.KueueVersion + " has no feature gate NoSuchGate"},
		{"blockAdmission", map[string]any{"waitForPodsReady": map[string]any{"timeout": "10m", "blockAdmission": true}}, 0,
			"waitForPodsReady.blockAdmission: the sim engine does not model it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := KueueConfigFromFields(tc.fields)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o, err := k.options()
			if err != nil {
				t.Fatal(err)
			}
			switch w := o.WaitForPodsReady; {
			case tc.timeout == 0 && w != nil:
				t.Errorf("waitForPodsReady on (%v), want off", w.Timeout)
			case tc.timeout != 0 && (w == nil || w.Timeout.Duration != tc.timeout || w.RecoveryTimeout == nil ||
				w.RecoveryTimeout.Duration != tc.timeout || *w.RequeuingStrategy.BackoffBaseSeconds != 60 ||
				*w.RequeuingStrategy.BackoffMaxSeconds != 3600):
				t.Errorf("waitForPodsReady %+v, want timeout and recovery %v, backoff 60 s to 3600 s", w, tc.timeout)
			}
			// The summary says so, in trace seconds.
			m := kueueMeta(o, nil)
			if m.Version != kueuelib.KueueVersion || m.Clock != results.ClockTrace {
				t.Errorf("summary's Kueue %s on the %s clock, want %s on the trace clock", m.Version, m.Clock, kueuelib.KueueVersion)
			}
			want := (*results.PodsReadyMeta)(nil)
			if tc.timeout != 0 {
				want = &results.PodsReadyMeta{TimeoutSec: tc.timeout.Seconds(), RecoveryTimeoutSec: tc.timeout.Seconds(), BackoffBaseSec: 60, BackoffMaxSec: 3600}
			}
			if !reflect.DeepEqual(m.WaitForPodsReady, want) {
				t.Errorf("summary's waitForPodsReady %+v, want %+v", m.WaitForPodsReady, want)
			}
		})
	}
}

// TestKueueConfigResources: a spec with MIG pools adds the deviceClassMappings that charge
// mig.nvidia.com claims to gpu.memory by the memory counter of gpu.nvidia.com's devices, as `run`
// configures the local cluster's Kueue; a variant's own mappings beside them, or resources
// fields the sim does not model, are refused; a spec without MIG pools adds nothing.
func TestKueueConfigResources(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fields map[string]any
		doc    string
		want   int // mappings
		err    string
	}{
		{"MIG spec", nil, migSpec, 1, ""},
		{"spec without MIG", nil, twoTeams, 0, ""},
		{"variant's own mappings", map[string]any{"resources": map[string]any{"deviceClassMappings": []any{
			map[string]any{"name": "gpu", "deviceClassNames": []any{"gpu.nvidia.com"}}}}}, migSpec, 0,
			"resources.deviceClassMappings is set, but the cluster spec's MIG pools need their own"},
		{"unmodelled resources field", map[string]any{"resources": map[string]any{"excludeResourcePrefixes": []any{"x"}}}, twoTeams, 0,
			"the sim engine models deviceClassMappings and quotaCheckStrategy only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := KueueConfigFromFields(tc.fields)
			if err == nil {
				k, err = k.withSpec(spec(t, tc.doc))
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o, err := k.options()
			if err != nil {
				t.Fatal(err)
			}
			if len(o.DeviceClassMappings) != tc.want {
				t.Fatalf("%d mappings, want %d", len(o.DeviceClassMappings), tc.want)
			}
			if tc.want == 0 {
				return
			}
			m := o.DeviceClassMappings[0]
			if m.Name != "gpu.memory" || len(m.DeviceClassNames) != 1 || m.DeviceClassNames[0] != "mig.nvidia.com" ||
				len(m.Sources) != 1 || m.Sources[0].Counter == nil || m.Sources[0].Counter.Name != "memory" ||
				m.Sources[0].Counter.Driver != "gpu.nvidia.com" {
				t.Errorf("mapping %+v, want mig.nvidia.com charged to gpu.memory by gpu.nvidia.com's memory counter", m)
			}
		})
	}
}
