package render

import (
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
)

// testPlacer places every workload in its own namespace's queue, the way the cluster spec's
// team rules would, with a fixed GPU family and topology.
type testPlacer struct{ topology string }

func (t testPlacer) Place(w *trace.Workload) (Placement, error) {
	return Placement{
		Namespace:       w.Namespace,
		Queue:           w.Namespace + "-queue",
		PriorityClass:   "kueuelab-" + w.Intent(),
		GPUNodeSelector: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
		Tolerations:     []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		TopologyLevel:   t.topology,
	}, nil
}

// wl builds workloads the way the generator shapes them (model/gen: pod groups by role, the gang
// flag on every group of a gang workload).
type wl struct{ trace.Workload }

func makeWorkload(id string, f trace.Family) *wl {
	return &wl{trace.Workload{
		SchemaVersion:       trace.SchemaVersion,
		WorkloadID:          id,
		SubmitTimeOffsetSec: 12.4,
		Namespace:           "team-a",
		WorkloadType:        f,
		DurationSec:         3600,
		WorkloadClass:       trace.Class{CPU: "cpu.mixed", GPU: "gpu.compute_bound"},
		SharedIntensityProfile: trace.Profile{
			CPUUtilization: 0.28, GPUUtilization: 0.47, MemoryIntensity: 0.58, IOIntensity: 0.08, CPUFeedIntensityGPU: 0.56,
		},
		IntentClass: trace.IntentStandard,
	}}
}

func (w *wl) pods(role string, n int, cpu, mem string, gpus int) *wl {
	req := trace.Requests{trace.ResourceCPU: cpu, trace.ResourceMemory: mem}
	if gpus > 0 {
		req[trace.ResourceGPU] = fmt.Sprint(gpus)
	}
	w.Pods = append(w.Pods, trace.PodGroup{Role: role, Replicas: n, Requests: req, Gang: w.Gang})
	return w
}

func (w *wl) gang() *wl { w.Gang = true; return w }

func (w *wl) obj() *trace.Workload { return &w.Workload }

// jobsOf writes the job records the generator would: one per pod, work from model/work.
func jobsOf(w *trace.Workload) []*trace.Job {
	var jobs []*trace.Job
	for _, g := range w.Pods {
		for i := range g.Replicas {
			jobs = append(jobs, &trace.Job{
				SchemaVersion: trace.SchemaVersion,
				JobID:         fmt.Sprintf("%s-%s-%02d", w.WorkloadID, g.Role, i),
				WorkloadID:    w.WorkloadID, WorkloadType: w.WorkloadType, PodRole: g.Role, Gang: g.Gang,
				SubmitTimeOffsetSec: w.SubmitTimeOffsetSec, Namespace: w.Namespace,
				PodTemplate: trace.PodTemplate{Requests: g.Requests},
				Work: trace.Work{
					CPUUnits: work.Units(w.DurationSec, g.Requests.Value(trace.ResourceCPU), w.SharedIntensityProfile.CPUUtilization, 1, g.Role),
					GPUUnits: work.Units(w.DurationSec, float64(g.GPUs()), w.SharedIntensityProfile.GPUUtilization, 1, g.Role),
				},
				Sensitivity:     trace.Sensitivity{CPU: 0.65, GPU: 0.9},
				WorkloadClass:   w.WorkloadClass,
				WorkloadProfile: w.SharedIntensityProfile,
				IntentClass:     w.IntentClass,
			})
		}
	}
	return jobs
}

// shapeOf returns a generator-shaped workload of family f with g GPUs (K trials for HPO).
func shapeOf(id string, f trace.Family, g int) *trace.Workload {
	w := makeWorkload(id, f)
	switch f {
	case trace.DistributedTraining:
		w.gang().pods(trace.RoleLauncher, 1, "2", "4Gi", 0).pods(trace.RoleWorker, g, "8", "32Gi", 1)
	case trace.ParameterServerTraining:
		ps := 1
		if g >= 4 {
			ps = 2
		}
		w.gang().pods(trace.RolePS, ps, "4", "16Gi", 0).pods(trace.RoleWorker, g, "6", "24Gi", 1)
	case trace.HPOExperiment:
		w.pods(trace.RoleController, 1, "1", "2Gi", 0).pods(trace.RoleTrial, g, "4", "16Gi", 1)
	case trace.SingleGPUTraining, trace.DebugEval:
		w.pods(trace.RoleMain, 1, "8", "48Gi", g)
	default:
		w.pods(trace.RoleMain, 1, "16", "64Gi", 0)
	}
	return w.obj()
}

// randomWorkload draws a workload with the generator's structure and random sizes.
func randomWorkload(rng *rand.Rand, i int) *trace.Workload {
	f := trace.Families[rng.IntN(len(trace.Families))]
	g := []int{1, 2, 4, 8}[rng.IntN(4)]
	w := &wl{*shapeOf(fmt.Sprintf("workload-%06d", i), f, g)}
	w.DurationSec = 30 + rng.Float64()*86400
	w.SubmitTimeOffsetSec = float64(i) * 7.5
	w.Namespace = fmt.Sprintf("team-%c", 'a'+rune(rng.IntN(4)))
	w.IntentClass = []string{trace.IntentPerformance, trace.IntentStandard, trace.IntentEco, ""}[rng.IntN(4)]
	if rng.IntN(5) == 0 {
		w.CheckpointIntervalSec = 600
	}
	for j := range w.Pods {
		r := w.Pods[j].Requests
		r[trace.ResourceCPU] = []string{"500m", "1", "2", "3500m", "8", "16"}[rng.IntN(6)]
		r[trace.ResourceMemory] = []string{"512Mi", "4Gi", "12Gi", "48Gi", "1.5Gi"}[rng.IntN(5)]
	}
	return w.obj()
}
