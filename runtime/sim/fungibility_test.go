package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// fungibilitySpec: team a's ClusterQueue has 8 H100s of its own and no A100s; team b's has 8 A100s
// it does not use, lent through their cohort. a searches every flavor (both policies
// TryNextFlavor) with the preference under test.
const fungibilitySpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: fungibility}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 64, memory: 512Gi}
- {name: a100, gpuFamily: A100-SXM, count: 1, gpusPerNode: 8, cpu: 64, memory: 512Gi}
cohorts:
- name: c
clusterQueues:
- name: a-cq
  cohort: c
  preemption: {withinClusterQueue: LowerPriority}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PREFERENCE}
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}
  - flavor: a100-sxm
    resources: {cpu: 0, memory: 0, nvidia.com/gpu: 0}
- name: b-cq
  cohort: c
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 0, memory: 0, nvidia.com/gpu: 0}
  - flavor: a100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}
teams:
- {name: a, clusterQueue: a-cq}
- {name: b, clusterQueue: b-cq}
`

// TestFlavorFungibilityPreference: an eco workload of team a holds all 8 H100s when a
// performance workload of a asks for 8 GPUs. On H100 it needs preemption (within its queue, no
// borrowing); on A100 it fits by borrowing b's unused quota. Kueue's flavorassigner.isPreferred
// (v0.19.2) ranks preemption mode first under BorrowingOverPreemption (fit beats preempt: the
// A100s, nothing preempted) and the borrowing level first under PreemptionOverBorrowing (no
// borrowing beats borrowing: the H100s, the eco workload preempted at 60 s).
func TestFlavorFungibilityPreference(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fungibility.jsonl")
	if err := os.WriteFile(path, []byte(eightGPULine("low", "a", "eco", 0, 3600)+"\n"+eightGPULine("high", "a", "performance", 60, 600)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(context.Background(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		preference, highFlavor string
		lowPreempted           bool
	}{
		{"BorrowingOverPreemption", "a100-sxm", false},
		{"PreemptionOverBorrowing", "h100-sxm", true},
	} {
		t.Run(tc.preference, func(t *testing.T) {
			out := t.TempDir()
			s := spec(t, strings.Replace(fungibilitySpec, "PREFERENCE", tc.preference, 1))
			if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "fungibility.jsonl", Spec: s, Seed: 1, OutDir: out, WallClock: fixedWall()}); err != nil {
				t.Fatal(err)
			}
			d, err := results.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			high, low := record(t, d, "high"), record(t, d, "low")
			at(t, "high", "admitted", high.Admitted, 60)
			if got := high.Flavors["main"]; got != tc.highFlavor {
				t.Errorf("high admitted on %v, want %s", high.Flavors, tc.highFlavor)
			}
			if preempted := len(low.Preemptions) > 0; preempted != tc.lowPreempted {
				t.Errorf("low preempted %v (%v), want %v", preempted, low.Preemptions, tc.lowPreempted)
			}
			for _, r := range []results.Record{high, low} {
				if r.State != results.StateSucceeded {
					t.Errorf("%s: %s (%s)", r.ID, r.State, r.Error)
				}
			}
		})
	}
}
