package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// stallTrace: a one-GPU job that runs for 10 trace minutes, and an eight-GPU job submitted at
// 60 s that Kueue admits when the first is done (the ClusterQueue has 8 GPUs of quota).
const stallTrace = `{"type":"workload","schemaVersion":"v2","workloadId":"fits","submitTimeOffsetSec":0,"namespace":"%[1]s","workloadType":"single_gpu_training","durationSec":600,"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"sharedIntensityProfile":{"cpuUtilization":0.5,"gpuUtilization":0.5,"memoryIntensity":0.5,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.3},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","nvidia.com/gpu":"1"}}],"intentClass":"standard"}
{"type":"workload","schemaVersion":"v2","workloadId":"over-quota","submitTimeOffsetSec":60,"namespace":"%[1]s","workloadType":"single_gpu_training","durationSec":3600,"workloadClass":{"cpu":"cpu.mixed","gpu":"gpu.compute_bound"},"sharedIntensityProfile":{"cpuUtilization":0.5,"gpuUtilization":0.5,"memoryIntensity":0.5,"ioIntensity":0.1,"cpuFeedIntensityGpu":0.3},"pods":[{"role":"main","replicas":1,"requests":{"cpu":"8","nvidia.com/gpu":"8"}}],"intentClass":"standard"}
`

// TestStallEndsTheRun replays a trace whose second workload Kueue admits but whose pod the
// namespace's ResourceQuota (4 GPUs, where Kueue's ClusterQueue grants 8) forbids: the Job
// controller's creates are refused, so the runner's pods hold, which waits for the admitted
// Workload's pods, is never released and the trace clock stands still. A stall timeout shorter
// than the hold's limit must end the run as a stall that names the workload and the hold, with
// every workload in exactly one recorded state, and leave the cluster clean for the next test.
func TestStallEndsTheRun(t *testing.T) {
	const team = "stall"
	// Shorter than the pods hold's limit (simclock.DefaultMaxHold), so the hold is still active
	// when the stall ends the run; longer than any step of the first workload takes here.
	const stallTimeout = 12 * time.Second
	if stallTimeout >= simclock.DefaultMaxHold {
		t.Fatalf("stall timeout %s must be shorter than the hold limit %s", stallTimeout, simclock.DefaultMaxHold)
	}
	path := filepath.Join(t.TempDir(), "stall.jsonl")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(stallTrace, team)), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	specPath := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(specPath, []byte(runSpec(team, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := rcluster.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "gpus"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"requests.nvidia.com/gpu": resource.MustParse("4")}}}
	setup(t, team, quota)
	eventually(t, "the ResourceQuota is enforced", func(ctx context.Context) (bool, string, error) {
		var q corev1.ResourceQuota
		if err := shared.client.Get(ctx, client.ObjectKeyFromObject(quota), &q); err != nil {
			return false, "", err
		}
		_, ok := q.Status.Hard["requests.nvidia.com/gpu"]
		return ok, fmt.Sprintf("status %v", q.Status), nil
	})

	t0 := time.Now()
	res, out, err := runInProcess(t, tr, path, spec, 5*time.Minute, func(c *runner.Config) { c.StallTimeout = stallTimeout })
	t.Logf("run ended after %s: %v", time.Since(t0).Round(time.Second), err)
	if err == nil || !errors.Is(err, replay.ErrIncomplete) {
		t.Fatalf("run error %v; want a stall (replay.ErrIncomplete)", err)
	}
	for _, want := range []string{"stalled: no workload changed state", "admitted: over-quota", "clock held by", "pods:1", "1 of 2 workloads did not finish"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the stall's error does not say %q: %v", want, err)
		}
	}
	if res == nil {
		t.Fatal("no result")
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatalf("results do not parse: %v", err)
	}
	if !strings.HasPrefix(d.Summary.Incomplete, "stalled") {
		t.Errorf("summary.json incomplete %q, want the stall", d.Summary.Incomplete)
	}
	want := map[string]string{"fits": results.StateSucceeded, "over-quota": results.StateAdmitted}
	seen := map[string]int{}
	for _, r := range d.Workloads {
		seen[r.ID]++
		if r.State != want[r.ID] {
			t.Errorf("workload %s recorded %q, want %q", r.ID, r.State, want[r.ID])
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("workload %s is in workloads.csv %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("workloads.csv has %v, want %v", seen, want)
	}
	states := 0
	for st, n := range d.Summary.States {
		states += n
		if n > 0 && st != results.StateSucceeded && st != results.StateAdmitted {
			t.Errorf("summary.json counts %d %s", n, st)
		}
	}
	if states != len(tr.Workloads) {
		t.Errorf("summary.json states %v count %d workloads, the trace has %d", d.Summary.States, states, len(tr.Workloads))
	}

	// The runner deleted what it submitted: once the quota goes too, nothing of the run holds
	// Kueue quota or a node.
	if err := shared.client.Delete(t.Context(), quota); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the run's workloads and pods are gone and its ClusterQueue holds no quota", func(ctx context.Context) (bool, string, error) {
		var wls kueue.WorkloadList
		if err := shared.client.List(ctx, &wls, client.InNamespace(team)); err != nil {
			return false, "", err
		}
		var pods corev1.PodList
		if err := shared.client.List(ctx, &pods, client.InNamespace(team)); err != nil {
			return false, "", err
		}
		var cq kueue.ClusterQueue
		if err := shared.client.Get(ctx, client.ObjectKey{Name: team + "-cq"}, &cq); err != nil {
			return false, "", err
		}
		return len(wls.Items) == 0 && len(pods.Items) == 0 && cq.Status.ReservingWorkloads == 0,
			fmt.Sprintf("%d workloads, %d pods, %d reserving", len(wls.Items), len(pods.Items), cq.Status.ReservingWorkloads), nil
	})
}
