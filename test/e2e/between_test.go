package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
)

// TestReplayBesideAWallTimeWorkload replays a trace while a Workload admitted outside any replay
// waits for its pod, which no node can take: Kueue's waitForPodsReady (on by default from
// v0.19) then requeues that Workload after 30 wall minutes. Work queued on wall time between
// replays is not work the replay's clock waits for; counted as owed, it kept Kueue from ever
// reporting its timers done, and the replay could not start ("did not take up the trace clock").
func TestReplayBesideAWallTimeWorkload(t *testing.T) {
	const ns, team = "e2e-wall", "wall-run"
	setup(t, ns, queueObjects(ns, ns, 4)...)
	stuck := makeJob(ns, "never-ready", ns, 1)
	stuck.Spec.Template.Spec.NodeSelector = map[string]string{"kueuelab.test/no-such-node": "true"}
	create(t, stuck)
	awaitWorkloadCondition(t, stuck, kueue.WorkloadAdmitted)

	path := filepath.Join(t.TempDir(), "one.jsonl")
	fits, _, _ := strings.Cut(fmt.Sprintf(stallTrace, team), "\n")
	if err := os.WriteFile(path, []byte(fits+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, d := replayTrace(t, tr, path, team, 8)
	all := d.Summary.Groups[0]
	if all.Workloads != 1 || all.Succeeded != 1 {
		t.Fatalf("%d workloads, %d succeeded; want the trace's one, succeeded", all.Workloads, all.Succeeded)
	}
	if got := all.JCTSec.P50; got == nil || *got != 600 {
		t.Errorf("the lone workload's JCT is not exactly its 600 s of work: %s", fmtQuantile(got))
	}
}

func fmtQuantile(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%.3f s", *v)
}
