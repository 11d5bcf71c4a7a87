package e2e

import (
	"context"
	"errors"
	"maps"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/forecast"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

// TestRunUntil replays enginesTrace on the cluster engine to trace time 1,000 s and stops there,
// leaving the cluster as it is: e1 and g hold quota, e2 (preempted by g at 60 s) waits. A
// snapshot reads that state on the trace clock the run published; the forecast from it, every
// workload's work known from its duration annotation, admits e2 where the full run does
// (enginesTrace: 1,861 s, the requeue batch after g's PodsReady timeout at 1,860 s) within the 60 s
// the forecast issue holds a cluster snapshot to.
func TestRunUntil(t *testing.T) {
	const until = 1000.0
	spec, err := rcluster.Parse("engines.yaml", []byte(enginesSpec))
	if err != nil {
		t.Fatal(err)
	}
	// A run of enginesTrace before this one deletes its objects as it ends, and Kubernetes takes a
	// moment: objects of the same names still there would be taken for this run's.
	deleteRunObjects(t, "engines")
	t.Cleanup(func() { deleteRunObjects(t, "engines") })
	_, out, err := runInProcess(t, enginesTrace(), "engines", spec, 10*time.Minute, func(c *runner.Config) { c.UntilSec, c.Keep = until, true })
	if !errors.Is(err, replay.ErrIncomplete) {
		t.Fatalf("a run stopped at %g s: %v, want it incomplete", until, err)
	}
	d, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(d.Summary.Incomplete, "stopped at trace time 1000s") {
		t.Errorf("summary incomplete %q, want it stopped at 1000s", d.Summary.Incomplete)
	}
	for _, e := range d.Events {
		if e.T > until {
			t.Errorf("event after the stop: %+v", e)
		}
	}
	// By 1,000 s (enginesTrace): e2 preempted at 60 s by g, one of g's pods running, nothing
	// finished, k not submitted.
	states := map[string]string{}
	for _, r := range d.Workloads {
		states[r.ID] = r.State
	}
	if want := map[string]string{"e1": results.StateRunning, "e2": results.StateEvicted, "g": results.StateRunning, "k": results.StateUnsubmitted}; !maps.Equal(states, want) {
		t.Errorf("states at the stop %v, want %v", states, want)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	_, dir := snapshotShared(ctx, t, snapshot.Options{Source: "e2e until", KueueVersion: "v0.19.2"})
	st, err := state.Load(filepath.Join(dir, state.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.NowSec-until) > 1e-3 {
		t.Errorf("snapshot at %g s, want the run's stop, %g s on its trace clock", st.NowSec, until)
	}
	phases := map[string]state.Phase{}
	for _, w := range st.Workloads {
		switch w.ID {
		case "e1", "e2", "g":
			phases[w.ID] = w.Phase
		}
	}
	if phases["e1"] != state.Admitted || phases["g"] != state.Admitted || phases["e2"] != state.Pending {
		t.Fatalf("state at %g s: %v, want e1 and g admitted, e2 pending", until, phases)
	}
	rep, err := forecast.Run(ctx, forecast.Options{Dir: dir, Repeats: 1, Seed: 1, Arrivals: state.ArrivalsNone, HorizonSec: 7200})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range rep.Workloads {
		if w.ID != "e2" {
			continue
		}
		if w.P50 == nil || math.Abs(until+*w.P50-1861) > 60 {
			t.Errorf("e2: forecast admitted after %v s, want within 60 s of the full run's 1,861 s (%g s after the stop)", w.P50, 1861-until)
		} else {
			t.Logf("e2: forecast admitted at %g s, the full run at 1,861 s", until+*w.P50)
		}
		return
	}
	t.Errorf("the forecast has no row for e2: %+v", rep.Workloads)
}

// backtestSpec is two 8-GPU H200 nodes (a family no other test's nodes have) and exactly their 16
// GPUs of quota.
const backtestSpec = `apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata: {name: backtest}
nodePools:
- {name: backtest-h200, gpuFamily: H200-SXM, count: 2, gpusPerNode: 8, cpu: 64, memory: 512Gi}
clusterQueues:
- name: backtest-cq
  quotas:
  - flavor: h200-sxm
    resources: {cpu: 128, memory: 1024Gi, nvidia.com/gpu: 16}
teams:
- {name: backtest, clusterQueue: backtest-cq}
defaultTeam: backtest
priorityClasses:
  standard: {value: 100}
`

// TestBacktestOnTheCluster replays a small trace on the cluster engine to its end, keeping its
// objects, snapshots the cluster (every Workload finished, on the replay's trace clock) and
// backtests at 500 s. Worked out by hand: h1 and h2 (8 GPUs each) hold the whole quota from 0 to
// 1,000 s; p (submitted at 100 s) and q (200 s) wait for it and are admitted when they finish, at
// 1,000 s. From the state rebuilt at 500 s (h1 and h2 admitted, p and q pending, every run known
// from the duration annotation the rendered pods carry) the forecast admits p and q within 60 s
// of that, with the oracle and without.
func TestBacktestOnTheCluster(t *testing.T) {
	spec, err := rcluster.Parse("backtest.yaml", []byte(backtestSpec))
	if err != nil {
		t.Fatal(err)
	}
	one := func(id string, submit, dur float64) *trace.Workload {
		return &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: id, SubmitTimeOffsetSec: submit, Namespace: "backtest",
			WorkloadType: trace.SingleGPUTraining, DurationSec: dur, WorkloadClass: trace.Class{CPU: "low", GPU: "high"},
			SharedIntensityProfile: trace.Profile{CPUUtilization: 0.2, GPUUtilization: 0.8},
			Pods: []trace.PodGroup{{Role: trace.RoleMain, Replicas: 1, Requests: trace.Requests{
				trace.ResourceCPU: "8", trace.ResourceMemory: "64Gi", trace.ResourceGPU: "8"}}}}
	}
	tr := &trace.Trace{Jobs: map[string][]*trace.Job{}, Workloads: []*trace.Workload{
		one("h1", 0, 1000), one("h2", 0, 1000), one("p", 100, 500), one("q", 200, 300)}}
	deleteRunObjects(t, "backtest")
	t.Cleanup(func() { deleteRunObjects(t, "backtest") })
	if _, _, err := runInProcess(t, tr, "backtest", spec, 10*time.Minute, func(c *runner.Config) { c.Keep = true }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	_, dir := snapshotShared(ctx, t, snapshot.Options{Source: "e2e backtest", KueueVersion: "v0.19.2"})
	for _, oracle := range []bool{true, false} {
		btDir := t.TempDir()
		bt, err := forecast.RebuildAt(ctx, dir, 500, btDir, forecast.BacktestOptions{Oracle: oracle})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"p", "q"} {
			if got, ok := bt.Truth[id]; !ok || math.Abs(got-500) > 2 {
				t.Errorf("oracle %v: %s admitted %v s after 500 s (known %v), want the history's ~500 s", oracle, id, got, ok)
			}
		}
		rep, err := forecast.Run(ctx, forecast.Options{Dir: btDir, Repeats: 1, Seed: 1, Arrivals: state.ArrivalsNone, HorizonSec: bt.NowSec - bt.AtSec})
		if err != nil {
			t.Fatal(err)
		}
		sc := forecast.ScoreBacktest(rep, bt)
		t.Logf("oracle %v: truth %v, score %+v", oracle, bt.Truth, sc)
		if rep.Known < 4 || sc.Workloads != 2 || sc.Within60 != 2 {
			t.Errorf("oracle %v: %d workloads' work known, score %+v: want p and q scored, each within 60 s", oracle, rep.Known, sc)
		}
	}
}

// deleteRunObjects deletes what a run left in namespace ns and waits until its Workloads and
// pods are gone, so that the next run there starts on an empty queue.
func deleteRunObjects(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The kinds the default mapping renders the trace's families to.
	for _, gvk := range []schema.GroupVersionKind{{Group: "batch", Version: "v1", Kind: "Job"}, {Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"},
		{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"}, {Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}} {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(gvk)
		err := shared.client.DeleteAllOf(ctx, o, client.InNamespace(ns), client.HasLabels{contract.WorkloadLabel},
			client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apimeta.IsNoMatchError(err) {
			t.Errorf("delete %s in %s: %v", gvk.Kind, ns, err)
		}
	}
	// t.Context() has ended when a cleanup runs: poll on a context of its own.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var wls kueue.WorkloadList
		if err := shared.client.List(ctx, &wls, client.InNamespace(ns)); err != nil {
			return false, err
		}
		pods, err := podsOf(ctx, ns, nil)
		if err != nil {
			return false, err
		}
		return len(wls.Items) == 0 && len(pods) == 0, nil
	})
	if err != nil {
		t.Errorf("namespace %s not empty: %v", ns, err)
	}
}
