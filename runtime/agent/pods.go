package agent

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
)

// Progress is the JSON of contract.Progress: the engine's snapshot, the trace seconds the pod has
// been running, and the share of its work done, for people reading the annotation.
type Progress struct {
	engine.Snapshot
	RunSec   float64 `json:"runSec"`
	Fraction float64 `json:"fraction"`
}

// podState is what the agent remembers of a tracked pod.
type podState struct {
	uid        types.UID
	id         engine.PodID
	ns, name   string
	gang       string // "" unless the pod is in a gang
	workload   string // the contract's workload id: where energy of a pod lost before completion is booked
	ckptKey    string // namespace/workload/role: where an evicted pod's checkpoint is kept
	ckpt       bool   // the workload declares a checkpoint interval
	duration   float64
	failAtEnd  bool
	handoff    bool    // a runner in this process follows the pod (Config.Handoff)
	gpus       int     // GPUs the pod requests: what its lost work and pauses cost
	restartSec float64 // the workload's restart overhead
	restarts   int32   // the containers' restart count last seen
	owed       bool    // resumed an interrupted pod and has not worked since (faults.go)
	// resumedFrom is the role's checkpoint the pod resumed from (resumed: it did).
	resumedFrom float64
	resumed     bool
	// service: the pod serves until its owner deletes it (Config.ServicePods); its completion
	// write leaves it running.
	service bool
	// running: started in the engine and not stopped; completing: the completion write is queued.
	running, completing, terminal bool
	runBase                       float64 // run seconds before the current run (earlier agents, earlier runs)
	startedAt                     float64 // engine time the current run started
	written                       float64 // remainingSec last written to contract.Progress (-1: never)
}

// runSec is how long the pod has been running, in trace seconds, at engine time now.
func (s *podState) runSec(now float64) float64 {
	if s.running {
		return s.runBase + now - s.startedAt
	}
	return s.runBase
}

// podRequests sums the containers' CPU (cores) and GPU requests.
func podRequests(p *corev1.Pod) (cpu float64, gpus int) {
	for i := range p.Spec.Containers {
		r := p.Spec.Containers[i].Resources.Requests
		if q, ok := r[corev1.ResourceCPU]; ok {
			cpu += q.AsApproximateFloat64()
		}
		gpus += int(gpuCount(r))
		if gpus == 0 {
			gpus += int(gpuCount(p.Spec.Containers[i].Resources.Limits))
		}
	}
	return cpu, gpus
}

// defaultSensitivity is the per-family fallback when the trace had no job records: the midpoint
// of the generator's default priors (model/gen/profiles/default.yaml).
func defaultSensitivity(f trace.Family) engine.Sensitivity {
	switch f {
	case trace.DebugEval:
		return engine.Sensitivity{CPU: 0.5, GPU: 0.6}
	case trace.SingleGPUTraining:
		return engine.Sensitivity{CPU: 0.4, GPU: 0.9}
	case trace.DistributedTraining:
		return engine.Sensitivity{CPU: 0.65, GPU: 0.9}
	case trace.ParameterServerTraining:
		return engine.Sensitivity{CPU: 0.7, GPU: 0.825}
	case trace.HPOExperiment:
		return engine.Sensitivity{CPU: 0.4, GPU: 0.875}
	case trace.CPUPreprocess:
		return engine.Sensitivity{CPU: 0.9}
	default: // cpu_analytics
		return engine.Sensitivity{CPU: 0.95}
	}
}

// podSpec reads the render contract and the agent's own annotations of a pod.
func podSpec(p *corev1.Pod, c *contract.Pod, failureRate float64, seed uint64) (engine.PodSpec, bool, error) {
	key := p.Namespace + "/" + p.Name
	cpu, gpus := podRequests(p)
	s := engine.PodSpec{
		Key: key, WorkloadID: c.WorkloadID, CPURequest: cpu, GPURequest: gpus,
		CPUUnits: c.Work.CPUUnits, GPUUnits: c.Work.GPUUnits, DurationSec: c.DurationSec,
		Profile: hw.Profile{
			CPUUtilization: c.Profile.CPUUtilization, GPUUtilization: c.Profile.GPUUtilization,
			MemoryIntensity: c.Profile.MemoryIntensity,
		},
		CheckpointIntervalSec: c.CheckpointIntervalSec,
		CheckpointCostSec:     c.CheckpointCostSec,
		MIGProfile:            c.MIGProfile,
		MIGSlices:             c.MIGSlices,
	}
	if c.GangSize > 0 {
		s.GangID, s.GangSize = p.Namespace+"/"+c.WorkloadID, c.GangSize
	}
	if c.Sensitivity != nil {
		s.Sensitivity = engine.Sensitivity{CPU: c.Sensitivity.CPU, GPU: c.Sensitivity.GPU}
	} else {
		s.Sensitivity = defaultSensitivity(c.Family)
	}
	failAtEnd := false
	if v, ok := p.Annotations[contract.InjectFailure]; ok {
		v = strings.TrimSpace(v)
		switch v {
		case "true":
			failAtEnd = true
		case "false", "":
		default:
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return s, false, fmt.Errorf("pod %s: annotation %s: %q is neither true, false nor a fraction in (0, 1]", key, contract.InjectFailure, v)
			}
			if f == 1 {
				failAtEnd = true
			} else {
				s.FailAtFraction = f
			}
		}
	} else if failureRate > 0 {
		// One generator per pod, seeded by its name: the draw does not depend on event order.
		h := fnv.New64a()
		_, _ = h.Write([]byte(key))
		r := rand.New(rand.NewPCG(seed, h.Sum64()))
		if r.Float64() < failureRate {
			s.FailAtFraction = 0.05 + 0.9*r.Float64()
		}
	}
	return s, failAtEnd, nil
}

// parseProgress reads contract.Progress; ok is false when the pod has none.
func parseProgress(p *corev1.Pod) (Progress, bool, error) {
	v, ok := p.Annotations[contract.Progress]
	if !ok {
		return Progress{}, false, nil
	}
	var pr Progress
	if err := json.Unmarshal([]byte(v), &pr); err != nil {
		return Progress{}, false, fmt.Errorf("pod %s/%s: annotation %s: %w", p.Namespace, p.Name, contract.Progress, err)
	}
	return pr, true, nil
}

// contractOf is what the pod says about itself: the render contract, or for a pod nobody
// rendered (a user's own manifest) the contract's defaults, its workload being its owner.
func contractOf(p *corev1.Pod) (*contract.Pod, error) {
	if contract.Rendered(p.Annotations) {
		return contract.Parse(p.Annotations)
	}
	workload := p.Name
	if ref := metav1.GetControllerOf(p); ref != nil {
		workload = ref.Name
	}
	cpu, gpus := podRequests(p)
	return contract.Unrendered(p.Annotations, workload, cpu, gpus)
}

// servesUntilDeleted reports whether p matches one of the service pod selectors.
func (a *Agent) servesUntilDeleted(p *corev1.Pod) bool {
	for _, sel := range a.servicePods {
		if sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}
