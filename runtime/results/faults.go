package results

import (
	"fmt"
	"io"
	"strconv"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/trace"
)

// Faults, checkpoints and restarts in the results. A fault the runner injected that hit
// a workload's pods is an EvFault event on that workload; at the end of the run the agent's
// account of what faults and checkpoints cost each workload is an EvFaultCost event. Every fault,
// including those that hit nothing, is in faults.jsonl (FaultsFile).

// FaultsFile lists every fault injected during a run, one JSON object per line (FaultRecord).
const FaultsFile = "faults.jsonl"

// Event types of faults.
const (
	// EvFault: an injected fault hit one of the workload's pods (Object; Reason the fault's kind,
	// Node its node, Message what it did).
	EvFault EventType = "fault"
	// EvFaultCost: what faults and checkpoints cost the workload over the run (the agent's
	// account: Restarts, LostGPUSec, CheckpointGPUSec, RestartGPUSec).
	EvFaultCost EventType = "fault_cost"
)

// FaultTolerance is what faults and checkpoints did to a workload (Record) or a group.
type FaultTolerance struct {
	// Faults counts the injected faults that hit the workload's pods.
	Faults int `json:"faults,omitempty"`
	// Restarts counts the trace times at which its running work was interrupted (a pod failed,
	// was evicted or preempted, or restarted in place) and restarted from its last checkpoint.
	Restarts int `json:"restarts,omitempty"`
	// LostGPUSec is GPUs × progress thrown away: the work redone.
	LostGPUSec float64 `json:"lostGpuSec,omitempty"`
	// CheckpointGPUSec and RestartGPUSec are GPUs × trace seconds paused writing checkpoints and
	// restarting.
	CheckpointGPUSec float64 `json:"checkpointGpuSec,omitempty"`
	RestartGPUSec    float64 `json:"restartGpuSec,omitempty"`
}

// FaultRecord is one line of faults.jsonl: a fault, when, where, and what it hit.
type FaultRecord struct {
	T    float64 `json:"t"`
	Kind string  `json:"kind"` // node, gpu or pod (model/fault)
	Node string  `json:"node,omitempty"`
	GPU  *int    `json:"gpu,omitempty"`
	// Workload is the trace workload a pod fault named; Random is set for a fault drawn from the
	// rates.
	Workload string `json:"workload,omitempty"`
	Random   bool   `json:"random,omitempty"`
	// DownSec is how long a node fault keeps the node NotReady.
	DownSec float64 `json:"downSec,omitempty"`
	// Pods are the pods it failed, restarted or evicted (namespace/name), Workloads their trace
	// workloads; Effect says what happened ("failed", "restarted", "evicted at 300", "hit no pod").
	Pods      []string `json:"pods,omitempty"`
	Workloads []string `json:"workloads,omitempty"`
	Effect    string   `json:"effect"`
}

// FaultMeta counts a run's faults by kind, and those that hit nothing or were dropped.
type FaultMeta struct {
	Node    int `json:"node"`
	GPU     int `json:"gpu"`
	Pod     int `json:"pod"`
	HitPods int `json:"hitPods"`
	// Idle counts the faults that hit no pod of the run (an idle GPU, a workload not running);
	// Dropped those that fell on a node already down.
	Idle    int `json:"idle"`
	Dropped int `json:"dropped"`
}

// applyFault folds a fault event into r.
func (r *Record) applyFault(e *Event) {
	switch e.Type {
	case EvFault:
		r.Faults++
	case EvFaultCost:
		r.Restarts += e.Restarts
		r.LostGPUSec += e.LostGPUSec
		r.CheckpointGPUSec += e.CheckpointGPUSec
		r.RestartGPUSec += e.RestartGPUSec
	}
}

// FaultTotals are a group's fault figures: FaultTolerance summed, GPU time in hours.
type FaultTotals struct {
	Faults             int     `json:"faults,omitempty"`
	Restarts           int     `json:"restarts,omitempty"`
	LostGPUHours       float64 `json:"lostGpuHours,omitempty"`
	CheckpointGPUHours float64 `json:"checkpointGpuHours,omitempty"`
	RestartGPUHours    float64 `json:"restartGpuHours,omitempty"`
}

func (t *FaultTotals) add(r *Record) {
	t.Faults += r.Faults
	t.Restarts += r.Restarts
	t.LostGPUHours += r.LostGPUSec / 3600
	t.CheckpointGPUHours += r.CheckpointGPUSec / 3600
	t.RestartGPUHours += r.RestartGPUSec / 3600
}

// any reports whether the group saw faults, restarts or checkpoints.
func (t FaultTotals) any() bool {
	return t.Faults > 0 || t.Restarts > 0 || t.LostGPUHours > 0 || t.CheckpointGPUHours > 0 || t.RestartGPUHours > 0
}

// faultColumns are workloads.csv's columns of FaultTolerance, in order.
var faultColumns = []string{"faults", "restarts", "lost_gpu_seconds", "checkpoint_gpu_seconds", "restart_gpu_seconds"}

func (f FaultTolerance) appendColumns(row []string) []string {
	return append(row, strconv.Itoa(f.Faults), strconv.Itoa(f.Restarts), num(f.LostGPUSec), num(f.CheckpointGPUSec), num(f.RestartGPUSec))
}

func (f *FaultTolerance) set(col string, v float64) {
	switch col {
	case "faults":
		f.Faults = int(v)
	case "restarts":
		f.Restarts = int(v)
	case "lost_gpu_seconds":
		f.LostGPUSec = v
	case "checkpoint_gpu_seconds":
		f.CheckpointGPUSec = v
	case "restart_gpu_seconds":
		f.RestartGPUSec = v
	}
}

// writeFaultLine prints the run's fault figures under the summary table, when there are any.
func (s *Summary) writeFaultLine(w io.Writer) error {
	var all *Group
	for i := range s.Groups {
		if s.Groups[i].Scope == "all" {
			all = &s.Groups[i]
		}
	}
	if all == nil || (s.Faults == nil && !all.FaultTotals.any()) {
		return nil
	}
	if f := s.Faults; f != nil {
		if _, err := fmt.Fprintf(w, "faults: %d node, %d GPU, %d pod; %d pods hit, %d hit nothing, %d dropped (node already down)\n",
			f.Node, f.GPU, f.Pod, f.HitPods, f.Idle, f.Dropped); err != nil {
			return err
		}
	}
	t := all.FaultTotals
	_, err := fmt.Fprintf(w, "restarts %d; GPU-hours lost (work redone) %.2f, checkpointing %.2f, restarting %.2f\n",
		t.Restarts, t.LostGPUHours, t.CheckpointGPUHours, t.RestartGPUHours)
	return err
}

// idealSec is w's JCT alone on an uncapped node: its work, and a pause for every checkpoint it
// takes before the end when checkpoints cost one (runtime/agent/engine).
func idealSec(w *trace.Workload) float64 {
	if w.CheckpointCostSec <= 0 {
		return w.DurationSec
	}
	return w.DurationSec + float64(fault.Checkpoints(w.DurationSec, w.CheckpointIntervalSec))*w.CheckpointCostSec
}
