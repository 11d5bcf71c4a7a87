package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/cluster"
)

// TestCarryKueue: a run on another cluster accepts Kueue v0.19.x, says which version runs, carries
// its configuration into the run (the runner's timers, the summary's account), and refuses any
// other version naming the supported ones.
func TestCarryKueue(t *testing.T) {
	k := &cluster.RemoteKueue{ConfigSource: "ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml",
		Config: &cluster.KueueSettings{ClientQPS: 300, ClientBurst: 500, WaitForPodsReady: &cluster.RemoteWaitForPodsReady{
			Timeout: 30 * time.Minute, RecoveryTimeout: 30 * time.Minute, BackoffBase: time.Minute, BackoffMax: time.Hour, Default: true}}}
	var out bytes.Buffer
	r := &remote{}
	if err := carryKueue(r, k, "v0.19.2", "its kueue_build_info", &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Kueue v0.19.2 (its kueue_build_info)", "clientConnection qps 300 burst 500", "waitForPodsReady timeout 30m0s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if tm := r.timers; tm.PodsReadyTimeout != 1800 || tm.RecoveryTimeout != 1800 || tm.BackoffBase != 60 || tm.BackoffMax != 3600 {
		t.Errorf("timers %+v", tm)
	}
	if m := r.meta; m == nil || m.Version != "v0.19.2" || m.ClientQPS != 300 || m.ClientBurst != 500 || m.WaitForPodsReady == nil || m.WaitForPodsReady.TimeoutSec != 1800 {
		t.Errorf("summary's account %+v", m)
	}
	err := carryKueue(&remote{}, k, "v0.18.3", "image registry.k8s.io/kueue/kueue:v0.18.3", &out)
	if err == nil || !strings.Contains(err.Error(), "Kueue v0.18.3 is running (image registry.k8s.io/kueue/kueue:v0.18.3); kueuelab supports Kueue v0.19.x") {
		t.Errorf("v0.18.3: %v", err)
	}
	// No configuration found: the run goes on, without timers, and says so.
	out.Reset()
	r = &remote{}
	if err := carryKueue(r, &cluster.RemoteKueue{}, "v0.19.0", "its kueue_build_info", &out); err != nil || r.timers.PodsReadyTimeout != 0 ||
		!strings.Contains(out.String(), "configuration was not found") {
		t.Errorf("no configuration: %v, timers %+v\n%s", err, r.timers, out.String())
	}
}
