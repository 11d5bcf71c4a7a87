package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
)

// TestRunSurvivesControlPlaneFaults replays a trace of lone workloads on the supervised cluster
// (startSupCluster: its supervisor a daemon, as the CLI's) and SIGKILLs a component mid-run: Kueue once a
// workload is admitted, mpi-operator the moment an MPIJob is admitted (before it has started its
// pods), kube-apiserver once a workload is admitted. In each case the run must end by itself with
// every workload succeeded and each one's JCT its work's time (|JCT − ideal| ≤ max(1 %, 1 trace s),
// the exact clock's tolerance: an undisturbed run of lone workloads is exact), the outage held the
// trace clock, and the summary counts the victim's restart.
func TestRunSurvivesControlPlaneFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("brings up the supervised cluster and kills its components")
	}
	sc, cl := startSupCluster(t)
	full, _ := runTrace(t)
	// One workload of each kind the default mapping runs through an operator or Kueue alone:
	// MPIJob (mpi-operator), JobSet (jobset), Job; spaced so that each runs alone.
	var tr trace.Trace = *full
	tr.Workloads = nil
	want := []trace.Family{trace.DistributedTraining, trace.SingleGPUTraining, trace.ParameterServerTraining, trace.DistributedTraining, trace.DebugEval}
	for _, w := range full.Workloads {
		if i := slices.Index(want, w.WorkloadType); i >= 0 {
			want = slices.Delete(want, i, i+1)
			tr.Workloads = append(tr.Workloads, w)
		}
	}
	next := 60.0
	for _, w := range tr.Workloads {
		w.SubmitTimeOffsetSec = next
		for _, j := range tr.Jobs[w.WorkloadID] {
			j.SubmitTimeOffsetSec = next
		}
		next += w.DurationSec + 600
	}
	sort.SliceStable(tr.Workloads, func(i, j int) bool { return tr.Workloads[i].SubmitTimeOffsetSec < tr.Workloads[j].SubmitTimeOffsetSec })

	for _, tc := range []struct {
		victim string
		// when picks the moment from the Workloads admitted so far.
		when func(admitted []kueue.Workload) bool
	}{
		{localcluster.Kueue, func(a []kueue.Workload) bool { return len(a) >= 2 }},
		{operatorOf("MPIJob"), func(a []kueue.Workload) bool {
			return slices.ContainsFunc(a, func(w kueue.Workload) bool {
				return len(w.OwnerReferences) > 0 && w.OwnerReferences[0].Kind == "MPIJob"
			})
		}},
		{localcluster.APIServer, func(a []kueue.Workload) bool { return len(a) >= 3 }},
	} {
		t.Run(tc.victim, func(t *testing.T) {
			team := "outage-" + map[string]string{localcluster.Kueue: "kueue", operatorOf("MPIJob"): "mpi", localcluster.APIServer: "api"}[tc.victim]
			sp := filepath.Join(t.TempDir(), "spec.yaml")
			if err := os.WriteFile(sp, []byte(runSpec(team, 8)), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, err := rcluster.Load(sp)
			if err != nil {
				t.Fatal(err)
			}
			trc := tr // the spec's defaultTeam takes every workload into the team's namespace
			cfg, err := runner.NewInProcess(t.Context(), runner.InProcess{REST: cl.Config, Local: cl.State, Spec: spec, Seed: 1, Prune: true})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "results")
			log := &testWriter{t: t}
			cfg.Trace, cfg.TraceName, cfg.Timeout, cfg.StallTimeout, cfg.OutDir, cfg.Out, cfg.Progress = &trc, "outage", 6*time.Minute, 2*time.Minute, out, log, log

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			killed := make(chan int, 1)
			go func() { killed <- sc.killWhen(ctx, team, tc.victim, tc.when) }()
			res, err := runner.Run(t.Context(), cfg)
			cancel()
			pid := <-killed
			if pid == 0 {
				t.Fatalf("%s was never killed: the trigger did not fire", tc.victim)
			}
			if err != nil {
				t.Fatalf("run with %s killed mid-run: %v", tc.victim, err)
			}
			s := res.Summary
			t.Logf("%s killed (pid %d): %d outages held the clock %.1fs; restarts %v; %.0f trace s in %.1fs wall; %d holds expired %v",
				tc.victim, pid, s.Outages, s.OutageWallSec, s.Restarts, s.TraceSec, s.WallSec, s.HoldsExpired, s.ExpiredByKind)
			if s.LateSteps != 0 {
				t.Errorf("%d steps seen after their trace time (worst %.3f s: %s): the clock moved while the control plane owed them", s.LateSteps, s.LateMaxSec, s.LateWorst)
			}
			if s.Restarts[tc.victim] < 1 || s.Outages < 1 {
				t.Errorf("summary counts restarts %v and %d outages, want %s's restart and its outage", s.Restarts, s.Outages, tc.victim)
			}
			d, err := results.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			checkCounts(t, &trc, d)
			worst, worstID := 0.0, ""
			for _, r := range d.Workloads {
				jct, ok := r.JCT()
				if r.State != results.StateSucceeded || !ok {
					t.Errorf("%s (%s): %s", r.ID, r.Family, r.State)
					continue
				}
				ex := jct - r.IdealSec
				if math.Abs(ex) >= worst {
					worst, worstID = math.Abs(ex), r.ID
				}
				if math.Abs(ex) > math.Max(0.01*r.IdealSec, 1) {
					var steps []string
					for _, e := range d.Events {
						if e.Workload == r.ID {
							steps = append(steps, fmt.Sprintf("%.0f %s %s", e.T, e.Type, e.Reason))
						}
					}
					t.Errorf("%s (%s) took %.3f trace s for %.3f s of work (%+.3f) with %s killed mid-run; its events: %s",
						r.ID, r.Family, jct, r.IdealSec, ex, tc.victim, strings.Join(steps, ", "))
				}
			}
			t.Logf("worst |JCT − ideal| %.3f trace s (%s)", worst, worstID)
			var restarted int
			for _, e := range d.Events {
				if e.Type == results.EvComponentRestarted && e.Object == tc.victim {
					restarted++
				}
			}
			if restarted < 1 {
				t.Errorf("events.jsonl has no %s for %s", results.EvComponentRestarted, tc.victim)
			}
			sc.await("every component ready after the run", 2*time.Minute, allReady)
		})
	}
}

// killWhen polls the team's Workloads and SIGKILLs victim once when(admitted) holds, admitted
// being every Workload seen admitted so far; it returns
// the killed pid (0 if ctx ended first).
func (sc *supCluster) killWhen(ctx context.Context, ns, victim string, when func([]kueue.Workload) bool) int {
	seen := map[string]bool{}
	var admitted []kueue.Workload // every Workload seen admitted so far, in the order seen
	for {
		var l kueue.WorkloadList
		if err := sc.c.List(ctx, &l, client.InNamespace(ns)); err == nil {
			for _, w := range l.Items {
				if !seen[w.Name] && apimeta.IsStatusConditionTrue(w.Status.Conditions, kueue.WorkloadAdmitted) {
					seen[w.Name] = true
					admitted = append(admitted, w)
				}
			}
			if when(admitted) {
				h, err := localcluster.ReadHealth(sc.dir)
				if err != nil {
					sc.t.Errorf("read health: %v", err)
					return 0
				}
				c, ok := h.Component(victim)
				if !ok || c.PID == 0 {
					sc.t.Errorf("%s: no running process to kill", victim)
					return 0
				}
				if err := syscall.Kill(c.PID, syscall.SIGKILL); err != nil {
					sc.t.Errorf("kill %s (pid %d): %v", victim, c.PID, err)
					return 0
				}
				return c.PID
			}
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(20 * time.Millisecond):
		}
	}
}
