// Command kueueperf writes the shape of Kueue's scheduler-performance baseline
// (test/performance/scheduler/configs/baseline/generator.yaml in v0.19.2, the same numbers as
// v0.15.0's default_generator_config.yaml) as a kueuelab trace and cluster spec,
// so the same load runs through the real control plane as real Jobs with pods on KWOK nodes.
//
// The baseline: 5 cohorts × 6 ClusterQueues, each with 20 CPUs of nominal quota and a borrowing
// limit of 100, reclaimWithinCohort Any and withinClusterQueue LowerPriority; per ClusterQueue 350
// small workloads (1 CPU, 200 ms, priority 50) created every 100 ms, 100 medium (5 CPUs, 500 ms,
// priority 100) every 500 ms and 50 large (20 CPUs, 1 s, priority 200) every 1.2 s: 15,000
// workloads. Kueue's harness runs them as Workloads without pods in wall time; here a millisecond
// of theirs is a millisecond of trace time, and each workload is a one-pod batch Job.
//
// With -generator, the classes' counts, creation intervals, runtimes and requests are read from a
// harness generator file of the baseline's structure (its cohorts, queues, quotas, preemption and
// three priorities), so that a config that moves the load, as hack/kueue-harness/configs/low-rate,
// is written as the same trace and spec.
//
// With -arrivals, each workload is submitted when Kueue's harness saw it created in a run of its
// own (the first_event_us column of the wlTimes.csv that hack/kueue-harness writes): the harness's
// generator creates workloads from sleeping goroutines whose create calls stretch the nominal
// intervals (60 s of nominal arrivals took ~99 s), so a replay of the nominal times asks a
// different question than the harness answered.
//
//	go run ./hack/kueueperf -out /tmp/kueueperf   # writes trace.jsonl and cluster.yaml
//	go run ./hack/kueueperf -out /tmp/kp1 -arrivals results/kueue-harness/baseline/run-1/wlTimes.csv
//	go run ./hack/kueueperf -out /tmp/kplow -generator hack/kueue-harness/configs/low-rate/generator.yaml
package main

import (
	"bytes"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/model/fielderr"
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
	arrivals := flag.String("arrivals", "", "a harness run's wlTimes.csv: submit each workload when the harness saw it created")
	generator := flag.String("generator", "", "a harness generator file of the baseline's structure: its classes' counts, intervals, runtimes and requests")
	flag.Parse()
	if *generator != "" {
		data, err := os.ReadFile(*generator)
		if err == nil {
			classes, err = readGenerator(*generator, data)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "kueueperf:", err)
			os.Exit(1)
		}
	}
	var at map[string]float64
	if *arrivals != "" {
		f, err := os.Open(*arrivals)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kueueperf:", err)
			os.Exit(1)
		}
		at, err = readArrivals(*arrivals, f)
		f.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "kueueperf:", err)
			os.Exit(1)
		}
	}
	if err := run(*out, *scale, at); err != nil {
		fmt.Fprintln(os.Stderr, "kueueperf:", err)
		os.Exit(1)
	}
}

// run writes the trace and the spec; at, when set, holds every workload's submit offset by id.
func run(out string, scale int, at map[string]float64) error {
	if scale < 1 {
		return fmt.Errorf("-scale %d: want ≥ 1", scale)
	}
	if at != nil && scale != 1 {
		return errors.New("-arrivals replays a whole harness run: -scale must be 1")
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
					id := workloadID(c, q, cl.name, i)
					submit := float64(i) * cl.intervalMs / 1000
					if at != nil {
						var ok bool
						if submit, ok = at[id]; !ok {
							return fmt.Errorf("-arrivals: no row for the harness's workload %s", harnessName(c, q, cl.name, i))
						}
					}
					wls = append(wls, &trace.Workload{
						SchemaVersion: trace.SchemaVersion, WorkloadID: id,
						SubmitTimeOffsetSec: submit, Namespace: ns,
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

func workloadID(c, q int, class string, i int) string {
	return fmt.Sprintf("%s-%s-%03d", queueName(c, q), class, i)
}

// harnessName is the namespace/name Kueue's harness gives the workload: its generator names a
// ClusterQueue (and its namespace) cq-<queue set>-<queue>-cohort-<cohort> and a workload
// <class>-<workload set>-<index>-<workload in set>; the baseline has one queue set and one
// workload per set, and its sets are small, medium, large in that order.
func harnessName(c, q int, class string, i int) string {
	set := map[string]int{"small": 0, "medium": 1, "large": 2}[class]
	return fmt.Sprintf("cq-0-%d-cohort-%d/%s-%d-%d-0", q, c, class, set, i)
}

var (
	harnessNS   = regexp.MustCompile(`^cq-0-(\d+)-cohort-(\d+)$`)
	harnessWork = regexp.MustCompile(`^(small|medium|large)-\d+-(\d+)-0$`)
)

// readArrivals reads a harness run's wlTimes.csv into submit offsets by kueuelab workload id, the
// earliest first event at 0.
func readArrivals(name string, r io.Reader) (map[string]float64, error) {
	cr := csv.NewReader(r)
	head, err := cr.Read()
	if err != nil {
		return nil, fielderr.New(name, 1, "", "no header: %v", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[h] = i
	}
	for _, want := range []string{"namespace", "name", "first_event_us"} {
		if _, ok := col[want]; !ok {
			return nil, fielderr.New(name, 1, want, "missing column (a wlTimes.csv of hack/kueue-harness has it)")
		}
	}
	us := map[string]int64{}
	first := int64(-1)
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fielderr.New(name, line, "", "%v", err)
		}
		ns, wl := rec[col["namespace"]], rec[col["name"]]
		m, w := harnessNS.FindStringSubmatch(ns), harnessWork.FindStringSubmatch(wl)
		if m == nil {
			return nil, fielderr.New(name, line, "namespace", "%q is not a baseline harness namespace (cq-0-<queue>-cohort-<cohort>)", ns)
		}
		if w == nil {
			return nil, fielderr.New(name, line, "name", "%q is not a baseline harness workload (<class>-<set>-<index>-0)", wl)
		}
		q, _ := strconv.Atoi(m[1])
		c, _ := strconv.Atoi(m[2])
		i, _ := strconv.Atoi(w[2])
		t, err := strconv.ParseInt(rec[col["first_event_us"]], 10, 64)
		if err != nil || t <= 0 {
			return nil, fielderr.New(name, line, "first_event_us", "%q: want Unix microseconds", rec[col["first_event_us"]])
		}
		id := workloadID(c, q, w[1], i)
		if _, dup := us[id]; dup {
			return nil, fielderr.New(name, line, "name", "%s/%s appears twice", ns, wl)
		}
		us[id] = t
		if first < 0 || t < first {
			first = t
		}
	}
	at := make(map[string]float64, len(us))
	for id, t := range us {
		at[id] = float64(t-first) / 1e6
	}
	return at, nil
}

// spec is the cluster: the baseline's queues, and CPU nodes enough for every cohort to use its
// whole quota (5 × 6 × 20 = 600 CPUs nominal) with room for the pods.
func spec() string {
	var b strings.Builder
	b.WriteString(`# Kueue's scheduler-performance baseline shape (hack/kueueperf).
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

// generatorFile is the part of Kueue's harness generator config (test/performance/scheduler's
// generator.yaml) this command reads.
type generatorFile struct {
	Cohorts []struct {
		ClassName  string `yaml:"className"`
		Count      int    `yaml:"count"`
		QueuesSets []struct {
			ClassName           string `yaml:"className"`
			Count               int    `yaml:"count"`
			NominalQuota        int    `yaml:"nominalQuota"`
			BorrowingLimit      int    `yaml:"borrowingLimit"`
			ReclaimWithinCohort string `yaml:"reclaimWithinCohort"`
			WithinClusterQueue  string `yaml:"withinClusterQueue"`
			WorkloadsSets       []struct {
				Count              int     `yaml:"count"`
				CreationIntervalMs float64 `yaml:"creationIntervalMs"`
				Workloads          []struct {
					ClassName string  `yaml:"className"`
					RuntimeMs float64 `yaml:"runtimeMs"`
					Priority  int     `yaml:"priority"`
					Request   int     `yaml:"request"`
				} `yaml:"workloads"`
			} `yaml:"workloadsSets"`
		} `yaml:"queuesSets"`
	} `yaml:"cohorts"`
}

// readGenerator reads a generator file's classes. The structure must be the baseline's (the
// trace's ids, the spec and the harness's names follow it); what may differ is each class's
// count, creation interval, runtime and request.
func readGenerator(name string, data []byte) ([]class, error) {
	var g generatorFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&g); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	bad := func(field, format string, args ...any) error {
		return fielderr.New(name, 0, field, format+" (the baseline's structure: 5 cohorts of 6 ClusterQueues, quota 20 borrowing 100, "+
			"reclaimWithinCohort Any, withinClusterQueue LowerPriority, workload sets small/50, medium/100, large/200 of one workload each)", args...)
	}
	if len(g.Cohorts) != 1 || g.Cohorts[0].Count != cohorts || len(g.Cohorts[0].QueuesSets) != 1 {
		return nil, bad("cohorts", "want one cohort class of %d cohorts with one queue set", cohorts)
	}
	qs := g.Cohorts[0].QueuesSets[0]
	if qs.Count != queuesPerCohort || qs.NominalQuota != nominalCPU || qs.BorrowingLimit != borrowCPU ||
		qs.ReclaimWithinCohort != "Any" || qs.WithinClusterQueue != "LowerPriority" {
		return nil, bad("cohorts[0].queuesSets[0]", "count %d, quota %d, borrowing %d, %s, %s", qs.Count, qs.NominalQuota, qs.BorrowingLimit, qs.ReclaimWithinCohort, qs.WithinClusterQueue)
	}
	if len(qs.WorkloadsSets) != len(classes) {
		return nil, bad("cohorts[0].queuesSets[0].workloadsSets", "%d sets, want %d", len(qs.WorkloadsSets), len(classes))
	}
	out := make([]class, len(classes))
	for i, ws := range qs.WorkloadsSets {
		field := fmt.Sprintf("cohorts[0].queuesSets[0].workloadsSets[%d]", i)
		want := classes[i]
		prio := map[string]int{"small": 50, "medium": 100, "large": 200}[want.name]
		if len(ws.Workloads) != 1 || ws.Workloads[0].ClassName != want.name || ws.Workloads[0].Priority != prio {
			return nil, bad(field, "want one workload of class %s, priority %d", want.name, prio)
		}
		w := ws.Workloads[0]
		if ws.Count < 1 || !(ws.CreationIntervalMs >= 0) || !(w.RuntimeMs > 0) || w.Request < 1 {
			return nil, bad(field, "count %d, interval %g ms, runtime %g ms, request %d: want a count, an interval ≥ 0, a runtime and a request > 0",
				ws.Count, ws.CreationIntervalMs, w.RuntimeMs, w.Request)
		}
		out[i] = class{name: want.name, count: ws.Count, intervalMs: ws.CreationIntervalMs, runtimeMs: w.RuntimeMs, cpu: w.Request, intent: want.intent}
	}
	return out, nil
}
