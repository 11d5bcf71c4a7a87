package history

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// podSet builds a pod set of n pods asking for cpu and gpus, with kueuelab's contract when c is set.
func podSet(name string, n int, cpu string, gpus int, c *contract.Pod) kueuewl.PodSet {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")}
	if gpus > 0 {
		req["nvidia.com/gpu"] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	ps := kueuewl.PodSet{Name: name, Count: n}
	ps.Template.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: req}}}
	if c != nil {
		ps.Template.Annotations = c.Annotations()
	}
	return ps
}

func at(sec float64) *time.Time {
	t := t0.Add(time.Duration(sec * float64(time.Second)))
	return &t
}

func item(ns, kind, name string, created, admitted, finished float64, sets ...kueuewl.PodSet) kueuewl.Summary {
	it := kueuewl.Summary{Namespace: ns, Name: "wl-" + name, OwnerKind: kind, OwnerName: name, Created: *at(created), PodSets: sets}
	if admitted >= 0 {
		it.Admitted = at(admitted)
	}
	if finished >= 0 {
		it.Finished, it.Succeeded = at(finished), true
	}
	return it
}

func TestBuild(t *testing.T) {
	trial := func(id string) *contract.Pod {
		return &contract.Pod{WorkloadID: id, Family: trace.HPOExperiment, Role: trace.RoleTrial, DurationSec: 10, IntentClass: trace.IntentEco,
			Profile: trace.Profile{CPUUtilization: 0.3, GPUUtilization: 0.8}}
	}
	items := []kueuewl.Summary{
		// A plain Job of one GPU pod that ran 40 s: debug_eval by the rules (40 s × scale 10 = 400 s).
		item("team-a", "Job", "train", 0, 2, 42, podSet("main", 1, "4", 1, nil)),
		// kueuelab's HPO experiment: three trial Jobs, one logical workload.
		item("team-b", "Job", "hpo-1-trial-0", 5, 6, 30, podSet("main", 1, "2", 1, trial("hpo-1"))),
		item("team-b", "Job", "hpo-1-trial-1", 5, 7, 50, podSet("main", 1, "2", 1, trial("hpo-1"))),
		item("team-b", "Job", "hpo-1-trial-2", 31, 31, 60, podSet("main", 1, "2", 1, trial("hpo-1"))),
		// An MPIJob: launcher and workers.
		item("team-a", "MPIJob", "dist", 10, 12, 112, podSet("launcher", 1, "2", 0, nil), podSet("worker", 4, "8", 2, nil)),
		// Still running, never admitted.
		item("team-a", "Job", "running", 20, 21, -1, podSet("main", 1, "1", 0, nil)),
		item("team-a", "Job", "queued", 20, -1, -1, podSet("main", 1, "1", 0, nil)),
	}
	res, err := Build(items, Options{TimeScale: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Workloads) != 3 || res.NotRun["not finished"] != 1 || res.NotRun["never admitted"] != 1 {
		t.Fatalf("%d workloads, not run %v", len(res.Workloads), res.NotRun)
	}
	var got []string
	for _, w := range res.Workloads {
		var groups []string
		for _, p := range w.Pods {
			groups = append(groups, fmt.Sprintf("%s×%d:%d:%g", p.Role, p.Replicas, p.GPUs(), p.Requests.Value(trace.ResourceCPU)))
		}
		got = append(got, fmt.Sprintf("%s %s %s %g %g %s %s", w.WorkloadID, w.WorkloadType, w.Namespace, w.SubmitTimeOffsetSec, w.DurationSec, w.IntentClass, strings.Join(groups, " ")))
	}
	want := []string{
		"team-a-job-train debug_eval team-a 0 400  main×1:1:4",
		"hpo-1 hpo_experiment team-b 50 430 eco trial×3:1:2",
		"team-a-mpijob-dist distributed_training team-a 100 1000  launcher×1:0:2 worker×4:2:8",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if p := res.Workloads[1].SharedIntensityProfile; p.GPUUtilization != 0.8 {
		t.Errorf("the contract's profile was not kept: %+v", p)
	}
	// Since drops what was created before it.
	res, err = Build(items, Options{Since: time.Minute, Now: func() time.Time { return *at(70) }})
	if err != nil || len(res.Workloads) != 2 || res.NotRun["created before --since"] != 3 {
		t.Fatalf("since: %v, %d workloads, %v", err, len(res.Workloads), res.NotRun)
	}
}

func TestIntentOf(t *testing.T) {
	if intentOf("performance") != trace.IntentPerformance || intentOf("kueuelab-eco") != trace.IntentEco || intentOf("batch") != trace.IntentStandard {
		t.Fatal("intentOf")
	}
}
