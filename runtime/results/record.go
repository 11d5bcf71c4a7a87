// Package results records what happened to every workload of a run, in trace seconds from the
// trace start, and turns it into files (events.jsonl, workloads.csv, timeseries.csv,
// summary.json) and a printed summary table. A Recorder folds runner events into one Record per
// trace workload; Load reads a results directory back.
package results

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/kueuelab/kueuelab/model/trace"
)

// Workload states. Every workload of a trace is in exactly one of them at any time, and ends a
// run in one: the progress line, the final message and workloads.csv count the same states.
const (
	StateUnsubmitted = "unsubmitted" // not created (yet)
	StateRejected    = "rejected"    // the API server refused its objects for good (Error says why)
	StatePending     = "pending"     // submitted, waiting for quota
	StateAdmitted    = "admitted"    // quota reserved, no pod running yet
	StateRunning     = "running"     // a pod running
	StateEvicted     = "evicted"     // evicted, waiting to be admitted again
	StateSucceeded   = "Succeeded"
	StateFailed      = "Failed"
	// StateUnfinished is what results directories written before the states above say of every
	// workload that did not end; it still reads.
	StateUnfinished = "unfinished"
)

// States lists the states in the order of a workload's life.
var States = []string{StateUnsubmitted, StateRejected, StatePending, StateAdmitted, StateRunning, StateEvicted,
	StateSucceeded, StateFailed}

// terminalState reports whether a workload in state s is done for the run.
func terminalState(s string) bool {
	return s == StateSucceeded || s == StateFailed || s == StateRejected
}

// EventType names what an Event reports.
type EventType string

// Event types, in the order they usually happen to a workload.
const (
	EvSubmitted       EventType = "submitted"        // the runner created the workload's objects
	EvSubmitFailed    EventType = "submit_failed"    // the API server refused them (Message says why)
	EvTrialCreated    EventType = "trial_created"    // the runner, playing Katib, created a trial Job (Object)
	EvWorkloadCreated EventType = "workload_created" // Kueue created a Workload for it
	EvQuotaReserved   EventType = "quota_reserved"   // a Workload got QuotaReserved=True (Flavors)
	EvAdmitted        EventType = "admitted"         // a Workload got Admitted=True (Flavors)
	EvEvicted         EventType = "evicted"          // a Workload got Evicted=True (Reason)
	EvPreempted       EventType = "preempted"        // a Workload got Preempted=True (Reason)
	EvRequeued        EventType = "requeued"         // a Workload got Requeued=True after an eviction
	EvPodRunning      EventType = "pod_running"      // a pod (Object) became Running
	EvAllPodsRunning  EventType = "all_pods_running" // every pod of the workload's gang is Running
	EvPodFinished     EventType = "pod_finished"     // a pod stopped running (EnergyJ, GPUSeconds)
	EvFinished        EventType = "finished"         // the workload is done (Reason Succeeded or Failed)
	// EvWaiting is a new message of a Workload's QuotaReserved=False condition: Kueue's reason it
	// does not fit now (Reason, Message). Recorded only where asked (forecasts).
	EvWaiting EventType = "waiting"
	// EvLostEnergy is the energy of the workload's pods deleted before they finished, reported by
	// the agent at the end of the run (EnergyJ): no pod_finished event carries it.
	EvLostEnergy EventType = "lost_energy"

	// Control-plane events concern no workload (Workload is empty); Object names the component.
	EvComponentRestarted EventType = "component_restarted" // the supervisor restarted a component (Message: its last exit)
	EvControlPlaneDown   EventType = "control_plane_down"  // a component went down or unready: the trace clock holds (Message: which)
	EvControlPlaneReady  EventType = "control_plane_ready" // every component is ready again (Message: the outage's wall time)
)

// ControlPlaneEvent reports whether t is about the control plane rather than a workload.
func ControlPlaneEvent(t EventType) bool {
	return t == EvComponentRestarted || t == EvControlPlaneDown || t == EvControlPlaneReady
}

// Event is one line of events.jsonl. T is trace seconds since the trace start.
type Event struct {
	T        float64   `json:"t"`
	Workload string    `json:"workload"`
	Type     EventType `json:"type"`
	// Object is namespace/name of the Kubernetes object the event is about, when there is one.
	Object  string `json:"object,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Flavors maps a pod set to its ResourceFlavor (quota_reserved, admitted).
	Flavors    map[string]string `json:"flavors,omitempty"`
	EnergyJ    float64           `json:"energyJ,omitempty"`
	GPUSeconds float64           `json:"gpuSeconds,omitempty"`
	// TimeSlicedGPUSec is the part of GPUSeconds held on time-sliced GPUs, BusyGPUSec the compute
	// the pod used there (pod_finished; lost_energy: of pods deleted before they finished).
	TimeSlicedGPUSec float64 `json:"timeSlicedGpuSec,omitempty"`
	BusyGPUSec       float64 `json:"busyGpuSec,omitempty"`
	// Node is the pod's node (pod_running, fault).
	Node string `json:"node,omitempty"`
	// Restarts, LostGPUSec, CheckpointGPUSec and RestartGPUSec are a fault_cost's (faults.go).
	Restarts         int     `json:"restarts,omitempty"`
	LostGPUSec       float64 `json:"lostGpuSec,omitempty"`
	CheckpointGPUSec float64 `json:"checkpointGpuSec,omitempty"`
	RestartGPUSec    float64 `json:"restartGpuSec,omitempty"`
}

// Incident is an eviction or preemption: when, and why (the Workload condition's reason).
type Incident struct {
	T      float64 `json:"t"`
	Reason string  `json:"reason"`
}

// Record is the life of one trace workload. Times are trace seconds since the trace start and
// nil when the step never happened; a time is the first occurrence (a re-admission after an
// eviction does not move Admitted).
type Record struct {
	ID         string       `json:"id"`
	Namespace  string       `json:"namespace"`
	Family     trace.Family `json:"family"`
	Intent     string       `json:"intent"`
	LocalQueue string       `json:"localQueue"`
	// Queue is the ClusterQueue the workload's LocalQueue points at.
	Queue string `json:"queue"`
	Pods  int    `json:"pods"`
	GPUs  int64  `json:"gpus"`
	// IdealSec is the JCT of the workload alone on an uncapped node: the trace's duration, plus
	// the pauses of the checkpoints it takes on the way when they cost one.
	IdealSec float64 `json:"idealSec"`
	// GPUUtil is the utilisation of the devices it holds, weighed by the GPUs each holds
	// (trace.Workload.DeviceGPUUtilization; for MIG slices, SliceUtilization once placed), used
	// for effective GPU utilisation.
	GPUUtil float64 `json:"gpuUtil"`
	// MIGProfile is the MIG profile the workload's pods run on as placed ("" for none; profiles
	// joined by "+" for a workload on several). SliceShare is the share of a GPU's compute one
	// slice of it holds (3/7 for a 3g.40gb; 0 without slices or with several profiles).
	MIGProfile string  `json:"migProfile,omitempty"`
	SliceShare float64 `json:"sliceShare,omitempty"`
	// SubmitOffsetSec is when the trace says to submit; Submitted is when the runner did.
	SubmitOffsetSec float64 `json:"submitOffsetSec"`

	Submitted       *float64          `json:"submitted"`
	WorkloadCreated *float64          `json:"workloadCreated"`
	QuotaReserved   *float64          `json:"quotaReserved"`
	Admitted        *float64          `json:"admitted"`
	Flavors         map[string]string `json:"flavors,omitempty"`
	FirstPodRunning *float64          `json:"firstPodRunning"`
	AllPodsRunning  *float64          `json:"allPodsRunning"`
	Finished        *float64          `json:"finished"`
	State           string            `json:"state"`
	Evictions       []Incident        `json:"evictions,omitempty"`
	Preemptions     []Incident        `json:"preemptions,omitempty"`
	Requeues        int               `json:"requeues"`
	EnergyJ         float64           `json:"energyJ"`
	// LostEnergyJ is the part of EnergyJ burned by pods deleted before they finished (evicted,
	// preempted): the cost of work a replacement redoes, or that never completes.
	LostEnergyJ float64 `json:"lostEnergyJ"`
	// GPUSeconds is Σ over pods of GPUs held × seconds Running (all attempts); a MIG slice holds
	// its share of its GPU's compute slices (3/7 of a GPU for a 3g.40gb).
	GPUSeconds float64 `json:"gpuSeconds"`
	// TimeSlicedGPUSeconds is the part of GPUSeconds its pods held on time-sliced GPUs (a replica
	// of four: a quarter of a GPU), BusyGPUSeconds the compute they used there, as the physics
	// integrated it: on a time-sliced GPU a pod's use depends on its co-tenants, not its profile
	// alone.
	TimeSlicedGPUSeconds float64 `json:"timeSlicedGpuSeconds,omitempty"`
	BusyGPUSeconds       float64 `json:"busyGpuSeconds,omitempty"`
	// Error says why the workload could not be submitted, if it could not.
	Error string `json:"error,omitempty"`
	// FaultTolerance is what faults and checkpoints did to it (faults.go).
	FaultTolerance
}

// NewRecord starts the record of w, queued on localQueue of ClusterQueue queue.
func NewRecord(w *trace.Workload, localQueue, queue string) *Record {
	return &Record{
		ID: w.WorkloadID, Namespace: w.Namespace, Family: w.WorkloadType, Intent: w.Intent(),
		LocalQueue: localQueue, Queue: queue, Pods: w.PodCount(), GPUs: w.TotalGPUs(),
		IdealSec: idealSec(w), GPUUtil: w.DeviceGPUUtilization(),
		SubmitOffsetSec: w.SubmitTimeOffsetSec, State: StateUnsubmitted,
	}
}

// OnDevices describes the devices of w as placed (w with its pods on the devices they run on:
// render.OnDevices): its MIG profile, a slice's share of a GPU (share returns a profile's, 0 when
// it does not know it), and the utilisation of its devices with each slice counted as a device.
func (r *Record) OnDevices(w *trace.Workload, share func(profile string) float64) {
	profiles := w.MIGProfiles()
	if len(profiles) == 0 {
		return
	}
	r.MIGProfile = strings.Join(profiles, "+")
	if len(profiles) == 1 {
		r.SliceShare = share(profiles[0])
	}
	r.GPUUtil = w.SliceUtilization(share)
}

// EffectiveGPUSeconds is the GPU compute the workload used: its GPU-seconds at the utilisation of
// its devices (GPUUtil), and on time-sliced GPUs what the physics says its pods used.
func (r *Record) EffectiveGPUSeconds() float64 {
	return (r.GPUSeconds-r.TimeSlicedGPUSeconds)*r.GPUUtil + r.BusyGPUSeconds
}

// Terminal reports whether the workload reached Succeeded or Failed, or can never get there
// because it was rejected (or could not even be rendered or placed: Error says why).
func (r *Record) Terminal() bool { return terminalState(r.State) || r.Error != "" }

// TimeToAdmission is Admitted − Submitted; ok is false when either is missing.
func (r *Record) TimeToAdmission() (float64, bool) { return span(r.Submitted, r.Admitted) }

// JCT is the job completion time, Finished − Submitted; ok is false when either is missing.
func (r *Record) JCT() (float64, bool) { return span(r.Submitted, r.Finished) }

// Slowdown is JCT ÷ IdealSec; ok is false without a JCT or an ideal duration.
func (r *Record) Slowdown() (float64, bool) {
	j, ok := r.JCT()
	if !ok || r.IdealSec <= 0 {
		return 0, false
	}
	return j / r.IdealSec, true
}

func span(a, b *float64) (float64, bool) {
	if a == nil || b == nil {
		return 0, false
	}
	return *b - *a, true
}

// apply folds e into r; flavor maps come from ft (nil: not shared).
func (r *Record) apply(e *Event, ft *flavorTable) {
	first := func(p **float64) {
		if *p == nil {
			t := e.T
			*p = &t
		}
	}
	// move changes the state of a workload that is not done yet.
	move := func(to string) {
		if !terminalState(r.State) {
			r.State = to
		}
	}
	switch e.Type {
	case EvSubmitted:
		first(&r.Submitted)
		if r.State == StateUnsubmitted {
			r.State = StatePending
		}
	case EvSubmitFailed:
		r.Error = e.Message
		move(StateRejected)
	case EvWorkloadCreated:
		first(&r.WorkloadCreated)
	case EvQuotaReserved:
		first(&r.QuotaReserved)
		r.mergeFlavors(e.Flavors, ft)
		move(StateAdmitted)
	case EvAdmitted:
		first(&r.Admitted)
		r.mergeFlavors(e.Flavors, ft)
	case EvEvicted:
		r.Evictions = append(r.Evictions, Incident{T: e.T, Reason: e.Reason})
		move(StateEvicted)
	case EvPreempted:
		r.Preemptions = append(r.Preemptions, Incident{T: e.T, Reason: e.Reason})
	case EvRequeued:
		r.Requeues++
	case EvPodRunning:
		first(&r.FirstPodRunning)
		if r.State == StateAdmitted || r.State == StatePending {
			r.State = StateRunning
		}
	case EvAllPodsRunning:
		first(&r.AllPodsRunning)
	case EvPodFinished:
		r.EnergyJ += e.EnergyJ
		r.GPUSeconds += e.GPUSeconds
		r.TimeSlicedGPUSeconds += e.TimeSlicedGPUSec
		r.BusyGPUSeconds += e.BusyGPUSec
	case EvLostEnergy:
		r.EnergyJ += e.EnergyJ
		r.LostEnergyJ += e.EnergyJ
		r.BusyGPUSeconds += e.BusyGPUSec
	case EvFinished:
		if r.Finished == nil {
			first(&r.Finished)
			r.State = e.Reason
		}
	case EvFault, EvFaultCost:
		r.applyFault(e)
	}
}

// mergeFlavors adds the pod sets of f that r does not have yet. It never changes r.Flavors in
// place: the map is replaced by a merged one, shared through ft with the records that have the
// same flavors (a map per workload would be a third of a record's memory in a million-workload run).
func (r *Record) mergeFlavors(f map[string]string, ft *flavorTable) {
	var m map[string]string
	for k, v := range f {
		if _, ok := r.Flavors[k]; ok {
			continue
		}
		if m == nil {
			m = make(map[string]string, len(r.Flavors)+len(f))
			maps.Copy(m, r.Flavors)
		}
		m[k] = v
	}
	if m != nil {
		r.Flavors = ft.intern(m)
	}
}

// flavorTable shares equal flavor maps between records; they are read-only once in it.
type flavorTable struct{ byKey map[string]map[string]string }

// maxSharedFlavors bounds the table: beyond it maps are kept unshared.
const maxSharedFlavors = 4096

func (ft *flavorTable) intern(m map[string]string) map[string]string {
	if ft == nil {
		return m
	}
	k := flavorString(m)
	if x, ok := ft.byKey[k]; ok {
		return x
	}
	if len(ft.byKey) < maxSharedFlavors {
		if ft.byKey == nil {
			ft.byKey = map[string]map[string]string{}
		}
		ft.byKey[k] = m
	}
	return m
}

// flavorString writes flavors as "podset=flavor;..." sorted by pod set.
func flavorString(f map[string]string) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + f[k]
	}
	return strings.Join(parts, ";")
}

func parseFlavors(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]string{}
	for _, part := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("flavor %q: want podset=flavor", part)
		}
		m[k] = v
	}
	return m, nil
}

// incidentString writes incidents as "reason@t;...".
func incidentString(in []Incident) string {
	parts := make([]string, len(in))
	for i, x := range in {
		parts[i] = x.Reason + "@" + strconv.FormatFloat(x.T, 'f', 3, 64)
	}
	return strings.Join(parts, ";")
}

func parseIncidents(s string) ([]Incident, error) {
	if s == "" {
		return nil, nil
	}
	var out []Incident
	for _, part := range strings.Split(s, ";") {
		i := strings.LastIndexByte(part, '@')
		if i < 0 {
			return nil, fmt.Errorf("incident %q: want reason@seconds", part)
		}
		t, err := strconv.ParseFloat(part[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("incident %q: %w", part, err)
		}
		out = append(out, Incident{T: t, Reason: part[:i]})
	}
	return out, nil
}

// Recorder folds events into one Record per trace workload and appends every event to a log.
// It is safe for concurrent use (informer handlers report from several goroutines).
type Recorder struct {
	mu    sync.Mutex
	log   *EventLog
	order []*Record
	byID  map[string]int // index in order
	// sealed holds the records Seal let go of (order[i] nil), a JSON line each, rowAt[i] where
	// each starts; both free of pointers, so the collector does not walk them.
	sealed  []byte
	rowAt   []int64
	pending int
	// unknown counts events for workloads the recorder does not know (kept in the log).
	unknown int
	// states counts the workloads in each state; submitted and admitted those past each milestone.
	states              map[string]int
	submitted, admitted int
	events              int
	flavors             flavorTable
}

// NewRecorder starts a record for every workload; log may be nil (records only). A record with
// an Error (not renderable or placeable on the cluster) starts rejected.
func NewRecorder(records []*Record, log *EventLog) (*Recorder, error) {
	rc := &Recorder{log: log, order: records, byID: make(map[string]int, len(records)), states: map[string]int{}}
	for i, r := range records {
		if _, dup := rc.byID[r.ID]; dup {
			return nil, fmt.Errorf("workload %s appears twice", r.ID)
		}
		rc.byID[r.ID] = i
		if r.Error != "" && !terminalState(r.State) {
			r.State = StateRejected
		}
		rc.states[r.State]++
		if !r.Terminal() {
			rc.pending++
		}
	}
	return rc, nil
}

// Record logs e and applies it to its workload's record. It reports whether the workload became
// terminal with this event.
func (rc *Recorder) Record(e Event) (bool, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var err error
	if rc.log != nil {
		err = rc.log.Write(&e)
	}
	rc.events++
	i, ok := rc.byID[e.Workload]
	if !ok {
		rc.unknown++
		return false, err
	}
	r := rc.order[i]
	if r == nil {
		return false, errors.Join(err, fmt.Errorf("%w: %s event of workload %s", ErrSealed, e.Type, e.Workload))
	}
	was, state := r.Terminal(), r.State
	hadSub, hadAdm := r.Submitted != nil, r.Admitted != nil
	r.apply(&e, &rc.flavors)
	if r.State != state {
		rc.states[state]--
		rc.states[r.State]++
	}
	if !hadSub && r.Submitted != nil {
		rc.submitted++
	}
	if !hadAdm && r.Admitted != nil {
		rc.admitted++
	}
	done := !was && r.Terminal()
	if done {
		rc.pending--
	}
	return done, err
}

// Counts is how far the run got: the workloads in each state (they sum to Total), and those that
// passed the submission and admission milestones.
type Counts struct {
	Total, Submitted, Admitted int
	States                     map[string]int
}

// Finished is the number of workloads done for the run: succeeded, failed or rejected.
func (c Counts) Finished() int {
	return c.States[StateSucceeded] + c.States[StateFailed] + c.States[StateRejected]
}

// Counts returns the current counts.
func (rc *Recorder) Counts() Counts {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	st := make(map[string]int, len(rc.states))
	for k, v := range rc.states {
		if v != 0 {
			st[k] = v
		}
	}
	return Counts{Total: len(rc.order), Submitted: rc.submitted, Admitted: rc.admitted, States: st}
}

// Pending returns the number of workloads that are not terminal yet.
func (rc *Recorder) Pending() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.pending
}

// Events returns the number of events recorded so far: it grows whenever anything happens.
func (rc *Recorder) Events() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.events
}

// Records returns copies of the records in trace order.
func (rc *Recorder) Records() []Record {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]Record, len(rc.order))
	for i, r := range rc.order {
		if r == nil {
			out[i], _ = rc.unseal(i) // Release reports a row that does not read back
			continue
		}
		out[i] = *r
		out[i].Flavors = cloneMap(r.Flavors)
		out[i].Evictions = append([]Incident(nil), r.Evictions...)
		out[i].Preemptions = append([]Incident(nil), r.Preemptions...)
	}
	return out
}

// ErrSealed is wrapped by Record's error for an event of a workload whose record was sealed.
var ErrSealed = errors.New("record already sealed")

// Seal lets go of the record of workload id, which must change no more: it keeps only its JSON
// (exact: every field is exported, floats round-trip), in memory free of pointers, and Release
// reads the record back from it. A run of a million workloads so keeps no record object per
// finished workload for the collector to walk at every cycle. A later event of the workload is
// an error (ErrSealed). Records and Pending do not see sealed records.
func (rc *Recorder) Seal(id string) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	i, ok := rc.byID[id]
	if !ok {
		return fmt.Errorf("seal: unknown workload %s", id)
	}
	r := rc.order[i]
	if r == nil {
		return nil
	}
	if rc.rowAt == nil {
		rc.rowAt = make([]int64, len(rc.order))
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("seal %s: %w", id, err)
	}
	rc.rowAt[i] = int64(len(rc.sealed))
	rc.sealed = append(append(rc.sealed, b...), '\n')
	rc.order[i] = nil
	return nil
}

// Release returns the records in trace order as Records does, but without copying their maps
// (records may share a Flavors map: treat them as read-only), and forgets them: the recorder must
// not be used afterwards. A run of a million workloads then holds its records once, not twice,
// while it writes its results. Sealed records are read back from their rows.
func (rc *Recorder) Release() ([]Record, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]Record, len(rc.order))
	for i, r := range rc.order {
		if r != nil {
			out[i] = *r
			continue
		}
		var err error
		if out[i], err = rc.unseal(i); err != nil {
			return nil, err
		}
	}
	rc.order, rc.byID, rc.sealed, rc.rowAt = nil, nil, nil, nil
	return out, nil
}

// unseal reads back the sealed record order[i].
func (rc *Recorder) unseal(i int) (Record, error) {
	b := rc.sealed[rc.rowAt[i]:]
	var r Record
	if err := json.Unmarshal(b[:bytes.IndexByte(b, '\n')], &r); err != nil {
		return Record{}, fmt.Errorf("sealed record %d: %w", i, err)
	}
	return r, nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Outcome is the final state of a workload that finished: StateFailed or StateSucceeded.
func Outcome(failed bool) string {
	if failed {
		return StateFailed
	}
	return StateSucceeded
}
