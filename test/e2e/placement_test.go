package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kschedv1 "k8s.io/kube-scheduler/config/v1"

	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
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
// (cluster.Up does when the configuration changes) and replays the fragmenting trace on it.
func placementRun(t *testing.T, team, scheduler string) *results.Dir {
	t.Helper()
	text := placementSpec(team, scheduler)
	spec, err := rcluster.Parse(team+".yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	o := shared.up
	o.Scheduler, o.Out = spec.KubeSchedulerConfiguration(), &testWriter{t: t}
	cl, err := cluster.Up(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	// Both nodes schedulable before the first pod: a node new to the cluster carries the
	// node.kubernetes.io/not-ready taint for a moment after it is Ready, and pods created
	// meanwhile would all go to the other one, whatever the scoring.
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.ApplyObjects(t.Context(), cl.Config, objs); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitNodesSchedulable(t.Context(), cl.Config, deadline); err != nil {
		t.Fatal(err)
	}
	res, d := replaySpec(t, fragmentingTrace(team), "fragmenting", text)
	if all := res.Summary.Groups[0]; all.Succeeded != 11 {
		t.Fatalf("%s (%s): %d of 11 workloads succeeded", team, spec.Scoring(), all.Succeeded)
	}
	return d
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
// pods spread, the 8-GPU workload waits admitted with its quota held until the long pods on one
// node end, and the summary reports its GPU-hours and the scheduler's reason; under MostAllocated
// on GPUs the one-GPU pods pack, the workload runs as soon as the short pods free the other node,
// and the quota held idle drops to what starting pods cost.
func TestPlacementQuotaHeldIdle(t *testing.T) {
	t.Cleanup(func() {
		// Later tests expect upstream's default scoring.
		o := shared.up
		o.Scheduler, o.Out = &kschedv1.KubeSchedulerConfiguration{}, &testWriter{t: t}
		if _, err := cluster.Up(context.Background(), o); err != nil {
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

	// Admitted at ~1,800 s when the short pods end, running at ~10,800 s when the long ones on
	// one node do: 2.5 h. The bounds leave room for the kube-scheduler's 1 s (wall) backoff.
	if lw.LongestSec < 2*3600 || lw.LongestSec > 4*3600 {
		t.Errorf("LeastAllocated: the whole-node workload waited %.0f s admitted, want about 9,000", lw.LongestSec)
	}
	if !lw.Unschedulable || !strings.HasPrefix(lw.Reason, "Insufficient nvidia.com/gpu") {
		t.Errorf("LeastAllocated: unschedulable %v, reason %q: want kube-scheduler's Insufficient nvidia.com/gpu", lw.Unschedulable, lw.Reason)
	}
	if l := li.Longest; l == nil || l.Workload != "place-least-whole-node" || li.OverThreshold < 1 || li.GPUHours < 8*2 {
		t.Errorf("LeastAllocated summary: %.2f GPU-h, %d over threshold, longest %+v", li.GPUHours, li.OverThreshold, li.Longest)
	}
	if mw.LongestSec > 600 || mi.OverThreshold != 0 {
		t.Errorf("MostAllocated: the whole-node workload waited %.0f s admitted, %d over the threshold; want it to start when the short pods end", mw.LongestSec, mi.OverThreshold)
	}
	if mi.GPUHours > li.GPUHours/10 {
		t.Errorf("quota held idle %.2f GPU-h under MostAllocated, %.2f under LeastAllocated: want a drop by 10× or more", mi.GPUHours, li.GPUHours)
	}
}
