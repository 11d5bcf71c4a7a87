// Package state is a cluster's queueing state at one instant, as a forecast starts from it: the
// workloads alive then, each pending or admitted, with the times Kueue orders and accounts them
// by, and what is known of the work each has left. The workloads' shapes (pods, requests, kind)
// are a trace beside the state file; the cluster (nodes and Kueue's queues) is a cluster spec.
// The file is YAML a person can read and edit; every problem is reported as file:line: field.
package state

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
)

// APIVersion and Kind head a state file.
const (
	APIVersion = "kueuelab.io/v1alpha1"
	Kind       = "ClusterState"
)

// The files of a snapshot directory.
const (
	StateFile   = "state.yaml"
	ClusterFile = "cluster.yaml"
	TraceFile   = "workloads.jsonl"
	HistoryFile = "history.jsonl"
	// KueueConfigFile is the part of the cluster's Kueue Configuration a forecast replays.
	KueueConfigFile = "kueue-config.yaml"
)

// Phase is where a workload stands in Kueue.
type Phase string

const (
	// Pending: its Workload waits for quota (never admitted, or evicted and requeued).
	Pending Phase = "Pending"
	// Admitted: its Workload holds quota and its pods run or are starting.
	Admitted Phase = "Admitted"
)

// Arrivals say what the trace holds besides the live workloads.
const (
	// ArrivalsNone: only the live workloads.
	ArrivalsNone = "none"
	// ArrivalsRecorded: also the workloads submitted after NowSec, as they were (a replay's own
	// trace): the truth a forecast with known arrivals replays.
	ArrivalsRecorded = "recorded"
)

// State is one snapshot.
type State struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	// Source says where the state was read (free text).
	Source string `yaml:"source,omitempty"`
	// KueueVersion is the version of the Kueue whose state this is.
	KueueVersion string `yaml:"kueueVersion,omitempty"`
	// NowSec is the snapshot's instant, on the clock of every time in the file and of the trace's
	// submit offsets (a replay's trace time; a cluster's seconds since its oldest Workload's
	// creation, live or finished).
	NowSec float64 `yaml:"nowSec"`
	// ClockOrigin, when set, is the wall-clock instant (RFC 3339) at 0 on that clock: a cluster
	// snapshot's. Without it the clock is trace time, whose 0 is a midnight (the generator's days
	// start there). A forecast's fitted arrivals follow the hour of day on it.
	ClockOrigin string `yaml:"clockOrigin,omitempty"`
	// Trace is the trace file with the live workloads' shapes (relative to the state file).
	Trace string `yaml:"trace"`
	// Arrivals is ArrivalsNone or ArrivalsRecorded.
	Arrivals string `yaml:"arrivals"`
	// Cluster is the cluster spec (relative to the state file).
	Cluster string `yaml:"cluster"`
	// History, when set, is a trace of finished workloads (relative to the state file) whose
	// durations a forecast draws from.
	History string `yaml:"history,omitempty"`
	// KueueConfig, when set, is a Kueue Configuration document (relative to the state file) with
	// the settings of the cluster's Kueue a forecast replays; without it the release's defaults.
	KueueConfig string     `yaml:"kueueConfig,omitempty"`
	Workloads   []Workload `yaml:"workloads"`
	// Finished are the history's workloads as Kueue ran them: when each was admitted and when it
	// finished. A backtest rebuilds the state at an earlier instant from them and the live
	// workloads, and scores a forecast from there against what happened.
	Finished []Past `yaml:"finished,omitempty"`
}

// Past is one finished workload of the history (its shape is the history trace's workload of
// that id), on the state's clock.
type Past struct {
	ID         string  `yaml:"id"`
	CreatedSec float64 `yaml:"createdSec"`
	// AdmittedSec is when its last admission happened (nil: it finished without one, e.g. its job
	// was deleted while it waited).
	AdmittedSec *float64 `yaml:"admittedSec,omitempty"`
	FinishedSec float64  `yaml:"finishedSec"`
	// Admission is Kueue's last admission of it (nil when not admitted, or when the workload is
	// several Workloads, an experiment's trials, with an admission each).
	Admission *Admission `yaml:"admission,omitempty"`
	// DurationSec is the duration its job declared (kueuelab.io/duration-sec), which a forecast
	// at an instant while it lived would have known.
	DurationSec *float64 `yaml:"durationSec,omitempty"`
	// Evictions is how often Kueue evicted it: before its last admission it held quota at times
	// the history does not keep. RequeuedSec is when Kueue last queued it again after an
	// eviction: from then to its last admission it waited.
	Evictions   int      `yaml:"evictions,omitempty"`
	RequeuedSec *float64 `yaml:"requeuedSec,omitempty"`
}

// Metadata names the state.
type Metadata struct {
	Name string `yaml:"name,omitempty"`
}

// Workload is one live workload: a trace workload whose Kueue Workload is pending or admitted.
type Workload struct {
	// ID is the trace workload's id.
	ID    string `yaml:"id"`
	Phase Phase  `yaml:"phase"`
	// CreatedSec is when its Workload was created.
	CreatedSec float64 `yaml:"createdSec"`
	// QueuedSec, when set, is the time Kueue orders the pending Workload by instead of its
	// creation (its last eviction, under Kueue's default requeuing strategy).
	QueuedSec *float64 `yaml:"queuedSec,omitempty"`
	// Parked says Kueue keeps the pending workload aside as inadmissible: it was tried and not
	// admitted, and will not be tried again before something changes in its ClusterQueue or
	// cohort. Only Kueue's memory holds this (a replay knows it; a cluster's API does not): a
	// restarted Kueue tries every pending workload once.
	Parked bool `yaml:"parked,omitempty"`
	// AdmittedSec is when its current admission happened (Admitted only).
	AdmittedSec *float64 `yaml:"admittedSec,omitempty"`
	// RemainingSec, when known, is the work it has left, in seconds alone on an idle node (a
	// replay knows it; a job may carry it). Unknown, a forecast draws it.
	RemainingSec *float64 `yaml:"remainingSec,omitempty"`
	// MaxExecutionSec, when set, is the admitted time Kueue still grants the workload, counted
	// from its current admission (Admitted) or its next one (Pending): its
	// spec.maximumExecutionTimeSeconds less what earlier admissions used. Kueue deactivates it
	// when that runs out, so a forecast ends its work there, whatever it draws.
	MaxExecutionSec *float64 `yaml:"maxExecutionSec,omitempty"`
	// Admission is Kueue's admission of an Admitted workload.
	Admission *Admission `yaml:"admission,omitempty"`
	// Conditions are the Workload's status conditions other than QuotaReserved and Admitted
	// (which the admission gives): PodsReady, Evicted, Preempted, Requeued and the like, as
	// Kueue wrote them. Kueue orders, times out and backs off by them.
	Conditions []Condition `yaml:"conditions,omitempty"`
	// RequeueState is the Workload's status.requeueState: how often it was requeued after a
	// waitForPodsReady eviction, and when its backoff ends.
	RequeueState *RequeueState `yaml:"requeueState,omitempty"`
	// Progress, when known (a replay knows it; a cluster does not), is where each of its roles'
	// pods stand, so that a resumed run continues their work exactly: checkpoint phase and
	// pauses included. RemainingSec is then the most any role has left.
	Progress []RoleProgress `yaml:"progress,omitempty"`
}

// RoleProgress is the progress of the pods of one role of a workload (all alike: a gang's
// members progress together).
type RoleProgress struct {
	Role string `yaml:"role"`
	// RemainingSec is the work left: of its running pods (Admitted), or the work its
	// replacement pods start with (Pending: the last checkpoint's, or all of it).
	RemainingSec float64 `yaml:"remainingSec"`
	// CheckpointSec is the work left at its last checkpoint (0: none taken).
	CheckpointSec float64 `yaml:"checkpointSec,omitempty"`
	// SinceCheckpointSec is the progress since that checkpoint.
	SinceCheckpointSec float64 `yaml:"sinceCheckpointSec,omitempty"`
	// PauseSec is a pause still ahead (a checkpoint being written, a restart).
	PauseSec float64 `yaml:"pauseSec,omitempty"`
	// RestartsOwed is how many of its next pods pay the workload's restart overhead.
	RestartsOwed int `yaml:"restartsOwed,omitempty"`
	// Nodes are the nodes its running pods are bound to, one per pod (Admitted); its other pods
	// wait for a node.
	Nodes []string `yaml:"nodes,omitempty"`
}

// Condition is a Workload condition: its type, status ("True" or "False"), Kueue's reason and
// message, and the time of its last transition.
type Condition struct {
	Type     string  `yaml:"type"`
	Status   string  `yaml:"status"`
	Reason   string  `yaml:"reason"`
	Message  string  `yaml:"message,omitempty"`
	SinceSec float64 `yaml:"sinceSec"`
}

// RequeueState is a Workload's status.requeueState.
type RequeueState struct {
	Count        int32    `yaml:"count,omitempty"`
	RequeueAtSec *float64 `yaml:"requeueAtSec,omitempty"`
}

// Admission is a Workload's status.admission: its ClusterQueue and, per pod set, the pods
// admitted and the flavor of each resource.
type Admission struct {
	ClusterQueue string       `yaml:"clusterQueue"`
	PodSets      []PodSetFlav `yaml:"podSets"`
}

// PodSetFlav is one pod set's assignment.
type PodSetFlav struct {
	Name    string            `yaml:"name"`
	Count   int32             `yaml:"count"`
	Flavors map[string]string `yaml:"flavors"`
}

// Load reads a state file.
func Load(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read; name is the file in errors.
func Parse(name string, data []byte) (*State, error) {
	var s State
	root, err := yamldoc.Strict(name, "state file", "apiVersion, kind, nowSec, trace, cluster, workloads, ...", data, &s)
	if err != nil {
		return nil, err
	}
	var errs fielderr.List
	add := func(p yamldoc.Path, format string, args ...any) {
		errs = append(errs, fielderr.New(name, yamldoc.Line(root, p), p.String(), format, args...))
	}
	if s.APIVersion != APIVersion {
		add(yamldoc.Path{"apiVersion"}, "%q, want %s", s.APIVersion, APIVersion)
	}
	if s.Kind != Kind {
		add(yamldoc.Path{"kind"}, "%q, want %s", s.Kind, Kind)
	}
	if !finite(s.NowSec) {
		add(yamldoc.Path{"nowSec"}, "%g is not a time", s.NowSec)
	}
	if s.ClockOrigin != "" {
		if _, err := time.Parse(time.RFC3339Nano, s.ClockOrigin); err != nil {
			add(yamldoc.Path{"clockOrigin"}, "%q: want an RFC 3339 time (2026-12-07T09:00:00Z)", s.ClockOrigin)
		}
	}
	if s.Trace == "" {
		add(yamldoc.Path{"trace"}, "missing: the trace file with the workloads' shapes")
	}
	if s.Cluster == "" {
		add(yamldoc.Path{"cluster"}, "missing: the cluster spec")
	}
	switch s.Arrivals {
	case ArrivalsNone, ArrivalsRecorded:
	default:
		add(yamldoc.Path{"arrivals"}, "%q: want %s or %s", s.Arrivals, ArrivalsNone, ArrivalsRecorded)
	}
	// seen says where an id was first given, for duplicates.
	seen := map[string]string{}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		at := func(f ...any) yamldoc.Path { return append(yamldoc.Path{"workloads", i}, f...) }
		if w.ID == "" {
			add(at("id"), "missing")
		} else if j, dup := seen[w.ID]; dup {
			add(at("id"), "%q is also %s", w.ID, j)
		} else {
			seen[w.ID] = fmt.Sprintf("workloads[%d]", i)
		}
		if !finite(w.CreatedSec) || w.CreatedSec > s.NowSec {
			add(at("createdSec"), "%g: want a time ≤ nowSec (%g)", w.CreatedSec, s.NowSec)
		}
		if q := w.QueuedSec; q != nil && (!finite(*q) || *q < w.CreatedSec || *q > s.NowSec) {
			add(at("queuedSec"), "%g: want a time between createdSec and nowSec", *q)
		}
		if m := w.MaxExecutionSec; m != nil && (!finite(*m) || *m < 0) {
			add(at("maxExecutionSec"), "%g: want seconds ≥ 0", *m)
		}
		if r := w.RemainingSec; r != nil && (!finite(*r) || *r <= 0) {
			add(at("remainingSec"), "%g: want seconds > 0", *r)
		}
		for j, c := range w.Conditions {
			cp := func(f string) yamldoc.Path { return append(at("conditions", j), f) }
			switch c.Type {
			case "":
				add(cp("type"), "missing")
			case "QuotaReserved", "Admitted":
				add(cp("type"), "%s follows from phase and admission; leave it out", c.Type)
			}
			if c.Status != "True" && c.Status != "False" && c.Status != "Unknown" {
				add(cp("status"), "%q: want True, False or Unknown", c.Status)
			}
			if c.Reason == "" {
				add(cp("reason"), "missing")
			}
			if !finite(c.SinceSec) || c.SinceSec > s.NowSec {
				add(cp("sinceSec"), "%g: want a time ≤ nowSec", c.SinceSec)
			}
		}
		if r := w.RequeueState; r != nil {
			if r.Count < 0 {
				add(at("requeueState", "count"), "%d: want ≥ 0", r.Count)
			}
			if a := r.RequeueAtSec; a != nil && !finite(*a) {
				add(at("requeueState", "requeueAtSec"), "%g is not a time", *a)
			}
		}
		for j, rp := range w.Progress {
			pp := func(f string) yamldoc.Path { return append(at("progress", j), f) }
			if rp.Role == "" {
				add(pp("role"), "missing")
			}
			for _, v := range []struct {
				f string
				x float64
			}{{"remainingSec", rp.RemainingSec}, {"checkpointSec", rp.CheckpointSec}, {"sinceCheckpointSec", rp.SinceCheckpointSec}, {"pauseSec", rp.PauseSec}} {
				if !finite(v.x) || v.x < 0 {
					add(pp(v.f), "%g: want seconds ≥ 0", v.x)
				}
			}
			if rp.RestartsOwed < 0 {
				add(pp("restartsOwed"), "%d: want ≥ 0", rp.RestartsOwed)
			}
		}
		switch w.Phase {
		case Pending:
			if w.AdmittedSec != nil {
				add(at("admittedSec"), "a Pending workload has no admission")
			}
			if w.Admission != nil {
				add(at("admission"), "a Pending workload has no admission")
			}
		case Admitted:
			if w.Parked {
				add(at("parked"), "only a Pending workload is parked")
			}
			switch a := w.AdmittedSec; {
			case a == nil:
				add(at("admittedSec"), "missing: when it was admitted")
			case !finite(*a) || *a < w.CreatedSec || *a > s.NowSec:
				add(at("admittedSec"), "%g: want a time between createdSec and nowSec", *a)
			}
			if w.QueuedSec != nil {
				add(at("queuedSec"), "only a Pending workload is queued")
			}
			checkAdmission(w.Admission, at("admission"), add)
		default:
			add(at("phase"), "%q: want %s or %s", w.Phase, Pending, Admitted)
		}
	}
	for i := range s.Finished {
		f := &s.Finished[i]
		at := func(x ...any) yamldoc.Path { return append(yamldoc.Path{"finished", i}, x...) }
		if f.ID == "" {
			add(at("id"), "missing")
		} else if j, dup := seen[f.ID]; dup {
			add(at("id"), "%q is also %s", f.ID, j)
		} else {
			seen[f.ID] = fmt.Sprintf("finished[%d]", i)
		}
		if !finite(f.CreatedSec) || f.CreatedSec > s.NowSec {
			add(at("createdSec"), "%g: want a time ≤ nowSec (%g)", f.CreatedSec, s.NowSec)
		}
		start := f.CreatedSec
		if a := f.AdmittedSec; a != nil {
			if !finite(*a) || *a < f.CreatedSec || *a > s.NowSec {
				add(at("admittedSec"), "%g: want a time between createdSec and nowSec", *a)
			}
			start = *a
		}
		if !finite(f.FinishedSec) || f.FinishedSec < start || f.FinishedSec > s.NowSec {
			add(at("finishedSec"), "%g: want a time between admittedSec (else createdSec) and nowSec", f.FinishedSec)
		}
		if f.Admission != nil {
			if f.AdmittedSec == nil {
				add(at("admission"), "an admission needs admittedSec")
			}
			checkAdmission(f.Admission, at("admission"), add)
		}
		if d := f.DurationSec; d != nil && (!finite(*d) || *d <= 0) {
			add(at("durationSec"), "%g: want seconds > 0", *d)
		}
		if f.Evictions < 0 {
			add(at("evictions"), "%d: want ≥ 0", f.Evictions)
		}
		if r := f.RequeuedSec; r != nil {
			switch {
			case f.Evictions == 0:
				add(at("requeuedSec"), "a workload never evicted is never requeued")
			case !finite(*r) || *r < f.CreatedSec || *r > f.FinishedSec || (f.AdmittedSec != nil && *r > *f.AdmittedSec):
				add(at("requeuedSec"), "%g: want a time between createdSec and admittedSec (else finishedSec)", *r)
			}
		}
	}
	if len(s.Finished) > 0 && s.History == "" {
		add(yamldoc.Path{"finished"}, "needs history: the trace with the finished workloads' shapes")
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return &s, nil
}

func checkAdmission(a *Admission, p yamldoc.Path, add func(yamldoc.Path, string, ...any)) {
	if a == nil {
		add(p, "missing: an Admitted workload's ClusterQueue and flavors")
		return
	}
	if a.ClusterQueue == "" {
		add(append(p, "clusterQueue"), "missing")
	}
	if len(a.PodSets) == 0 {
		add(append(p, "podSets"), "missing: at least one pod set")
	}
	for j, ps := range a.PodSets {
		at := append(append(yamldoc.Path{}, p...), "podSets", j)
		if ps.Name == "" {
			add(append(at, "name"), "missing")
		}
		if ps.Count < 1 {
			add(append(at, "count"), "%d: want ≥ 1 pod", ps.Count)
		}
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Marshal writes s as YAML, with the fixed header.
func Marshal(s *State) ([]byte, error) {
	c := *s
	c.APIVersion, c.Kind = APIVersion, Kind
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&c); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return b.Bytes(), nil
}

// Find returns the workload with id, or nil.
func (s *State) Find(id string) *Workload {
	for i := range s.Workloads {
		if s.Workloads[i].ID == id {
			return &s.Workloads[i]
		}
	}
	return nil
}

// Index maps each workload's id to it (pointers into Workloads), for lookups of many ids.
func (s *State) Index() map[string]*Workload {
	idx := make(map[string]*Workload, len(s.Workloads))
	for i := range s.Workloads {
		idx[s.Workloads[i].ID] = &s.Workloads[i]
	}
	return idx
}

// OrderSec is the time Kueue orders w by while it is pending.
func (w *Workload) OrderSec() float64 {
	if w.QueuedSec != nil {
		return *w.QueuedSec
	}
	return w.CreatedSec
}
