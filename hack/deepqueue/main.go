// Command deepqueue writes a deep-queue case as a kueuelab trace and cluster spec: n one-pod,
// one-CPU Jobs submitted at once to one ClusterQueue with quota and nodes for all of them. Nothing but Kueue's admission rate holds
// them back: Kueue tries one head per ClusterQueue per scheduling cycle
// (kubernetes-sigs/kueue#14477), so the k-th waits about k cycles, and the time to admission
// against queue position shows the cycle's duration on either engine.
//
//	go run ./hack/deepqueue -out /tmp/deepqueue   # writes trace.jsonl and cluster.yaml
//	kueuelab run --engine sim --trace /tmp/deepqueue/trace.jsonl --cluster /tmp/deepqueue/cluster.yaml --out results/deep
//	go run ./hack/deepqueue -analyze results/deep   # wait against queue position: slope, fit, samples
package main

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/results"
)

func main() {
	out := flag.String("out", "deepqueue", "output directory")
	n := flag.Int("n", 600, "workloads queued together")
	dur := flag.Float64("duration-sec", 3600, "each workload's duration (long enough that none ends while the queue drains)")
	analyze := flag.Bool("analyze", false, "analyze the results directories given as arguments instead")
	flag.Parse()
	if *analyze {
		for _, dir := range flag.Args() {
			if err := analyzeDir(dir); err != nil {
				fmt.Fprintln(os.Stderr, "deepqueue:", err)
				os.Exit(1)
			}
		}
		return
	}
	if err := run(*out, *n, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "deepqueue:", err)
		os.Exit(1)
	}
}

func run(out string, n int, dur float64) error {
	if n < 1 || dur <= 0 {
		return fmt.Errorf("-n %d, -duration-sec %g: want ≥ 1 and > 0", n, dur)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	fw, err := trace.Create(filepath.Join(out, "trace.jsonl"))
	if err != nil {
		return err
	}
	for i := range n {
		err := fw.WriteWorkload(&trace.Workload{
			SchemaVersion: trace.SchemaVersion, WorkloadID: fmt.Sprintf("deep-%04d", i),
			Namespace:    "deep",
			WorkloadType: trace.CPUPreprocess, DurationSec: dur,
			WorkloadClass:          trace.Class{CPU: "cpu.compute_bound"},
			SharedIntensityProfile: trace.Profile{CPUUtilization: 0.9, MemoryIntensity: 0.2, IOIntensity: 0.1},
			Pods: []trace.PodGroup{{Role: trace.RoleMain, Replicas: 1,
				Requests: trace.Requests{trace.ResourceCPU: "1", trace.ResourceMemory: "1Gi"}}},
			IntentClass: trace.IntentStandard,
		})
		if err != nil {
			return err
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	nodes := (n + 99) / 100
	spec := fmt.Sprintf(`# A deep queue (hack/deepqueue): %d one-CPU Jobs queued together in one ClusterQueue.
apiVersion: kueuelab.io/v1alpha1
kind: ClusterSpec
metadata:
  name: deep-queue
nodePools:
- name: cpu
  gpuFamily: CPU
  count: %d
  cpu: 128
  memory: 1024Gi
  pods: 110
clusterQueues:
- name: deep
  quotas:
  - flavor: cpu
    resources: {cpu: %d, memory: %dGi}
teams:
- {name: deep, clusterQueue: deep}
`, n, nodes, nodes*128, nodes*1024)
	if err := os.WriteFile(filepath.Join(out, "cluster.yaml"), []byte(spec), 0o644); err != nil {
		return err
	}
	fmt.Printf("%d workloads in %s/trace.jsonl, cluster spec %s/cluster.yaml\n", n, out, out)
	return nil
}

// analyzeDir fits each workload's wait (submitted to admitted) against its queue position (its
// rank in admission order) by least squares and prints the slope (seconds per position), the fit
// and the wait at a few positions.
func analyzeDir(dir string) error {
	d, err := results.Load(dir)
	if err != nil {
		return err
	}
	var waits []float64
	recs := slices.Clone(d.Workloads)
	recs = slices.DeleteFunc(recs, func(r results.Record) bool { return r.Admitted == nil || r.Submitted == nil })
	slices.SortStableFunc(recs, func(a, b results.Record) int { return cmp.Compare(*a.Admitted, *b.Admitted) })
	for _, r := range recs {
		waits = append(waits, *r.Admitted-*r.Submitted)
	}
	n := float64(len(waits))
	if n < 2 {
		return fmt.Errorf("%s: %d admitted workloads", dir, len(waits))
	}
	var sx, sy, sxx, sxy, syy float64
	for k, w := range waits {
		x := float64(k + 1)
		sx, sy, sxx, sxy, syy = sx+x, sy+w, sxx+x*x, sxy+x*w, syy+w*w
	}
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	icept := (sy - slope*sx) / n
	fit := "every wait equal"
	if v := (n*sxx - sx*sx) * (n*syy - sy*sy); v > 0 {
		r := (n*sxy - sx*sy) / math.Sqrt(v)
		fit = fmt.Sprintf("r² %.4f", r*r)
	}
	fmt.Printf("%s (%s engine): %d admitted; wait = %.4g s + %.4g s × position (%s)\n",
		dir, cmp.Or(d.Summary.Engine, "cluster"), len(waits), icept, slope, fit)
	for _, k := range []int{1, 10, 100, 250, 500, len(waits)} {
		if k <= len(waits) {
			fmt.Printf("  position %4d: waited %.3f s\n", k, waits[k-1])
		}
	}
	return nil
}
