package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// boosterSpec: one ClusterQueue owns one 8-GPU node and preempts lower priorities within itself.
const boosterSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: booster}
nodePools:
- {name: h100, gpuFamily: H100-SXM, count: 1, gpusPerNode: 8, cpu: 64, memory: 512Gi}
clusterQueues:
- name: q
  preemption: {withinClusterQueue: LowerPriority}
  quotas:
  - flavor: h100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 8}
teams:
- {name: a, clusterQueue: q}
`

// TestPriorityBooster: long (3,600 s of work) holds the node from 0; short (600 s), of the same
// priority, arrives at 60 and finds no room: Kueue parks it, and brings it back on its 1 s
// inadmissible-requeue batch after the next change (v0.17 on). Under LowerPriority a
// same-priority workload never preempts, so without the booster short waits for long's end:
// admitted at 3,600 + 1. Kueue's kueue-priority-booster with a 30-minute time-sharing interval
// boosts long by −100,000 once it has been admitted for 1,800 s (computeBoost); its effective
// priority is then below short's, which preempts it: short admitted at 1,800 + 1, done 600 s
// later, when long is admitted again (+ 1) and starts over (it took no checkpoint): done at
// 2,401 + 1 + 3,600 = 6,002.
func TestPriorityBooster(t *testing.T) {
	_, tr := testutil.WriteTrace(t, eightGPULine("long", "a", "standard", 0, 3600), eightGPULine("short", "a", "standard", 60, 600))
	booster := map[string]any{"timeSharing": map[string]any{"interval": "30m", "negativeBoost": 100000}}
	for _, tc := range []struct {
		name                        string
		kueue                       KueueConfig
		shortAdmitted, longFinished float64
		longPreempted               bool
	}{
		{"no booster", KueueConfig{}, 3601, 3600, false},
		{"booster, 30m", KueueConfig{PriorityBooster: booster, FeatureGates: map[string]bool{"PriorityBoost": true}}, 1801, 6002, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "booster", Spec: spec(t, boosterSpec), Seed: 1, OutDir: out, WallClock: fixedWall(), Kueue: tc.kueue}); err != nil {
				t.Fatal(err)
			}
			d, err := results.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			short, long := record(t, d, "short"), record(t, d, "long")
			at(t, "short", "admitted", short.Admitted, tc.shortAdmitted)
			at(t, "long", "finished", long.Finished, tc.longFinished)
			if preempted := len(long.Preemptions) > 0; preempted != tc.longPreempted {
				t.Errorf("long preempted %v (%v), want %v", preempted, long.Preemptions, tc.longPreempted)
			}
		})
	}
	// The booster reads the wall clock; its decisions must not: two runs write the same events.
	var logs [2][]byte
	for i := range logs {
		out := t.TempDir()
		k := KueueConfig{PriorityBooster: booster, FeatureGates: map[string]bool{"PriorityBoost": true}}
		if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "booster", Spec: spec(t, boosterSpec), Seed: 1, OutDir: out, WallClock: fixedWall(), Kueue: k}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "events.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = b
	}
	if !bytes.Equal(logs[0], logs[1]) {
		t.Error("two runs with the booster wrote different events")
	}
	for _, bad := range []map[string]any{
		{"timeSharing": map[string]any{"negativeBoost": 5}},
		{"timeSharing": map[string]any{"interval": "90.5s"}},
		{"timeSharing": map[string]any{"interval": "1h", "negativeBoost": -5}},
	} {
		if err := CheckKueueConfig(KueueConfig{PriorityBooster: bad, FeatureGates: map[string]bool{"PriorityBoost": true}}); err == nil {
			t.Errorf("booster configuration %v accepted: no interval, a fraction of a second or a raise", bad)
		}
	}
	if err := CheckKueueConfig(KueueConfig{PriorityBooster: booster}); err == nil {
		t.Error("a booster without the PriorityBoost gate was accepted: Kueue would ignore its annotation")
	}
	if err := CheckKueueConfig(KueueConfig{PriorityBooster: map[string]any{"timeSharing": map[string]any{"intervl": "1h"}}, FeatureGates: map[string]bool{"PriorityBoost": true}}); err == nil {
		t.Error("a booster configuration with an unknown field was accepted")
	}
}

// TestBoosterTurnsWithoutEnd: two same-priority jobs of 3,600 s without checkpoints under a
// 30-minute booster take turns for ever, each preempted before it can finish and starting over.
// The run ends at the first preemption more than a week (Stall: ten times 3,600 s is less) into
// the span without progress, which begins at the first event after short's creation at 60 s, by
// long's first preemption at 1,801 s: the turns come every 1,801 s (the interval and Kueue's 1 s
// requeue batch).
func TestBoosterTurnsWithoutEnd(t *testing.T) {
	_, tr := testutil.WriteTrace(t, eightGPULine("long", "a", "standard", 0, 3600), eightGPULine("short", "a", "standard", 60, 3600))
	k := KueueConfig{PriorityBooster: map[string]any{"timeSharing": map[string]any{"interval": "30m", "negativeBoost": 100000}},
		FeatureGates: map[string]bool{"PriorityBoost": true}}
	out := t.TempDir()
	_, err := Run(context.Background(), Config{Trace: tr, TraceName: "booster", Spec: spec(t, boosterSpec), Seed: 1, OutDir: out, WallClock: fixedWall(), Kueue: k})
	if !errors.Is(err, ErrPreemptionLoop) || !strings.Contains(err.Error(), "nothing submitted, finished or changed outside Kueue") {
		t.Fatalf("error %v: want the run ended as making no progress", err)
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	var last float64
	n := 0
	for _, e := range d.Events {
		if e.Type == results.EvPreempted {
			last = e.T
			n++
		}
	}
	if last <= 1801+7*24*3600 || last > 1801+7*24*3600+1801 || n < 300 {
		t.Errorf("%d preemptions, the last at %g s: want the run ended at the first one past %d s", n, last, 1801+7*24*3600)
	}
	for _, id := range []string{"long", "short"} {
		if r := record(t, d, id); r.Finished != nil {
			t.Errorf("%s finished at %g: want both unfinished", id, *r.Finished)
		}
	}
}

// TestBoosterTurnsWithCheckpoints: twelve same-priority one-day jobs that checkpoint every 600 s
// take 2-hour turns on one node, two at a time (Kueue brings back the workload it just preempted
// ahead of the parked ones), each keeping its turns' work: every job finishes, the last after
// about twelve days, longer than the stall rule's span (ten times a day) with preemptions all
// along. The guard lets the run end by itself.
func TestBoosterTurnsWithCheckpoints(t *testing.T) {
	var lines []string
	for i := range 12 {
		lines = append(lines, strings.Replace(eightGPULine(fmt.Sprintf("j%02d", i), "a", "standard", float64(i), 86400),
			`"durationSec":86400,`, `"durationSec":86400,"checkpointIntervalSec":600,`, 1))
	}
	_, tr := testutil.WriteTrace(t, lines...)
	k := KueueConfig{PriorityBooster: map[string]any{"timeSharing": map[string]any{"interval": "2h", "negativeBoost": 100000}},
		FeatureGates: map[string]bool{"PriorityBoost": true}}
	out := t.TempDir()
	if _, err := Run(context.Background(), Config{Trace: tr, TraceName: "booster", Spec: spec(t, boosterSpec), Seed: 1, OutDir: out, WallClock: fixedWall(), Kueue: k}); err != nil {
		t.Fatal(err)
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	last := 0.0
	for i := range 12 {
		r := record(t, d, fmt.Sprintf("j%02d", i))
		if r.Finished == nil || len(r.Preemptions) == 0 {
			t.Fatalf("j%02d: finished %v after %d preemptions: want it finished, having taken turns", i, r.Finished, len(r.Preemptions))
		}
		last = math.Max(last, *r.Finished)
	}
	if last < 10*86400 || last > 13*86400 {
		t.Errorf("the last finished at %.0f s: want the twelve days of work done after about twelve days", last)
	}
}
