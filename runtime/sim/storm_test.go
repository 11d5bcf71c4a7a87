package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// The case (testdata/storm at the repository's root, which the e2e test replays on both engines):
// teams.yaml at a sixth of its size (16 GPUs on two nodes, nominal quotas 8/4/4 in one cohort,
// teams.yaml's preemption policy); storm-a at its nominal quota with seven 1-GPU eco workloads,
// storm-b with one GPU idle, storm-c at its quota and an 8-GPU workload (q) waiting to borrow;
// then storm-a's 8-GPU standard workload (p), which fits only by preempting the eco ones and
// borrowing that idle GPU.
const stormDir = "../../testdata/storm"

// TestPreemptionLoopEndsTheRun: p preempts the eco workloads, q (older, also borrowing) takes the
// quota they free, e1 (within storm-a's nominal quota) reclaims it from q, p preempts e1 again, and
// so on at Kueue's cycle rate — Kueue v0.15.0's own decisions, which the deterministic sim repeats
// forever (as --gen-jobs 1000 --seed 2 on teams.yaml did without the guard). The run must end with
// ErrPreemptionLoop naming a workload caught in it and its preemptor, within a trace second or
// two, not spin until the trace time limit. The guard (results.LoopGuard) ends it at the first
// preemption from a state already preempted from, since the next change from outside Kueue (a0, b1
// and c1 finishing) is hundreds of thousands of rounds away. From the second round on p preempts
// only e1 (e2-e7 stay pending), so the first state to repeat is q's, reclaimed by e1 again.
func TestPreemptionLoopEndsTheRun(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(stormDir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), filepath.Join(stormDir, "trace.jsonl"), trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := runWith(t, string(doc), func(c *Config) { c.MaxTraceSec = 60 }, tr.Workloads...)
	if !errors.Is(err, ErrPreemptionLoop) {
		t.Fatalf("error %v, want %v", err, ErrPreemptionLoop)
	}
	msg := err.Error()
	if !(strings.Contains(msg, "workload e1 ") && strings.Contains(msg, "by workload p ")) &&
		!(strings.Contains(msg, "workload q ") && strings.Contains(msg, "by workload e1 ")) {
		t.Errorf("error %q names neither e1 and its preemptor p nor q and its preemptor e1", msg)
	}
	if d.Summary.TraceSec > 25 || !strings.Contains(d.Summary.Incomplete, "preemption loop") {
		t.Errorf("run ended at trace %gs (incomplete: %q); want it stopped by the guard soon after p's submission at 20s",
			d.Summary.TraceSec, d.Summary.Incomplete)
	}
	if r := record(t, d, "p"); r.State == results.StateSucceeded {
		t.Errorf("p %s: the loop this case reproduces was broken some other way; revisit the test", r.State)
	}
}
