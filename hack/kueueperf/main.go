// Command kueueperf writes the shape of Kueue v0.15.0's scheduler-performance baseline
// (test/performance/scheduler/default_generator_config.yaml) as a kueuelab trace and cluster spec,
// so the same load runs through the real control plane as real Jobs with pods on KWOK nodes.
//
// The baseline: 5 cohorts × 6 ClusterQueues, each with 20 CPUs of nominal quota and a borrowing
// limit of 100, reclaimWithinCohort Any and withinClusterQueue LowerPriority; per ClusterQueue 350
// small workloads (1 CPU, 200 ms, priority 50) created every 100 ms, 100 medium (5 CPUs, 500 ms,
// priority 100) every 500 ms and 50 large (20 CPUs, 1 s, priority 200) every 1.2 s: 15,000
// workloads. Kueue's harness runs them as Workloads without pods in wall time; here a millisecond
// of theirs is a millisecond of trace time, and each workload is a one-pod batch Job.
//
//	go run ./hack/kueueperf -out /tmp/kueueperf   # writes trace.jsonl and cluster.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kueuelab/kueuelab/model/trace"
)

// class is one workloadsSet of the generator config.
type class struct {
	name       string
	count      int
	intervalMs float64
	runtimeMs  float64
	cpu        int
	intent     string // the priority class: eco 50, standard 100, performance 200
}

var classes = []class{
	{"small", 350, 100, 200, 1, trace.IntentEco},
	{"medium", 100, 500, 500, 5, trace.IntentStandard},
	{"large", 50, 1200, 1000, 20, trace.IntentPerformance},
}

const (
	cohorts, queuesPerCohort = 5, 6
	nominalCPU, borrowCPU    = 20, 100
)

func main() {
	out := flag.String("out", "kueueperf", "output directory")
	scale := flag.Int("scale", 1, "divide every class's workload count by this (a smaller run of the same shape)")
	flag.Parse()
	if err := run(*out, *scale); err != nil {
		fmt.Fprintln(os.Stderr, "kueueperf:", err)
		os.Exit(1)
	}
}

func run(out string, scale int) error {
	if scale < 1 {
		return fmt.Errorf("-scale %d: want ≥ 1", scale)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var wls []*trace.Workload
	for c := range cohorts {
		for q := range queuesPerCohort {
			ns := queueName(c, q)
			for _, cl := range classes {
				for i := range cl.count / scale {
					wls = append(wls, &trace.Workload{
						SchemaVersion: trace.SchemaVersion, WorkloadID: fmt.Sprintf("%s-%s-%03d", ns, cl.name, i),
						SubmitTimeOffsetSec: float64(i) * cl.intervalMs / 1000, Namespace: ns,
						WorkloadType: trace.CPUPreprocess, DurationSec: cl.runtimeMs / 1000,
						WorkloadClass:          trace.Class{CPU: "cpu.compute_bound"},
						SharedIntensityProfile: trace.Profile{CPUUtilization: 0.9, MemoryIntensity: 0.2, IOIntensity: 0.1},
						Pods: []trace.PodGroup{{Role: trace.RoleMain, Replicas: 1,
							Requests: trace.Requests{trace.ResourceCPU: fmt.Sprint(cl.cpu), trace.ResourceMemory: "1Gi"}}},
						IntentClass: cl.intent,
					})
				}
			}
		}
	}
	sort.SliceStable(wls, func(i, j int) bool { return wls[i].SubmitTimeOffsetSec < wls[j].SubmitTimeOffsetSec })
	fw, err := trace.Create(filepath.Join(out, "trace.jsonl"))
	if err != nil {
		return err
	}
	for _, w := range wls {
		if err := fw.WriteWorkload(w); err != nil {
			return err
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "cluster.yaml"), []byte(spec()), 0o644); err != nil {
		return err
	}
	fmt.Printf("%d workloads in %s/trace.jsonl, cluster spec %s/cluster.yaml\n", len(wls), out, out)
	return nil
}

func queueName(c, q int) string { return fmt.Sprintf("c%d-q%d", c, q) }

// spec is the cluster: the baseline's queues, and CPU nodes enough for every cohort to use its
// whole quota (5 × 6 × 20 = 600 CPUs nominal) with room for the pods.
func spec() string {
	var b strings.Builder
	b.WriteString(`# Kueue v0.15.0's scheduler-performance baseline shape (hack/kueueperf).
apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata:
  name: kueue-perf
nodePools:
- name: cpu
  gpuFamily: CPU
  count: 10
  cpu: 64
  memory: 512Gi
  pods: 250
cohorts:
`)
	for c := range cohorts {
		fmt.Fprintf(&b, "- name: cohort-%d\n", c)
	}
	b.WriteString("clusterQueues:\n")
	for c := range cohorts {
		for q := range queuesPerCohort {
			fmt.Fprintf(&b, `- name: %s
  cohort: cohort-%d
  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}
  quotas:
  - flavor: cpu
    resources:
      cpu: {nominalQuota: %d, borrowingLimit: %d}
      memory: {nominalQuota: 1000Gi}
`, queueName(c, q), c, nominalCPU, borrowCPU)
		}
	}
	b.WriteString("teams:\n")
	for c := range cohorts {
		for q := range queuesPerCohort {
			fmt.Fprintf(&b, "- {name: %s, clusterQueue: %s}\n", queueName(c, q), queueName(c, q))
		}
	}
	b.WriteString(`priorityClasses:
  performance: {value: 200}
  standard: {value: 100}
  eco: {value: 50}
`)
	return b.String()
}
