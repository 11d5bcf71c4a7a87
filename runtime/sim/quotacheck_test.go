package sim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// quotaCheckSpec: the ClusterQueue covers cpu and GPUs, not memory, which the pods request.
const quotaCheckSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: quotacheck}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 64, memory: 512Gi}
clusterQueues:
- name: q
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 64, nvidia.com/gpu: 8}
teams:
- {name: a, clusterQueue: q}
`

// TestQuotaCheckStrategy: Kueue checks every resource a Workload requests against its
// ClusterQueue's quota (BlockUndeclared, its default): memory, which the queue does not cover,
// makes the workload inadmissible however much of it the nodes have. With IgnoreUndeclared
// (flavorassigner.IgnoreUndeclaredResources, the QuotaCheckStrategy gate on by default in v0.19)
// the undeclared memory is not checked: admitted at its submission, it runs its 600 s.
func TestQuotaCheckStrategy(t *testing.T) {
	line := eightGPULine("w", "a", "", 60, 600)
	path := filepath.Join(t.TempDir(), "quotacheck.jsonl")
	if err := os.WriteFile(path, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(context.Background(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, strategy := range []string{"", "BlockUndeclared", "IgnoreUndeclared"} {
		t.Run("strategy "+strategy, func(t *testing.T) {
			k, err := KueueConfigFromFields(map[string]any{"resources": map[string]any{"quotaCheckStrategy": strategy}})
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			_, err = Run(context.Background(), Config{Trace: tr, TraceName: "quotacheck.jsonl", Spec: spec(t, quotaCheckSpec), Seed: 1,
				OutDir: out, WallClock: fixedWall(), Kueue: k, MaxTraceSec: 7200})
			if err != nil && !errors.Is(err, replay.ErrIncomplete) {
				t.Fatal(err)
			}
			d, err := results.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			r := record(t, d, "w")
			if strategy == "IgnoreUndeclared" {
				at(t, "w", "admitted", r.Admitted, 60)
				if jct, ok := r.JCT(); !ok || jct != 600 || r.State != results.StateSucceeded {
					t.Errorf("JCT %v (%v), state %s; want 600 s, succeeded", jct, ok, r.State)
				}
				return
			}
			if r.Admitted != nil || r.QuotaReserved != nil || r.State != results.StatePending {
				t.Errorf("admitted %v, quota %v, state %s; want pending for good: the queue covers no memory", r.Admitted, r.QuotaReserved, r.State)
			}
		})
	}
	if _, err := KueueConfigFromFields(map[string]any{"resources": map[string]any{"quotaCheckStrategy": "Lenient"}}); err == nil || !strings.Contains(err.Error(), `"Lenient": want BlockUndeclared or IgnoreUndeclared`) {
		t.Errorf("bad strategy: error %v", err)
	}
}
