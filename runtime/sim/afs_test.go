package sim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
)

// sharedQueue is one 8-GPU node under one ClusterQueue that two teams' LocalQueues feed, with
// admission fair sharing on the queue.
const sharedQueue = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: shared}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 192, memory: 2000Gi}
clusterQueues:
- name: shared
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 192, memory: 2000Gi, nvidia.com/gpu: 8}
teams:
- {name: team-a, clusterQueue: shared}
- {name: team-b, clusterQueue: shared}
`

// TestAdmissionFairSharing: a workload of one team holds the node; one workload of each team
// waits for it, the one of the team that did not run queued first. Without admission fair sharing
// the queue is FIFO. With it, the LocalQueue reconciler (run by the sim on the virtual clock)
// samples each team's decayed usage while the first workload runs: team-b's earlier use has
// decayed away, team-a's current one counts, and team-b goes first although it queued last. Each waits
// for Kueue's inadmissible-requeue batch after the quota frees.
func TestAdmissionFairSharing(t *testing.T) {
	ws := []*trace.Workload{
		wl("b1", "team-b", 0, trace.SingleGPUTraining, 100, 8, 1),
		wl("a1", "team-a", 100, trace.SingleGPUTraining, 2000, 8, 1),
		wl("a2", "team-a", 200, trace.SingleGPUTraining, 100, 8, 1),
		wl("b2", "team-b", 300, trace.SingleGPUTraining, 100, 8, 1),
	}
	for _, tc := range []struct {
		name  string
		afs   *config.AdmissionFairSharing
		first string
	}{
		{"fifo", nil, "a2"},
		{"fair", &config.AdmissionFairSharing{UsageHalfLifeTime: metav1.Duration{Duration: 100 * time.Second},
			UsageSamplingInterval: metav1.Duration{Duration: time.Minute}}, "b2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := runWith(t, sharedQueue, func(c *Config) { c.Kueue.AdmissionFairSharing = tc.afs }, ws...)
			if err != nil {
				t.Fatal(err)
			}
			a2, b2 := record(t, d, "a2"), record(t, d, "b2")
			first, second := a2, b2
			if tc.first == "b2" {
				first, second = b2, a2
			}
			// a1 ends at 2100; the first waits for the requeue batch, runs 100 s, and the second
			// waits for the next batch.
			if w1, w2 := 2100.0+requeueBatchSec, 2100.0+requeueBatchSec+100+requeueBatchSec; *first.Admitted != w1 || *second.Admitted != w2 {
				t.Errorf("%s admitted at %g, %s at %g; want %s at %g and the other at %g",
					first.ID, *first.Admitted, second.ID, *second.Admitted, tc.first, w1, w2)
			}
		})
	}
}
