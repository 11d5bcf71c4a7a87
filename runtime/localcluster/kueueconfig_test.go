package localcluster

import (
	"strings"
	"testing"
)

// TestKueueConfigLayers: the local cluster's fields, Kueue v0.19's client rate, a variant's fields
// on top (featureGates added to the local ones), and the fields the cluster needs kept.
func TestKueueConfigLayers(t *testing.T) {
	s := &State{Dir: t.TempDir(), Ports: PortsFrom(DefaultPortBase)}
	cfg, err := s.kueueConfig(map[string]any{
		"featureGates":     map[string]any{"DisableWaitForPodsReady": true},
		"waitForPodsReady": map[string]any{"timeout": "30s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if cc := cfg["clientConnection"].(map[string]any); cc["qps"] != float32(300) || cc["burst"] != int32(500) {
		t.Errorf("clientConnection %v, want Kueue v0.19's 300/500", cc)
	}
	gates := cfg["featureGates"].(map[string]any)
	if gates["VisibilityOnDemand"] != false || gates["DisableWaitForPodsReady"] != true {
		t.Errorf("featureGates %v", gates)
	}
	if base := s.baseKueueConfig()["featureGates"].(map[string]any); len(base) != 1 {
		t.Errorf("the base gates were changed in place: %v", base)
	}
	if cfg["waitForPodsReady"] == nil {
		t.Error("the variant's waitForPodsReady is missing")
	}
	if gk := cfg["controller"].(map[string]any)["groupKindConcurrency"].(map[string]any); gk["Workload.kueue.x-k8s.io"] != 10 || gk["Job.batch"] != 5 {
		t.Errorf("groupKindConcurrency %v", gk)
	}
	if _, err := s.kueueConfig(map[string]any{"webhook": map[string]any{}}); err == nil || !strings.Contains(err.Error(), `"webhook" is set by the local cluster`) {
		t.Errorf("webhook override: %v", err)
	}
	if _, err := s.kueueConfig(map[string]any{"featureGates": []string{"x"}}); err == nil {
		t.Error("featureGates of the wrong type accepted")
	}
}
