package sim

import (
	"fmt"
	"testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// TestPodsReadyTimeoutAndBackoff: Kueue v0.19's waitForPodsReady, on by default, on a workload
// that quota admits but no node can hold. Two 1-GPU pods spread over both 8-GPU nodes
// (kube-scheduler's LeastAllocated), so the 8-GPU big one, admitted at 2, waits for a node.
// Kueue's defaults (Kueue's documentation of waitForPodsReady): evicted 30 min after admission
// (PodsReadyTimeout), requeued when the backoff ends — 60 s, doubling, counted from the eviction
// and kept in status.requeueState.requeueAt at the API's one-second resolution — and admitted
// again at once (its quota is free). So: evicted at 1802 and 3662, requeued at 1862 and 3782;
// s1 ends at 5000, big's pod gets its node then, is ready before the third timeout (5582) and
// runs its 100 s.
func TestPodsReadyTimeoutAndBackoff(t *testing.T) {
	d, err := run(t, fragmented, Timing{},
		wl("s1", "team-a", 0, trace.SingleGPUTraining, 5000, 1, 1),
		wl("s2", "team-a", 1, trace.SingleGPUTraining, 6000, 1, 1),
		wl("big", "team-a", 2, trace.SingleGPUTraining, 100, 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	big := record(t, d, "big")
	const timeout, base = 1800.0, 60.0
	want := fmt.Sprint([]results.Incident{{T: 2 + timeout, Reason: kueue.WorkloadEvictedByPodsReadyTimeout},
		{T: 2 + timeout + base + timeout, Reason: kueue.WorkloadEvictedByPodsReadyTimeout}})
	if got := fmt.Sprint(big.Evictions); got != want {
		t.Errorf("big evictions %s, want %s", got, want)
	}
	var requeued, admitted []float64
	for _, e := range d.Events {
		if e.Workload != "big" {
			continue
		}
		switch e.Type {
		case results.EvRequeued:
			requeued = append(requeued, e.T)
		case results.EvAdmitted:
			admitted = append(admitted, e.T)
		}
	}
	if got, want := fmt.Sprint(requeued), fmt.Sprint([]float64{1802 + base, 3662 + 2*base}); got != want {
		t.Errorf("big requeued at %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(admitted), fmt.Sprint([]float64{2, 1862, 3782}); got != want {
		t.Errorf("big admitted at %s, want %s", got, want)
	}
	if big.State != results.StateSucceeded || *big.FirstPodRunning != 5000 || *big.Finished != 5100 {
		t.Errorf("big %s, running at %v, finished at %v; want Succeeded, 5000, 5100", big.State, *big.FirstPodRunning, *big.Finished)
	}
}
