package forecast

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// A cluster's Configuration, cut to what a forecast replays (kueuewl's ReplayDocument, as a
// snapshot writes it) and read back as the sim's configuration: the sections it sets, the
// manager's --feature-gates over the document's, nothing for the sections it leaves to the
// release's defaults.
func TestClusterKueueConfigReachesTheSim(t *testing.T) {
	for _, tc := range []struct {
		name, doc   string
		flags       map[string]bool
		check       func(t *testing.T, doc string)
		wantLeftOut string
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
`, flags: map[string]bool{"PriorityBoost": false},
			wantLeftOut: "only deviceClassMappings and quotaCheckStrategy are replayed, not excludeResourcePrefixes"},
		{name: "v1beta1, sections left to the release", doc: `apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
manageJobsWithoutQueueName: true
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kueuewl.ParseConfiguration([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			doc, left, err := c.ReplayDocument(tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(left, "; "); (tc.wantLeftOut == "") != (got == "") || !strings.Contains(got, tc.wantLeftOut) {
				t.Errorf("left out %q, want %q", got, tc.wantLeftOut)
			}
			path := filepath.Join(t.TempDir(), "kueue-config.yaml")
			if err := os.WriteFile(path, doc, 0o644); err != nil {
				t.Fatal(err)
			}
			k, err := loadKueueConfig(path)
			if err != nil {
				t.Fatalf("%v\n%s", err, doc)
			}
			if tc.flags == nil {
				if k.FairSharing != nil || k.WaitForPodsReady != nil || k.ClientConnection != nil || len(k.FeatureGates) != 0 || k.Resources != nil {
					t.Errorf("a Configuration that sets nothing replayed gave %+v", k)
				}
				return
			}
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
			if k.Resources != nil {
				t.Errorf("resources %+v: excludeResourcePrefixes is not replayed", k.Resources)
			}
		})
	}
}
