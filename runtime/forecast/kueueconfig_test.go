package forecast

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// A cluster's Configuration, cut to what a forecast replays (kueuewl's ReplayDocument, as a
// snapshot writes it) and read back as the sim's configuration: the sections it sets, the
// manager's --feature-gates over the document's, nothing for the sections it leaves to the
// release's defaults, and waitForPodsReady off where the cluster has it off.
func TestClusterKueueConfigReachesTheSim(t *testing.T) {
	for _, tc := range []struct {
		name, doc   string
		flags       map[string]bool
		defaultsOn  bool // the cluster's release turns waitForPodsReady on by default (v0.19)
		wantLeftOut []string
		check       func(t *testing.T, k sim.KueueConfig)
	}{
		{name: "fair sharing, a timeout, gates", doc: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanInitialShare]
waitForPodsReady:
  timeout: 10m
clientConnection: {qps: 50, burst: 100}
featureGates: {SchedulerLongRequeueInterval: true, PriorityBoost: true}
resources:
  excludeResourcePrefixes: [example.com/]
  quotaCheckStrategy: BlockUndeclared
`, flags: map[string]bool{"PriorityBoost": false}, defaultsOn: true,
			wantLeftOut: []string{"only deviceClassMappings and quotaCheckStrategy are replayed, not excludeResourcePrefixes"},
			check: func(t *testing.T, k sim.KueueConfig) {
				if k.FairSharing == nil || len(k.FairSharing.PreemptionStrategies) != 1 || k.FairSharing.PreemptionStrategies[0] != "LessThanInitialShare" {
					t.Errorf("fairSharing %+v", k.FairSharing)
				}
				if w := k.WaitForPodsReady; w == nil || w.Timeout.Duration != 10*time.Minute {
					t.Errorf("waitForPodsReady %+v", w)
				}
				if cc := k.ClientConnection; cc == nil || *cc.QPS != 50 || *cc.Burst != 100 {
					t.Errorf("clientConnection %+v", cc)
				}
				if g := k.FeatureGates; !g["SchedulerLongRequeueInterval"] || g["PriorityBoost"] || len(g) != 2 {
					t.Errorf("feature gates %v: want the flag's PriorityBoost=false over the document's", g)
				}
				if k.Resources != nil || k.QuotaCheckStrategy != "BlockUndeclared" {
					t.Errorf("resources %+v, quotaCheckStrategy %q: want the strategy alone", k.Resources, k.QuotaCheckStrategy)
				}
			}},
		{name: "blockAdmission is left out, the rest of the section kept", doc: `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady: {timeout: 5m, blockAdmission: true}
`, defaultsOn: true, wantLeftOut: []string{"waitForPodsReady.blockAdmission: true is not replayed"},
			check: func(t *testing.T, k sim.KueueConfig) {
				if w := k.WaitForPodsReady; w == nil || w.Timeout.Duration != 5*time.Minute || w.BlockAdmission != nil {
					t.Errorf("waitForPodsReady %+v", w)
				}
			}},
		{name: "v1beta1 without waitForPodsReady on a v0.19 cluster: off", doc: `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
manageJobsWithoutQueueName: true
`, defaultsOn: true,
			check: func(t *testing.T, k sim.KueueConfig) {
				if k.FairSharing != nil || k.WaitForPodsReady != nil || k.ClientConnection != nil || k.Resources != nil ||
					len(k.FeatureGates) != 1 || !k.FeatureGates[kueuewl.DisableWaitForPodsReady] {
					t.Errorf("replayed %+v: want waitForPodsReady turned off by its gate, nothing else", k)
				}
			}},
		{name: "v1beta1 without waitForPodsReady on a v0.18 cluster: its default", doc: `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
`,
			check: func(t *testing.T, k sim.KueueConfig) {
				if k.WaitForPodsReady != nil || len(k.FeatureGates) != 0 {
					t.Errorf("replayed %+v: want nothing (off is v0.18's default)", k)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kueuewl.ParseConfiguration([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			doc, left, err := c.ReplayDocument(tc.flags, tc.defaultsOn)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != len(tc.wantLeftOut) {
				t.Errorf("left out %q, want %q", left, tc.wantLeftOut)
			}
			for i := range min(len(left), len(tc.wantLeftOut)) {
				if !strings.Contains(left[i], tc.wantLeftOut[i]) {
					t.Errorf("left out %q, want %q", left[i], tc.wantLeftOut[i])
				}
			}
			path := filepath.Join(t.TempDir(), "kueue-config.yaml")
			if err := os.WriteFile(path, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			k, err := loadKueueConfig(path)
			if err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			tc.check(t, k)
		})
	}
}
