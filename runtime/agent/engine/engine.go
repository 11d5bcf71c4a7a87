// Package engine is the agent's in-memory simulation: nodes, pods and gangs as plain structs,
// advanced tick by tick in trace seconds with the physics of model/hw. It knows nothing about
// Kubernetes; the agent feeds it what it reads from the API and writes back what Tick reports.
package engine

import (
	"errors"
	"fmt"
	"math"

	"github.com/kueuelab/kueuelab/model/hw"
)

// NodeID and PodID index the engine's slices; an ID is valid until its object is removed.
type (
	NodeID int32
	PodID  int32
)

// NodeSpec describes a simulated node.
type NodeSpec struct {
	Name      string
	GPUFamily string // catalog family; "" for a CPU-only node
	GPUs      int
	CPUCores  float64 // 0 means the CPU model's cores
	CPUModel  string  // "" or unknown means the catalog's default model
	// GPUCapW is the per-GPU power limit in watts; 0 is uncapped (see hw.GPU.ClampCap).
	GPUCapW float64
	// CPUCapFraction is the CPU power cap as a fraction of full-load power; 0 is uncapped.
	CPUCapFraction float64
	// GPUReplicas > 1 shares each GPU by time-slicing, as NVIDIA's device plugin does with
	// sharing.timeSlicing: the node advertises GPUs × GPUReplicas devices, a pod's GPURequest
	// counts replicas, and the pods whose replicas are on one GPU share its compute (timeslice.go).
	GPUReplicas int
}

// Sensitivity says how strongly progress follows CPU and GPU speed, each in [0, 1].
type Sensitivity struct{ CPU, GPU float64 }

// PodSpec describes a pod as render wrote it: its work, shape and behaviour.
type PodSpec struct {
	Key        string // namespace/name
	WorkloadID string
	GangID     string // "" when the pod is not part of a gang
	GangSize   int
	CPURequest float64 // cores
	GPURequest int
	CPUUnits   float64
	GPUUnits   float64
	// DurationSec is how long the pod runs alone on an uncapped node; the natural rates are
	// units / DurationSec, so such a pod finishes in exactly DurationSec.
	DurationSec float64
	Sensitivity Sensitivity
	Profile     hw.Profile
	// CheckpointIntervalSec > 0: the workload checkpoints every interval of progressing time and
	// an evicted pod resumes from its last checkpoint instead of from zero.
	CheckpointIntervalSec float64
	// CheckpointCostSec is the pause each checkpoint costs: the pod makes no progress (its GPUs
	// draw idle power) for that many trace seconds, and the checkpoint counts once the pause ends.
	CheckpointCostSec float64
	// FailAtFraction in (0, 1] makes the pod fail once that share of its work is done; 0 never.
	FailAtFraction float64
	// MIGProfile and MIGSlices: the pod runs on MIGSlices slices of that MIG profile instead of
	// whole GPUs (GPURequest 0). Its speed and power come from hw.GPU.SliceOperating on its
	// node's family, and it occupies its slices' compute share of the node's GPUs.
	MIGProfile string
	MIGSlices  int
}

// Finished is a pod that completed (or failed) during a tick.
type Finished struct {
	Pod        PodID
	Key        string
	WorkloadID string
	AtSec      float64 // exact trace time of completion
	Failed     bool
	EnergyJ    float64
	// BusyGPUSec is the compute a pod on time-sliced GPUs used, in GPU-seconds (BusyGPUSec).
	BusyGPUSec float64
}

// Snapshot is a pod's progress as the agent persists it: remaining work (natural seconds and
// units), the workload's last checkpoint, and the energy so far; then what faults and
// checkpoints cost it so far, in trace seconds.
type Snapshot struct {
	RemainingSec       float64 `json:"remainingSec"`
	RemainingCPUUnits  float64 `json:"remainingCpuUnits"`
	RemainingGPUUnits  float64 `json:"remainingGpuUnits"`
	CheckpointSec      float64 `json:"checkpointSec"`
	SinceCheckpointSec float64 `json:"sinceCheckpointSec"`
	EnergyJ            float64 `json:"energyJ"`
	// PauseSec is the pause still ahead (a checkpoint being written, or a restart).
	PauseSec float64 `json:"pauseSec,omitempty"`
	// Checkpoints counts the checkpoints taken; CheckpointPauseSec and RestartPauseSec are the
	// trace seconds spent paused for checkpoints and for restarts.
	Checkpoints        int     `json:"checkpoints,omitempty"`
	CheckpointPauseSec float64 `json:"checkpointPauseSec,omitempty"`
	RestartPauseSec    float64 `json:"restartPauseSec,omitempty"`
	// LostSec is the progress (trace seconds the pod made progress) that rewinds threw away:
	// work done since the last checkpoint when the pod or its gang was interrupted.
	LostSec float64 `json:"lostSec,omitempty"`
	// BusyGPUSec is the compute a pod on time-sliced GPUs used so far (Engine.BusyGPUSec).
	BusyGPUSec float64 `json:"busyGpuSec,omitempty"`
}

// GangStatus reports a gang with some but not all members running: it cannot progress.
type GangStatus struct {
	ID           string
	Size         int
	Present      int // running or already finished members
	BlockedSince float64
}

// Stats summarise the last tick.
type Stats struct {
	Running     int // pods running and not finished
	Progressing int
	GangBlocked int
}

type node struct {
	name   string
	last   float64 // event-driven mode: the time its energy and its pods are integrated to
	gpu    *hw.GPU
	cpu    *hw.CPU
	gpus   float64
	cores  float64
	capW   float64
	cpuCap float64
	pods   []PodID
	power  float64
	energy float64
	// replicas > 1: the GPUs are time-sliced (NodeSpec.GPUReplicas); ts is their per-GPU state.
	replicas int
	ts       []sliceGPU
}

type pod struct {
	key, workload string
	node          NodeID
	nodeSlot      int32
	gang          int32
	gangSlot      int32
	inUse         bool
	running       bool
	done          bool
	failed        bool
	blocked       bool
	dirty         bool
	cpuReq, gpus  float64
	// migProfile and migSlices as in PodSpec; mig is the profile on the node the pod runs on.
	migProfile string
	migSlices  int
	mig        *hw.MIGProfile
	// gpuReq is the pod's GPURequest; on a time-sliced node it counts replicas, and tsGPUs are
	// the node's GPUs its replicas were given (one entry per replica).
	gpuReq int
	tsGPUs []int32
	// tsBusy is the compute it uses of its time-sliced GPUs while it progresses (timeSlice), busy
	// its integral.
	tsBusy, busy  float64
	duration      float64
	remaining     float64 // natural seconds of work left
	rateCPU       float64 // units per natural second
	rateGPU       float64
	sens          Sensitivity
	prof          hw.Profile
	ckptEvery     float64
	ckptCost      float64
	ckptRemaining float64 // remaining at the last checkpoint that counts
	sinceCkpt     float64 // progress seconds since the last checkpoint began (the interval's clock)
	sinceValid    float64 // progress seconds since the last checkpoint that counts, or the last rewind
	pause         float64 // trace seconds of pause left (kind and accounting in Engine.acct)
	failRemaining float64 // remaining at which the pod fails (0: it succeeds at 0)
	// Per-tick state and caches.
	gpuW, tput   float64 // per-GPU power and throughput under the node's cap (valid unless dirty)
	podGPURunW   float64 // what its GPUs draw while it progresses
	podGPUIdleW  float64 // what those GPUs draw while it pauses, waits or once it stops
	power, speed float64 // power as the tick started (paused: its GPUs idle)
	nat          float64 // the pod's own speed, before a gang runs it at its slowest member's
	energy       float64
}

// podAcct is what checkpoints and faults did to a pod: kept apart from pod, whose hot fields the
// tick walks for every pod, because it changes only at checkpoints, pauses and rewinds.
type podAcct struct {
	pending      float64 // remaining at the checkpoint being written (-1: none)
	pauseRestart bool    // the pause is a restart's, not a checkpoint's
	checkpoints  int
	ckptPauseSec float64
	restartPause float64
	lostSec      float64
}

type gang struct {
	id           string
	size         int
	members      []PodID
	inUse        bool
	ready        bool
	blocked      bool
	blockedSince float64
}

// Engine holds the simulated cluster. It is not safe for concurrent use.
type Engine struct {
	cat      *hw.Catalog
	now      float64
	nodes    []node
	nodeIdx  map[string]NodeID
	pods     []pod
	acct     []podAcct // by PodID, beside pods
	podIdx   map[string]PodID
	freePods []PodID
	gangs    []gang
	gangIdx  map[string]int32
	freeGang []int32
	finished []Finished
	stats    Stats
	// ev is the event-driven mode's bookkeeping (NewEventDriven); nil for a ticked engine.
	ev *eventState
}

// New returns an empty engine using the catalog's physics.
func New(cat *hw.Catalog) *Engine {
	return &Engine{cat: cat, nodeIdx: map[string]NodeID{}, podIdx: map[string]PodID{}, gangIdx: map[string]int32{}}
}

// Now is the trace time reached by the ticks so far.
func (e *Engine) Now() float64 { return e.now }

// Stats describe the last tick (event-driven: the current state).
func (e *Engine) Stats() Stats {
	if e.ev != nil {
		return e.statsEvents()
	}
	return e.stats
}

// AddNode registers a node.
func (e *Engine) AddNode(s NodeSpec) (NodeID, error) {
	if s.Name == "" {
		return 0, errors.New("add node: empty name")
	}
	if _, dup := e.nodeIdx[s.Name]; dup {
		return 0, fmt.Errorf("add node %s: already exists", s.Name)
	}
	n := node{name: s.Name, gpus: float64(s.GPUs), cpuCap: s.CPUCapFraction}
	if s.GPUs < 0 {
		return 0, fmt.Errorf("add node %s: gpus %d < 0", s.Name, s.GPUs)
	}
	if s.GPUReplicas > 1 {
		if s.GPUs == 0 {
			return 0, fmt.Errorf("add node %s: %d GPU replicas but no GPUs", s.Name, s.GPUReplicas)
		}
		n.replicas, n.ts = s.GPUReplicas, make([]sliceGPU, s.GPUs)
	}
	if s.GPUs > 0 {
		g, ok := e.cat.GPU(s.GPUFamily)
		if !ok {
			return 0, fmt.Errorf("add node %s: unknown GPU family %q", s.Name, s.GPUFamily)
		}
		n.gpu = g
		n.capW = g.ClampCap(s.GPUCapW)
	}
	cpu, _ := e.cat.CPU(s.CPUModel)
	if cpu == nil {
		return 0, fmt.Errorf("add node %s: catalog has no default CPU model", s.Name)
	}
	n.cpu = cpu
	n.cores = s.CPUCores
	if n.cores <= 0 {
		n.cores = cpu.Cores
	}
	id := NodeID(len(e.nodes))
	n.last = e.now
	e.nodes = append(e.nodes, n)
	e.nodeIdx[s.Name] = id
	e.changedNode(id)
	return id, nil
}

// Node looks a node up by name.
func (e *Engine) Node(name string) (NodeID, bool) {
	id, ok := e.nodeIdx[name]
	return id, ok
}

// SetGPUCap changes a node's per-GPU power cap (0 = uncapped) and returns the cap applied.
func (e *Engine) SetGPUCap(id NodeID, capW float64) float64 {
	n := &e.nodes[id]
	if n.gpu == nil {
		return 0
	}
	e.syncNode(id)
	defer e.changedNode(id)
	n.capW = n.gpu.ClampCap(capW)
	for _, pid := range n.pods {
		e.pods[pid].dirty = true
	}
	return n.capW
}

// SetCPUCap changes a node's CPU power cap as a fraction of full-load power (0 = uncapped).
func (e *Engine) SetCPUCap(id NodeID, fraction float64) {
	e.syncNode(id)
	e.nodes[id].cpuCap = fraction
	e.changedNode(id)
}

// NodePower is the node's power during the last tick, in watts (event-driven: its power now).
func (e *Engine) NodePower(id NodeID) float64 {
	e.refresh()
	return e.nodes[id].power
}

// NodeEnergy is the energy the node used so far, in joules of trace time.
func (e *Engine) NodeEnergy(id NodeID) float64 {
	e.syncNode(id)
	return e.nodes[id].energy
}

// AddPod registers a pod (not yet running).
func (e *Engine) AddPod(s PodSpec) (PodID, error) {
	if err := validatePod(&s); err != nil {
		return 0, err
	}
	if _, dup := e.podIdx[s.Key]; dup {
		return 0, fmt.Errorf("add pod %s: already exists", s.Key)
	}
	p := pod{
		key: s.Key, workload: s.WorkloadID, node: -1, gang: -1, inUse: true, dirty: true,
		cpuReq: s.CPURequest, gpus: float64(s.GPURequest), gpuReq: s.GPURequest, duration: s.DurationSec,
		remaining: s.DurationSec, rateCPU: s.CPUUnits / s.DurationSec, rateGPU: s.GPUUnits / s.DurationSec,
		sens: s.Sensitivity, prof: s.Profile, ckptEvery: s.CheckpointIntervalSec, ckptRemaining: s.DurationSec,
		ckptCost: s.CheckpointCostSec, migProfile: s.MIGProfile, migSlices: s.MIGSlices,
	}
	if s.FailAtFraction > 0 {
		p.failRemaining = s.DurationSec * (1 - s.FailAtFraction)
	}
	var id PodID
	if n := len(e.freePods); n > 0 {
		id = e.freePods[n-1]
		e.freePods = e.freePods[:n-1]
		e.pods[id] = p
		e.acct[id] = podAcct{pending: -1}
	} else {
		id = PodID(len(e.pods))
		e.pods = append(e.pods, p)
		e.acct = append(e.acct, podAcct{pending: -1})
	}
	e.podIdx[s.Key] = id
	e.newPodSlot(id)
	if s.GangID != "" {
		e.joinGang(id, s.GangID, s.GangSize)
		e.changedGang(e.pods[id].gang)
	}
	return id, nil
}

func validatePod(s *PodSpec) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("add pod %s: %s: %s", s.Key, field, fmt.Sprintf(format, args...)))
	}
	if s.Key == "" {
		bad("key", "must not be empty")
	}
	if !(s.DurationSec > 0) || math.IsInf(s.DurationSec, 0) {
		bad("durationSec", "must be a positive number, got %g", s.DurationSec)
	}
	if s.CPUUnits < 0 || s.GPUUnits < 0 {
		bad("work", "units must be >= 0, got cpu %g gpu %g", s.CPUUnits, s.GPUUnits)
	}
	if s.CPURequest < 0 || s.GPURequest < 0 {
		bad("requests", "must be >= 0, got cpu %g gpu %d", s.CPURequest, s.GPURequest)
	}
	switch {
	case s.MIGSlices < 0:
		bad("migSlices", "must be >= 0, got %d", s.MIGSlices)
	case s.MIGSlices > 0 && s.MIGProfile == "":
		bad("migProfile", "must name the profile of the pod's %d MIG slices", s.MIGSlices)
	case s.MIGSlices > 0 && s.GPURequest > 0:
		bad("requests", "a pod on MIG slices requests no whole GPUs, got %d", s.GPURequest)
	}
	for _, v := range []struct {
		name string
		x    float64
	}{{"sensitivity.cpu", s.Sensitivity.CPU}, {"sensitivity.gpu", s.Sensitivity.GPU}, {"failAtFraction", s.FailAtFraction}} {
		if v.x < 0 || v.x > 1 || math.IsNaN(v.x) {
			bad(v.name, "must be in [0, 1], got %g", v.x)
		}
	}
	if s.GangID != "" && s.GangSize < 1 {
		bad("gangSize", "must be >= 1 for gang %s, got %d", s.GangID, s.GangSize)
	}
	if s.CheckpointIntervalSec < 0 || math.IsNaN(s.CheckpointIntervalSec) {
		bad("checkpointIntervalSec", "must be >= 0, got %g", s.CheckpointIntervalSec)
	}
	if s.CheckpointCostSec < 0 || math.IsNaN(s.CheckpointCostSec) || math.IsInf(s.CheckpointCostSec, 0) {
		bad("checkpointCostSec", "must be a finite number >= 0, got %g", s.CheckpointCostSec)
	}
	if s.CheckpointCostSec > 0 && s.CheckpointIntervalSec > 0 && s.CheckpointIntervalSec < 1 {
		// Every costly checkpoint is a step of the simulation: keep them countable.
		bad("checkpointIntervalSec", "must be >= 1 s when checkpoints cost a pause, got %g", s.CheckpointIntervalSec)
	}
	return errors.Join(errs...)
}

func (e *Engine) joinGang(id PodID, gangID string, size int) {
	gi, ok := e.gangIdx[gangID]
	if !ok {
		g := gang{id: gangID, size: size, inUse: true}
		if n := len(e.freeGang); n > 0 {
			gi = e.freeGang[n-1]
			e.freeGang = e.freeGang[:n-1]
			g.members = e.gangs[gi].members[:0]
			e.gangs[gi] = g
		} else {
			gi = int32(len(e.gangs))
			e.gangs = append(e.gangs, g)
		}
		e.gangIdx[gangID] = gi
	}
	g := &e.gangs[gi]
	if size > g.size {
		g.size = size
	}
	p := &e.pods[id]
	p.gang, p.gangSlot = gi, int32(len(g.members))
	g.members = append(g.members, id)
}

// Pod looks a pod up by key.
func (e *Engine) Pod(key string) (PodID, bool) {
	id, ok := e.podIdx[key]
	return id, ok
}

// Start binds the pod to a node and marks it running (the pod is Running on that node).
func (e *Engine) Start(id PodID, nid NodeID) error {
	p := &e.pods[id]
	if int(nid) < 0 || int(nid) >= len(e.nodes) {
		return fmt.Errorf("start pod %s: no node %d", p.key, nid)
	}
	if p.done {
		return fmt.Errorf("start pod %s: already finished", p.key)
	}
	n := &e.nodes[nid]
	if p.migSlices > 0 {
		if err := p.placeOnSlices(n); err != nil {
			return err
		}
	}
	if p.gpus > 0 && n.gpu == nil {
		return fmt.Errorf("start pod %s: requests %g GPUs but node %s has none", p.key, p.gpus, n.name)
	}
	e.syncPod(id)
	e.syncNode(nid)
	e.changedPod(id)
	defer e.changedPod(id)
	if p.node != nid {
		e.unbind(id)
		p.node, p.nodeSlot = nid, int32(len(n.pods))
		n.pods = append(n.pods, id)
		p.dirty = true
		if n.replicas > 1 && p.gpuReq > 0 {
			e.giveReplicas(id, n)
		}
	}
	p.running = true
	return nil
}

// Stop marks the pod not running (e.g. Pending again); its progress is kept.
func (e *Engine) Stop(id PodID) {
	e.syncPod(id)
	e.pods[id].running = false
	e.changedPod(id)
}

func (e *Engine) unbind(id PodID) {
	p := &e.pods[id]
	if p.node < 0 {
		return
	}
	n := &e.nodes[p.node]
	last := len(n.pods) - 1
	moved := n.pods[last]
	n.pods[p.nodeSlot] = moved
	e.pods[moved].nodeSlot = p.nodeSlot
	n.pods = n.pods[:last]
	p.node, p.nodeSlot = -1, -1
	if p.tsGPUs != nil {
		p.tsGPUs, p.gpus = p.tsGPUs[:0], float64(p.gpuReq)
	}
}

// Evict stops the pod and rewinds its work to the last checkpoint (when the workload declares a
// checkpoint interval) or to zero.
func (e *Engine) Evict(id PodID) {
	e.syncPod(id)
	e.changedPod(id)
	e.unbind(id)
	p := &e.pods[id]
	p.running, p.done, p.failed = false, false, false
	e.Rewind(id)
}

// Rewind sends the pod's work back to its last checkpoint that counts (to zero without
// checkpoints; a checkpoint still being written does not count) and ends any pause, as a crash
// of the training process does: it returns the progress thrown away, in trace seconds. The pod
// stays where it is, running or not.
func (e *Engine) Rewind(id PodID) float64 {
	p := &e.pods[id]
	if p.done {
		return 0
	}
	e.syncPod(id)
	defer e.changedPod(id)
	a := &e.acct[id]
	lost := p.sinceValid
	if p.ckptEvery > 0 {
		p.remaining = p.ckptRemaining
	} else {
		p.remaining = p.duration
	}
	p.sinceCkpt, p.sinceValid, p.pause = 0, 0, 0
	a.pending, a.pauseRestart = -1, false
	a.lostSec += lost
	return lost
}

// Pause stops the pod's progress for sec more trace seconds of the time it would progress (a
// gang's pause elapses only while the whole gang runs): the restart of a training process that
// reloads its checkpoint. It is counted as restart pause.
func (e *Engine) Pause(id PodID, sec float64) {
	p, a := &e.pods[id], &e.acct[id]
	if p.done || !(sec > 0) {
		return
	}
	e.syncPod(id)
	defer e.changedPod(id)
	if !a.pauseRestart {
		// A checkpoint being written when the restart came does not finish.
		p.pause, a.pending = 0, -1
	}
	p.pause += sec
	a.pauseRestart = true
}

// Remove forgets the pod; its ID may be reused.
func (e *Engine) Remove(id PodID) {
	e.syncPod(id)
	e.changedPod(id)
	e.unbind(id)
	p := &e.pods[id]
	if p.gang >= 0 {
		g := &e.gangs[p.gang]
		last := len(g.members) - 1
		moved := g.members[last]
		g.members[p.gangSlot] = moved
		e.pods[moved].gangSlot = p.gangSlot
		g.members = g.members[:last]
		if len(g.members) == 0 {
			delete(e.gangIdx, g.id)
			g.inUse = false
			e.freeGang = append(e.freeGang, p.gang)
		} else {
			e.changedGang(p.gang)
		}
	}
	delete(e.podIdx, p.key)
	e.pods[id] = pod{node: -1, gang: -1}
	e.acct[id] = podAcct{}
	e.newPodSlot(id)
	e.freePods = append(e.freePods, id)
}

// HeldGPUs is how much of its node's GPUs the pod holds, in GPUs: its whole GPUs, its MIG slices'
// compute share, or its replicas' share of time-sliced GPUs (one of four replicas: 0.25). It is
// what results count as GPU allocation; valid once the pod has started on a node.
func (e *Engine) HeldGPUs(id PodID) float64 { return e.pods[id].gpus }

// TimeSliced reports whether the pod holds replicas of time-sliced GPUs.
func (e *Engine) TimeSliced(id PodID) bool { return len(e.pods[id].tsGPUs) > 0 }

// BusyGPUSec is the compute, in GPU-seconds, a pod on time-sliced GPUs used so far: on each GPU
// its replicas are on, its utilisation while the GPU's demand is at most 1, its share 1/D of it
// above. 0 for a pod on whole GPUs or MIG slices, whose compute results count from their
// profile.
func (e *Engine) BusyGPUSec(id PodID) float64 {
	e.syncPod(id)
	return e.pods[id].busy
}

// PodEnergy is the energy attributed to the pod so far, in joules.
func (e *Engine) PodEnergy(id PodID) float64 {
	e.syncPod(id)
	return e.pods[id].energy
}

// PodPower is the power attributed to the pod during the last tick, in watts (event-driven: its
// power now).
func (e *Engine) PodPower(id PodID) float64 {
	e.refresh()
	return e.pods[id].power
}

// Snapshot returns the pod's progress for persisting.
func (e *Engine) Snapshot(id PodID) Snapshot {
	e.syncPod(id)
	p, a := &e.pods[id], &e.acct[id]
	return Snapshot{
		RemainingSec: p.remaining, RemainingCPUUnits: p.remaining * p.rateCPU, RemainingGPUUnits: p.remaining * p.rateGPU,
		CheckpointSec: p.ckptRemaining, SinceCheckpointSec: p.sinceValid, EnergyJ: p.energy,
		PauseSec: p.pause, Checkpoints: a.checkpoints, CheckpointPauseSec: a.ckptPauseSec, RestartPauseSec: a.restartPause,
		LostSec: a.lostSec, BusyGPUSec: p.busy,
	}
}

// Restore sets the pod's progress from a snapshot written by an earlier agent.
func (e *Engine) Restore(id PodID, s Snapshot) error {
	p := &e.pods[id]
	for _, v := range []struct {
		name string
		x    float64
	}{{"remainingSec", s.RemainingSec}, {"checkpointSec", s.CheckpointSec}} {
		if v.x < 0 || v.x > p.duration || math.IsNaN(v.x) {
			return fmt.Errorf("restore pod %s: %s %g outside [0, %g]", p.key, v.name, v.x, p.duration)
		}
	}
	for _, v := range []float64{s.SinceCheckpointSec, s.EnergyJ, s.PauseSec, s.CheckpointPauseSec, s.RestartPauseSec, s.LostSec, float64(s.Checkpoints), s.BusyGPUSec} {
		if v < 0 || math.IsNaN(v) {
			return fmt.Errorf("restore pod %s: negative or NaN progress field in %+v", p.key, s)
		}
	}
	e.syncPod(id)
	p.remaining, p.ckptRemaining, p.sinceValid, p.energy, p.busy = s.RemainingSec, s.CheckpointSec, s.SinceCheckpointSec, s.EnergyJ, s.BusyGPUSec
	// The interval's clock restarts at the checkpoint that counts; a checkpoint that was being
	// written is not known to have finished, so the pause left is a restart's.
	a := &e.acct[id]
	p.sinceCkpt, a.pending = s.SinceCheckpointSec, -1
	if p.ckptEvery > 0 {
		p.sinceCkpt = math.Mod(s.SinceCheckpointSec, p.ckptEvery)
	}
	p.pause, a.pauseRestart = s.PauseSec, s.PauseSec > 0
	a.checkpoints, a.ckptPauseSec, a.restartPause, a.lostSec = s.Checkpoints, s.CheckpointPauseSec, s.RestartPauseSec, s.LostSec
	e.changedPod(id)
	return nil
}

// BlockedGangs appends to dst the gangs that have some but not all members present (running or
// finished) and have been so for at least minSec of trace time.
func (e *Engine) BlockedGangs(dst []GangStatus, minSec float64) []GangStatus {
	e.refresh()
	for i := range e.gangs {
		g := &e.gangs[i]
		if !g.inUse || !g.blocked || e.now-g.blockedSince < minSec {
			continue
		}
		present := 0
		for _, pid := range g.members {
			if p := &e.pods[pid]; p.running || p.done {
				present++
			}
		}
		dst = append(dst, GangStatus{ID: g.id, Size: g.size, Present: present, BlockedSince: g.blockedSince})
	}
	return dst
}

// placeOnSlices resolves a MIG pod's profile on node n's GPU family: the pod occupies its slices'
// compute share of the node's GPUs (what over-subscription and idle power count).
func (p *pod) placeOnSlices(n *node) error {
	if n.gpu == nil || n.gpu.MIG == nil {
		return fmt.Errorf("start pod %s: runs on MIG slices (%s) but node %s has no MIG-capable GPUs", p.key, p.migProfile, n.name)
	}
	mp, ok := n.gpu.MIGProfile(p.migProfile)
	if !ok {
		return fmt.Errorf("start pod %s: node %s's %s has no MIG profile %s (one of %v)", p.key, n.name, n.gpu.Family, p.migProfile, n.gpu.MIG.ProfileNames())
	}
	p.mig = mp
	p.gpus = float64(p.migSlices) * n.gpu.MIG.ComputeFraction(mp)
	p.dirty = true
	return nil
}
