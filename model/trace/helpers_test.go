package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/work"
)

// specLines returns the two example lines of the schema (testdata/spec.jsonl).
func specLines(t testing.TB) (workload, job string) {
	t.Helper()
	b, err := os.ReadFile("testdata/spec.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("spec.jsonl has %d lines, want 2", len(lines))
	}
	return lines[0], lines[1]
}

// specTrace is the spec workload with all five of its job records, one line each.
func specTrace(t testing.TB) []string {
	t.Helper()
	wl, job := specLines(t)
	lines := []string{wl}
	launcher := strings.NewReplacer(
		`"jobId":"workload-000001-worker-01"`, `"jobId":"workload-000001-launcher-00"`,
		`"podRole":"worker"`, `"podRole":"launcher"`,
		`{"cpu":"4","memory":"12Gi","nvidia.com/gpu":"1"}`, `{"cpu":"2","memory":"4Gi"}`,
	).Replace(job)
	lines = append(lines, launcher)
	for i := 1; i <= 4; i++ {
		lines = append(lines, strings.Replace(job, "worker-01", fmt.Sprintf("worker-%02d", i), 1))
	}
	return lines
}

// readAll reads a trace given as text, returning its records, the warnings and the reader.
func readAll(t testing.TB, text string, opts Options) ([]Record, []string, *Reader, error) {
	t.Helper()
	var warnings []string
	opts.Warn = func(s string) { warnings = append(warnings, s) }
	r, err := NewReader(strings.NewReader(text), "t.jsonl", opts)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return recs, warnings, r, nil
		}
		if err != nil {
			return recs, warnings, r, err
		}
		recs = append(recs, rec)
	}
}

// genTrace makes n logical workloads (seeded) with their job records, consistent with package work.
func genTrace(n int, seed uint64) ([]*Workload, [][]*Job) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ws := make([]*Workload, n)
	jobs := make([][]*Job, n)
	submit := 0.0
	for i := range n {
		submit += rng.ExpFloat64() * 30
		fam := Families[rng.IntN(len(Families))]
		gpus := []int{1, 2, 4, 8}[rng.IntN(4)]
		w := &Workload{
			SchemaVersion:       SchemaVersion,
			WorkloadID:          fmt.Sprintf("workload-%06d", i+1),
			SubmitTimeOffsetSec: float64(int(submit*10)) / 10,
			Namespace:           []string{"default", "team-a", "team-b"}[rng.IntN(3)],
			WorkloadType:        fam,
			DurationSec:         float64(60 + rng.IntN(20000)),
			WorkloadClass:       Class{CPU: "cpu.mixed", GPU: "gpu.compute_bound"},
			SharedIntensityProfile: Profile{CPUUtilization: 0.28, GPUUtilization: float64(rng.IntN(100)) / 100,
				MemoryIntensity: 0.58, IOIntensity: 0.08, CPUFeedIntensityGPU: 0.56},
			IntentClass: []string{IntentPerformance, IntentStandard, IntentEco}[rng.IntN(3)],
		}
		gpu := Requests{ResourceCPU: "4", ResourceMemory: "12Gi", ResourceGPU: "1"}
		switch {
		case fam == DistributedTraining:
			w.Gang = true
			w.Pods = []PodGroup{{Role: RoleLauncher, Replicas: 1, Requests: Requests{ResourceCPU: "2", ResourceMemory: "4Gi"}, Gang: true},
				{Role: RoleWorker, Replicas: gpus, Requests: gpu, Gang: true}}
		case fam == ParameterServerTraining:
			w.Gang = true
			w.Pods = []PodGroup{{Role: RoleWorker, Replicas: gpus, Requests: gpu, Gang: true},
				{Role: RolePS, Replicas: 1, Requests: Requests{ResourceCPU: "8", ResourceMemory: "32Gi"}, Gang: true}}
		case fam == HPOExperiment:
			w.Pods = []PodGroup{{Role: RoleController, Replicas: 1, Requests: Requests{ResourceCPU: "1", ResourceMemory: "2Gi"}},
				{Role: RoleTrial, Replicas: 2 + rng.IntN(4), Requests: gpu}}
		case fam.GPU():
			w.Pods = []PodGroup{{Role: RoleMain, Replicas: 1, Requests: Requests{ResourceCPU: "8", ResourceMemory: "32Gi", ResourceGPU: fmt.Sprint(gpus)}}}
		default:
			w.Pods = []PodGroup{{Role: RoleMain, Replicas: 1, Requests: Requests{ResourceCPU: "16", ResourceMemory: "64Gi"}}}
		}
		ws[i] = w
		jobs[i] = jobsFor(w)
	}
	return ws, jobs
}

// jobsFor makes the job records of w, with work units from its duration (package work).
func jobsFor(w *Workload) []*Job {
	var jobs []*Job
	rates := work.DefaultRates()
	prof := w.SharedIntensityProfile
	for _, p := range w.Pods {
		for k := range p.Replicas {
			jobs = append(jobs, &Job{
				SchemaVersion:       SchemaVersion,
				JobID:               fmt.Sprintf("%s-%s-%02d", w.WorkloadID, p.Role, k),
				WorkloadID:          w.WorkloadID,
				WorkloadType:        w.WorkloadType,
				PodRole:             p.Role,
				Gang:                w.Gang,
				SubmitTimeOffsetSec: w.SubmitTimeOffsetSec,
				Namespace:           w.Namespace,
				PodTemplate:         PodTemplate{Requests: p.Requests},
				Work: Work{
					CPUUnits: work.Units(w.DurationSec, p.Requests.Value(ResourceCPU), prof.CPUUtilization, rates.CPUPerCore, p.Role),
					GPUUnits: gpuUnits(w.DurationSec, p.Requests, prof, rates, p.Role),
				},
				Sensitivity:     Sensitivity{CPU: 0.65, GPU: 0.9},
				WorkloadClass:   w.WorkloadClass,
				WorkloadProfile: prof,
				IntentClass:     w.IntentClass,
			})
		}
	}
	return jobs
}

// encodeTrace writes workloads (when withWorkloads) followed by their jobs with the package's Writer.
func encodeTrace(t testing.TB, ws []*Workload, jobs [][]*Job, withWorkloads bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for i := range ws {
		if withWorkloads {
			if err := w.WriteWorkload(ws[i]); err != nil {
				t.Fatal(err)
			}
		}
		for _, j := range jobs[i] {
			if err := w.WriteJob(j); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gpuUnits(d float64, req Requests, prof Profile, rates work.Rates, role string) float64 {
	gpus, share := req.GPUWork()
	return work.Units(d, gpus, share*prof.GPUUtilization, rates.GPUPerGPU, role)
}
