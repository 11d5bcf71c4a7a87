package e2e

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/compare"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// checkSimAgrees replays tr through the sim engine (Kueue's scheduler in virtual time) on the
// spec clusterRun was replayed on by the cluster engine (runSpec(team, gpuQuota)) and compares
// the runs. Every workload must finish in both; with strict, the engines must also agree within
// the sim engine's criteria (runtime/compare.DefaultTolerances): median JCT within 2 %, TTA p50
// and p95 within 10 % (or a minute), preemptions within 10 % (or two), GPU allocation within 2 %.
// It reuses the cluster runs of TestRunReplaysTraceToCompletion, so it costs the e2e suite the
// sim run only (about a second).
func checkSimAgrees(t *testing.T, tr *trace.Trace, tracePath, team string, gpuQuota int, clusterRun *results.Dir, strict bool) {
	t.Helper()
	spec, err := rcluster.Parse("spec.yaml", []byte(runSpec(team, gpuQuota)))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "sim")
	res, err := sim.Run(t.Context(), sim.Config{Trace: tr, TraceName: tracePath, Spec: spec, Seed: 1,
		Timing: sim.DefaultTiming, OutDir: out, Out: &testWriter{t: t}})
	if err != nil {
		t.Fatal(err)
	}
	simRun, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	checkCounts(t, tr, simRun)
	t.Logf("sim engine: %d events, %d scheduling cycles, %.0f trace s in %.2fs wall; the cluster engine took %.1fs wall (%.0fx)",
		res.Events, res.Cycles, simRun.Summary.TraceSec, res.WallSec, clusterRun.Summary.WallSec, clusterRun.Summary.WallSec/res.WallSec)

	rep, err := compare.Compare(clusterRun, simRun, compare.DefaultTolerances)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rep.WriteText(&b, 10); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	switch {
	case len(rep.OnlyA) > 0 || len(rep.OnlyB) > 0 || rep.Missing > 0:
		t.Errorf("the engines do not finish the same workloads: %v only on the cluster, %v only in the sim, %d missing", rep.OnlyA, rep.OnlyB, rep.Missing)
	case strict && !rep.Agree():
		t.Error("the engines do not agree (see the comparison above)")
	case !rep.Agree():
		t.Log("the engines differ beyond the tolerances here (reported, not checked; see above)")
	}
}
