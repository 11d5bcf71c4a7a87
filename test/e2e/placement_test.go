package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	kschedv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// placementSpec is two 8-GPU A100 nodes, a GPU family no other test's nodes have (so no other
// node can take these pods), and 16 GPUs of quota for one team, plus a scheduler section.
func placementSpec(team, scheduler string) string {
	return fmt.Sprintf(`apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
nodePools:
- {name: placement-a100, gpuFamily: A100-SXM, count: 2, gpusPerNode: 8, cpu: 32, memory: 256Gi}
clusterQueues:
- name: %[1]s-cq
  quotas:
  - flavor: a100-sxm
    resources: {cpu: 64, memory: 512Gi, nvidia.com/gpu: 16}
teams:
- {name: %[1]s, clusterQueue: %[1]s-cq}
defaultTeam: %[1]s
%[2]s`, team, scheduler)
}

// fragmentingTrace: ten one-GPU workloads submitted 10 s apart, the first eight running 3 h and
// the last two 30 min, then at 120 s one that wants a whole 8-GPU node for 1 h. Kueue admits it
// when the two short ones finish and free two GPUs of the 16 of quota, at about 30 min. Each
// one-GPU pod asks for 4 of a node's 32 cores, so LeastAllocated (on cpu and memory) sees every
// pod as an eighth of a node and alternates nodes: 4 + 4 long pods, one short pod on each, and
// no node is free until the long pods end. MostAllocated on GPUs puts the eight long pods on
// one node and the short ones on the other, which is free when they end.
func fragmentingTrace(team string) *trace.Trace {
	mk := func(id string, submit, dur float64, gpus, cpu int) *trace.Workload {
		return &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: team + "-" + id, SubmitTimeOffsetSec: submit,
			Namespace: team, WorkloadType: trace.SingleGPUTraining, DurationSec: dur, IntentClass: trace.IntentStandard,
			WorkloadClass:          trace.Class{CPU: "low", GPU: "high"},
			SharedIntensityProfile: trace.Profile{CPUUtilization: 0.1, GPUUtilization: 0.8},
			Pods: []trace.PodGroup{{Role: trace.RoleMain, Replicas: 1, Requests: trace.Requests{
				trace.ResourceCPU: fmt.Sprint(cpu), trace.ResourceMemory: fmt.Sprintf("%dGi", 4*cpu), trace.ResourceGPU: fmt.Sprint(gpus)}}}}
	}
	tr := &trace.Trace{Jobs: map[string][]*trace.Job{}}
	for i := range 10 {
		dur := 3 * 3600.0
		if i >= 8 {
			dur = 1800
		}
		tr.Workloads = append(tr.Workloads, mk(fmt.Sprintf("one-%d", i), float64(10*i), dur, 1, 4))
	}
	tr.Workloads = append(tr.Workloads, mk("whole-node", 120, 3600, 8, 8))
	return tr
}

// placementRun restarts the shared cluster's kube-scheduler with the spec's scheduler section
// (localcluster.Up does when the configuration changes) and replays the fragmenting trace on it.
func placementRun(t *testing.T, team, scheduler string) *results.Dir {
	t.Helper()
	text := placementSpec(team, scheduler)
	spec, err := rcluster.Parse(team+".yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	before := schedulerHealth(t, shared.state.Dir)
	o := shared.up
	o.Scheduler, o.Out = spec.KubeSchedulerConfiguration(), &testWriter{t: t}
	cl, err := localcluster.Up(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// The supervisor restarts the scheduler for a new configuration file (a new process, not
	// counted as a restart after a crash) and keeps it for the same one.
	after := schedulerHealth(t, cl.State.Dir)
	if changed := after.Config != before.Config; after.State != localcluster.StateReady || (after.PID != before.PID) != changed || after.Restarts != before.Restarts {
		t.Fatalf("kube-scheduler before Up %+v, after %+v: want a new process exactly when the configuration changed", before, after)
	}
	// Only this spec's nodes: the nodes earlier tests' specs left on the shared cluster (the same
	// GPU product, so the same flavor) would give the pods room and hide the fragmentation. This
	// test is sequential: no parallel test's queues are running yet.
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.PruneOthers(t.Context(), cl.Config, objs, &testWriter{t: t}); err != nil {
		t.Fatal(err)
	}
	// The runner waits until the spec's nodes have the spec's allocatable (KWOK's node-initialize
	// stage fills a node's empty allocatable with its own 1,000 cores, and LeastAllocated would put
	// every pod on that one of these two nodes) and until
	// kube-scheduler's cache holds them; the local cluster creates them untainted
	// (TestNewNodeIsSchedulableAsCreated).
	res, d := replaySpec(t, fragmentingTrace(team), "fragmenting", text)
	if all := res.Summary.Groups[0]; all.Succeeded != 11 {
		t.Fatalf("%s (%s): %d of 11 workloads succeeded", team, spec.Scoring(), all.Succeeded)
	}
	return d
}

// schedulerHealth is what the cluster's supervisor reports about its kube-scheduler.
func schedulerHealth(t *testing.T, dir string) localcluster.ComponentHealth {
	t.Helper()
	h, err := localcluster.ReadHealth(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := h.Component(localcluster.Scheduler)
	if !ok {
		t.Fatalf("status.json has no %s", localcluster.Scheduler)
	}
	return c
}

// wholeNodeWait is the 8-GPU workload's row of idle.csv.
func wholeNodeWait(t *testing.T, d *results.Dir, team string) results.Wait {
	t.Helper()
	for _, w := range d.Waits {
		if w.Workload == team+"-whole-node" {
			return w
		}
	}
	t.Fatalf("%s: no idle.csv row for the whole-node workload (%d rows)", team, len(d.Waits))
	return results.Wait{}
}

// TestPlacementQuotaHeldIdle: under kube-scheduler's default scoring (LeastAllocated) the one-GPU
// pods spread, the 8-GPU workload waits admitted with its quota held until Kueue's
// waitForPodsReady timeout evicts it, again after each requeue, until the long pods on one node
// end, and the summary reports its GPU-hours and the scheduler's reason; under MostAllocated on
// GPUs the one-GPU pods pack, the workload runs as soon as the short pods free the other node, and
// no quota is held idle. The event-driven clock makes both exact to the trace second.
func TestPlacementQuotaHeldIdle(t *testing.T) {
	t.Cleanup(func() {
		// Later tests expect upstream's default scoring.
		o := shared.up
		o.Scheduler, o.Out = &kschedv1.KubeSchedulerConfiguration{}, &testWriter{t: t}
		if _, err := localcluster.Up(context.Background(), o); err != nil {
			t.Errorf("restore the default kube-scheduler: %v", err)
		}
	})
	least := placementRun(t, "place-least", "")
	most := placementRun(t, "place-most", "scheduler:\n  scoringStrategy:\n    type: MostAllocated\n"+
		"    resources: [{name: nvidia.com/gpu, weight: 5}, {name: cpu, weight: 1}]\n")

	li, mi := least.Summary.ReservedIdle, most.Summary.ReservedIdle
	if li == nil || mi == nil {
		t.Fatalf("summary.json without reservedIdle: %v %v", li, mi)
	}
	lw, mw := wholeNodeWait(t, least, "place-least"), wholeNodeWait(t, most, "place-most")
	t.Logf("LeastAllocated: %.2f GPU-h held idle, whole-node workload waited %.0f s admitted (%s)", li.GPUHours, lw.LongestSec, lw.Reason)
	t.Logf("MostAllocated:  %.2f GPU-h held idle, whole-node workload waited %.0f s admitted", mi.GPUHours, mw.LongestSec)

	// Kueue admits it one requeue batch (1 s) after the second short pod ends (90 + 1,800 s) and
	// it runs when the last long pod on one node does (60 + 10,800 s). In between, Kueue v0.19's
	// default waitForPodsReady (the cluster's, in trace time: 30 min timeout, backoff 60 s
	// doubling) evicts it each time it has waited 1,800 s admitted and requeues it 60, 120, 240 and
	// 480 s later: admitted at 1,891, 3,751, 5,671, 7,711 and 9,991 s, held idle 4 × 1,800 + 869 s.
	timeout, backoff := shared.timers.PodsReadyTimeout, shared.timers.BackoffBase
	admit, runs := 90+1800+1.0, 60+3*3600.0
	var idle float64
	var evicted []float64
	for admit+timeout <= runs {
		idle += timeout
		evicted = append(evicted, admit+timeout)
		admit += timeout + backoff*math.Pow(2, float64(len(evicted)-1))
	}
	idle += runs - admit
	if math.Abs(lw.LongestSec-timeout) > 1 || math.Abs(li.GPUHours-8*idle/3600) > 0.01 {
		t.Errorf("LeastAllocated: the whole-node workload waited %.1f s admitted, %.3f GPU-h held idle; want %.0f s, %.3f GPU-h",
			lw.LongestSec, li.GPUHours, timeout, 8*idle/3600)
	}
	var got []float64
	for _, r := range least.Workloads {
		if r.ID == "place-least-whole-node" {
			for _, e := range r.Evictions {
				got = append(got, e.T)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(evicted) {
		t.Errorf("LeastAllocated: the whole-node workload was evicted at %v, want at %v (its PodsReady timeouts)", got, evicted)
	}
	if !lw.Unschedulable || !strings.HasPrefix(lw.Reason, "Insufficient nvidia.com/gpu") {
		t.Errorf("LeastAllocated: unschedulable %v, reason %q: want kube-scheduler's Insufficient nvidia.com/gpu", lw.Unschedulable, lw.Reason)
	}
	if l := li.Longest; l == nil || l.Workload != "place-least-whole-node" || li.OverThreshold != 1 || li.Unschedulable != 1 {
		t.Errorf("LeastAllocated summary: %.2f GPU-h, %d over threshold, longest %+v", li.GPUHours, li.OverThreshold, li.Longest)
	}
	// The short pods shared the other node; it is empty when Kueue admits the workload.
	if mw.LongestSec > 1 || mi.OverThreshold != 0 || mi.GPUHours > 0.01 {
		t.Errorf("MostAllocated: the whole-node workload waited %.1f s admitted, %d over the threshold, %.3f GPU-h held idle; want it running at admission",
			mw.LongestSec, mi.OverThreshold, mi.GPUHours)
	}
	// Every one-GPU workload fits at once in both runs: its pod runs at its admission. A wait here
	// is a start the runner recorded after the clock had moved on (to the next submission).
	for _, c := range []struct {
		d    *results.Dir
		team string
	}{{least, "place-least"}, {most, "place-most"}} {
		for _, w := range c.d.Waits {
			if w.Workload != c.team+"-whole-node" && w.LongestSec > 1 {
				t.Errorf("%s: %s waited %.1f s admitted, want its pod running at admission", c.team, w.Workload, w.LongestSec)
			}
		}
	}
	// kueuelab's kube-scheduler gives a tie to the node whose name sorts first (upstream's draws
	// at random), so where each pod runs is fixed: LeastAllocated alternates from -000, and
	// MostAllocated packs the long pods on -000 (a tie for the first) and the short ones on -001.
	for _, c := range []struct {
		d    *results.Dir
		team string
		want []string // node suffix of one-0 … one-9
	}{
		{least, "place-least", []string{"000", "001", "000", "001", "000", "001", "000", "001", "000", "001"}},
		{most, "place-most", []string{"000", "000", "000", "000", "000", "000", "000", "000", "001", "001"}},
	} {
		got := map[string]string{}
		for _, e := range c.d.Events {
			if e.Type == results.EvPodRunning && got[e.Workload] == "" {
				got[e.Workload] = strings.TrimPrefix(e.Node, "placement-a100-")
			}
		}
		for i, w := range c.want {
			if id := fmt.Sprintf("%s-one-%d", c.team, i); got[id] != w {
				t.Errorf("%s: %s ran on node %q, want placement-a100-%s (pods by workload: %v)", c.team, id, got[id], w, got)
				break
			}
		}
	}
}

// TestNewNodeIsSchedulableAsCreated: the local API server creates a spec's node as it is given,
// without the not-ready taint a kubelet's node gets at registration (TaintNodesByCondition is
// off), so kube-scheduler's first copy of a new node is already one it may place pods on, with no
// window in which its copy lags the node controller's untainting.
func TestNewNodeIsSchedulableAsCreated(t *testing.T) {
	n := agentNode(t, "e2e-fresh-node", nil, nil)
	// No pod of another test can go to it: no flavor selects it and no pod tolerates this taint.
	n.Spec.Taints = []corev1.Taint{{Key: "e2e.kueuelab.io/probe", Effect: corev1.TaintEffectNoSchedule}}
	createNode(t, n) // create fills n with the object the API server stored
	for _, tn := range n.Spec.Taints {
		if tn.Key == corev1.TaintNodeNotReady {
			t.Fatalf("node created with taints %v: want no %s", n.Spec.Taints, corev1.TaintNodeNotReady)
		}
	}
	if len(n.Spec.Taints) != 1 {
		t.Fatalf("node created with taints %v, want only the probe taint", n.Spec.Taints)
	}
}
