package sim

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

// The case (testdata/storm at the repository's root, which the e2e test replays on both engines):
// teams.yaml at a sixth of its size (16 GPUs on two nodes, nominal quotas 8/4/4 in one cohort,
// teams.yaml's preemption policy); storm-a at its nominal quota with seven 1-GPU eco workloads,
// storm-b with one GPU idle, storm-c at its quota and an 8-GPU workload (q) waiting to borrow;
// then storm-a's 8-GPU standard workload (p), which fits only by preempting the eco ones and
// borrowing that idle GPU.
const stormDir = "../../testdata/storm"

// TestStormDoesNotLoop: the case that looped on Kueue v0.15.0 (p preempts the eco workloads, q —
// older, borrowing — takes the quota they free, e1 reclaims it from q, p preempts e1 again, at
// Kueue's cycle rate; results.LoopGuard ended those runs) no longer loops on v0.17 and later. q,
// parked as inadmissible at 10 s, returns to its heap only one requeue batch (1 s) after the
// preemptions free the quota at 20 s, and by then p, which stays in its heap while it waits for its
// victims, has taken it. So at 20 s p preempts e1-e7 once and is admitted; q is never admitted nor
// preempted; nothing changes until the 60 s limit (p's 8-GPU pod waits for a node: a0 and c1 hold
// one, b1 the other, until 20000 s).
func TestStormDoesNotLoop(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(stormDir, "spec.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), filepath.Join(stormDir, "trace.jsonl"), trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := runWith(t, string(doc), func(c *Config) { c.MaxTraceSec = 60 }, tr.Workloads...)
	if errors.Is(err, ErrPreemptionLoop) || !strings.Contains(d.Summary.Incomplete, "trace time limit") {
		t.Fatalf("error %v (incomplete %q), want the run to reach the 60 s trace limit", err, d.Summary.Incomplete)
	}
	if p := record(t, d, "p"); p.Admitted == nil || *p.Admitted != 20 || len(p.Preemptions) != 0 {
		t.Errorf("p admitted at %v, preempted %v; want admitted at 20, never preempted", p.Admitted, p.Preemptions)
	}
	for _, id := range []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7"} {
		if r := record(t, d, id); len(r.Preemptions) != 1 || r.Preemptions[0].T != 20 {
			t.Errorf("%s preemptions %v, want one at 20", id, r.Preemptions)
		}
	}
	if q := record(t, d, "q"); q.Admitted != nil || len(q.Preemptions) != 0 {
		t.Errorf("q admitted at %v, preempted %v; want never admitted", q.Admitted, q.Preemptions)
	}
}
