package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat"

	"github.com/kueuelab/kueuelab/runtime/controlplane"
)

// Engine names the engine that replays a trace: the one type for the --engine flag, an
// experiment's engine field and summary.json's engine.
type Engine string

// The engines.
const (
	// EngineCluster replays on a cluster: the real Kueue and controllers (runtime/runner).
	EngineCluster Engine = "cluster"
	// EngineSim replays through Kueue's scheduler as a library in virtual time (runtime/sim).
	EngineSim Engine = "sim"
)

// Engines lists the engines, the default first.
var Engines = []Engine{EngineCluster, EngineSim}

// ParseEngine reads an engine name ("" is the default, cluster).
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(s); e {
	case "":
		return EngineCluster, nil
	case EngineCluster, EngineSim:
		return e, nil
	}
	return "", fmt.Errorf("engine %q: want %s or %s", s, EngineCluster, EngineSim)
}

// String, Set and Type make an Engine a command-line flag.
func (e Engine) String() string { return string(e) }

// Set parses a flag's value.
func (e *Engine) Set(s string) error {
	v, err := ParseEngine(s)
	if err == nil {
		*e = v
	}
	return err
}

// Type is the flag's value type in --help.
func (*Engine) Type() string { return "cluster|sim" }

// Meta describes the run a summary belongs to.
type Meta struct {
	Trace   string `json:"trace"`
	Cluster string `json:"cluster"`
	// Speedup is the cap on trace seconds per wall second between events (0: max, none).
	Speedup Speedup `json:"speedup"`
	// WallSec is the run's wall-clock duration (setup excluded).
	WallSec float64 `json:"wallSec"`
	// TraceSec is the trace time the run reached.
	TraceSec float64 `json:"traceSec"`
	// GPUCapacity is the GPUs of every node of the cluster: the denominator of utilisation.
	GPUCapacity int64 `json:"gpuCapacity"`
	// PartitionedGPUs are the GPUs of GPUCapacity on MIG-partitioned nodes, TimeSlicedGPUs those
	// shared by time-slicing.
	PartitionedGPUs int64 `json:"partitionedGPUs,omitempty"`
	TimeSlicedGPUs  int64 `json:"timeSlicedGPUs,omitempty"`
	// Incomplete says why the run stopped before every workload was terminal ("" when it did not).
	Incomplete string `json:"incomplete,omitempty"`
	// Engine is the engine that produced the results: EngineCluster (the real control plane) or
	// EngineSim.
	Engine Engine `json:"engine,omitempty"`
	// HeldWallSec is the wall time the trace clock stood still because the control plane owed a
	// step (runtime/simclock); Holds counts the holds and HoldsExpired those that reached their
	// limit (each one a step the clock gave up waiting for). All zero when the clock had no holds.
	HeldWallSec  float64 `json:"heldWallSec"`
	Holds        int     `json:"holds"`
	HoldsExpired int     `json:"holdsExpired"`
	// HeldByKindSec is the wall time at least one hold of each kind was active (kinds overlap);
	// ExpiredByKind counts the expired holds by kind; FirstExpired names the first few (which
	// step, of which workload, at which trace time).
	HeldByKindSec map[string]float64 `json:"heldByKindSec,omitempty"`
	ExpiredByKind map[string]int     `json:"expiredByKind,omitempty"`
	FirstExpired  []string           `json:"firstExpired,omitempty"`
	// Jumps counts the clock's moves from one event to the next, JumpedSec the trace time they
	// covered.
	Jumps     int     `json:"jumps,omitempty"`
	JumpedSec float64 `json:"jumpedSec,omitempty"`
	// LateSteps counts steps observed after the trace time at which they happened (a pod's end
	// after the agent ended it, a Workload's finish after its last pod ended): the clock moved
	// while a step was owed. LateMaxSec is the worst delay: the residual the holds did not cover.
	// Zero in an exact run.
	LateSteps  int     `json:"lateSteps"`
	LateMaxSec float64 `json:"lateMaxSec"`
	LateWorst  string  `json:"lateWorst,omitempty"`
	// Resyncs counts the times the runner asked a job's operator to look at its pods again: pods
	// that outlived the Workload's quota reservation, not deleted by the operator (an informer
	// cache that missed pods created an instant before the job was suspended).
	Resyncs int `json:"resyncs,omitempty"`
	// KueueClock is what running the local Kueue on the trace clock cost (nil: Kueue kept wall
	// time).
	KueueClock *KueueClockMeta `json:"kueueClock,omitempty"`
	// SubmitRetries counts create calls retried after a transient failure; Rejected the
	// workloads the API server refused for good, FirstRejection the first one and why.
	SubmitRetries  int    `json:"submitRetries,omitempty"`
	Rejected       int    `json:"rejected,omitempty"`
	FirstRejection string `json:"firstRejection,omitempty"`
	// Restarts counts the control-plane components' restarts during the run, by component;
	// Outages the times some component was down or unready and OutageWallSec their wall time (the
	// trace clock held through them).
	Restarts      map[string]int `json:"restarts,omitempty"`
	Outages       int            `json:"outages,omitempty"`
	OutageWallSec float64        `json:"outageWallSec,omitempty"`
	// States counts the workloads by their state at the end of the run.
	States map[string]int `json:"states,omitempty"`
	// Faults counts the injected faults (nil: none were asked for).
	Faults *FaultMeta `json:"faults,omitempty"`
	// Kueue is the Kueue the run replayed on and the settings of its Configuration a replay depends
	// on (nil: not known to the engine).
	Kueue *KueueMeta `json:"kueue,omitempty"`
}

// KueueMeta is a Kueue version and the settings of its Configuration that shape a replay.
type KueueMeta struct {
	Version string `json:"version"`
	// Source says where the settings were read: the configuration kueuelab gave its local
	// cluster's Kueue, or the ConfigMap of the cluster behind --kubeconfig.
	Source string `json:"source,omitempty"`
	// FeatureGates are the gates the run set (Kueue's defaults for the rest).
	FeatureGates map[string]bool `json:"featureGates,omitempty"`
	// ClientQPS and ClientBurst are Kueue's API client rate (clientConnection).
	ClientQPS   float64 `json:"clientQPS,omitempty"`
	ClientBurst int     `json:"clientBurst,omitempty"`
	// WaitForPodsReady is nil when it is off.
	WaitForPodsReady *PodsReadyMeta `json:"waitForPodsReady,omitempty"`
	// Clock is the time Kueue's timers and timestamps ran on: ClockTrace for the local cluster's
	// Kueue (runtime/kueueclock), ClockWall for a Kueue kueuelab does not run, whose timers the
	// trace clock waits for in wall time.
	Clock string `json:"clock,omitempty"`
	// ControlPlane is the control-plane model the run's trace time charged Kueue's speed with
	// (its rate limit filled in); nil: none, Kueue infinitely fast.
	ControlPlane *controlplane.Model `json:"controlPlane,omitempty"`
}

// KueueMeta.Clock values.
const (
	ClockTrace = "trace"
	ClockWall  = "wall"
)

// PodsReadyMeta is waitForPodsReady in trace seconds.
type PodsReadyMeta struct {
	TimeoutSec         float64 `json:"timeoutSec"`
	RecoveryTimeoutSec float64 `json:"recoveryTimeoutSec"`
	BackoffBaseSec     float64 `json:"backoffBaseSec"`
	BackoffMaxSec      float64 `json:"backoffMaxSec"`
	BlockAdmission     bool    `json:"blockAdmission"`
}

// Quantiles are the p50, p95 and p99 of N values; nil when N is 0.
type Quantiles struct {
	N   int      `json:"n"`
	P50 *float64 `json:"p50"`
	P95 *float64 `json:"p95"`
	P99 *float64 `json:"p99"`
}

// Group is the statistics of the workloads of one scope: all of them, one ClusterQueue, or one
// family. Time-to-admission counts admitted workloads, JCT and slowdown finished ones.
type Group struct {
	Scope     string `json:"scope"` // all, queue or family
	Name      string `json:"name"`
	Workloads int    `json:"workloads"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	// Rejected were refused by the API server (or could not be placed on the cluster).
	Rejected int `json:"rejected,omitempty"`
	// Unfinished were still unsubmitted, pending, admitted, running or evicted when the run ended.
	Unfinished int `json:"unfinished"`
	// TimeToAdmissionSec, JCTSec and Slowdown are quantiles in trace seconds (slowdown: a ratio).
	TimeToAdmissionSec Quantiles `json:"timeToAdmissionSec"`
	JCTSec             Quantiles `json:"jctSec"`
	Slowdown           Quantiles `json:"slowdown"`
	// GPUHours are GPU-hours allocated to Running pods; GPUAllocation is them over the cluster's
	// GPU capacity × the run's makespan; GPUEffective weighs each workload's GPU-hours by its
	// profile's GPU utilisation.
	GPUHours      float64 `json:"gpuHours"`
	GPUAllocation float64 `json:"gpuAllocation"`
	GPUEffective  float64 `json:"gpuEffective"`
	EnergyKWh     float64 `json:"energyKWh"`
	// LostEnergyKWh is the part of EnergyKWh burned by pods that did not finish.
	LostEnergyKWh float64 `json:"lostEnergyKWh"`
	// MakespanSec is last finish − first submission of the group's workloads.
	MakespanSec float64 `json:"makespanSec"`
	Preemptions int     `json:"preemptions"`
	Evictions   int     `json:"evictions"`
	Requeues    int     `json:"requeues"`
	// FaultTotals are the faults, restarts and lost GPU time of the group's workloads.
	FaultTotals
	// SliceHours (groups of one MIG profile) are the slice-hours its pods held: GPUHours over
	// the share of a GPU one slice holds. DeviceUtilization is the mean utilisation of the devices
	// they held while they held them (GPUEffective over GPUAllocation): a saturated slice counts 1.
	SliceHours        float64 `json:"sliceHours,omitempty"`
	DeviceUtilization float64 `json:"deviceUtilization,omitempty"`
}

// ScopeMIG is the scope of the groups of workloads by the MIG profile they ran on.
const ScopeMIG = "mig"

// Slices is what the MIG-partitioned GPUs did: the slices held on them counted in GPUs (a
// 3g.40gb slice held for an hour is 3/7 of a GPU-hour), over the partitioned GPUs' capacity.
type Slices struct {
	PartitionedGPUs int64 `json:"partitionedGPUs"`
	// Workloads ran on slices.
	Workloads int `json:"workloads"`
	// GPUHours, Allocation and Effective are the Group's, over PartitionedGPUs × the makespan.
	GPUHours   float64 `json:"gpuHours"`
	Allocation float64 `json:"allocation"`
	Effective  float64 `json:"effective"`
	// EnergyKWh is the energy of the pods on slices (their GPU share and their share of their
	// node's CPUs and platform), EnergyKWhPerGPU the same over PartitionedGPUs.
	EnergyKWh       float64 `json:"energyKWh"`
	EnergyKWhPerGPU float64 `json:"energyKWhPerGPU"`
}

// Summary is summary.json.
type Summary struct {
	Meta
	MakespanSec float64 `json:"makespanSec"`
	Groups      []Group `json:"groups"`
	// ReservedIdle is the quota Kueue held while pods could not run (idle.go; AddReservedIdle).
	ReservedIdle *Idle `json:"reservedIdle,omitempty"`
	// Slices is what the MIG-partitioned GPUs did (nil on a cluster without them).
	Slices *Slices `json:"slices,omitempty"`
	// TimeSliced is what the time-sliced GPUs did (nil on a cluster without them).
	TimeSliced *TimeSliced `json:"timeSliced,omitempty"`
}

// TimeSliced is what the time-sliced GPUs did: the replicas held on them counted in GPUs (one of
// four replicas held for an hour is a quarter of a GPU-hour), and the compute their pods used,
// over the time-sliced GPUs' capacity × the makespan.
type TimeSliced struct {
	GPUs int64 `json:"gpus"`
	// Workloads had pods on replicas.
	Workloads  int     `json:"workloads"`
	GPUHours   float64 `json:"gpuHours"`
	Allocation float64 `json:"allocation"`
	Effective  float64 `json:"effective"`
}

// Summarize computes the summary of recs: one group for all workloads, then one per ClusterQueue,
// one per family and one per MIG profile workloads ran on, each sorted by name.
func Summarize(recs []Record, m Meta) Summary {
	all := make([]*Record, len(recs))
	for i := range recs {
		all[i] = &recs[i]
	}
	s := Summary{Meta: m, MakespanSec: makespan(all)}
	s.Groups = append(s.Groups, group("all", "", all, s.MakespanSec, m.GPUCapacity))
	var onSlices []*Record
	for _, scope := range []string{"queue", "family", ScopeMIG} {
		// Pointers, not copies: a million records are not held three times over.
		by := map[string][]*Record{}
		for _, r := range all {
			k := r.Queue
			switch scope {
			case "family":
				k = string(r.Family)
			case ScopeMIG:
				if k = r.MIGProfile; k == "" {
					continue
				}
				onSlices = append(onSlices, r)
			}
			by[k] = append(by[k], r)
		}
		names := make([]string, 0, len(by))
		for k := range by {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			g := group(scope, k, by[k], s.MakespanSec, m.GPUCapacity)
			if scope == ScopeMIG {
				sliceHours(&g, by[k])
			}
			s.Groups = append(s.Groups, g)
		}
	}
	if m.TimeSlicedGPUs > 0 {
		ts := &TimeSliced{GPUs: m.TimeSlicedGPUs}
		var held, busy float64
		for _, r := range all {
			if r.TimeSlicedGPUSeconds > 0 {
				ts.Workloads++
				held += r.TimeSlicedGPUSeconds
				busy += r.BusyGPUSeconds
			}
		}
		ts.GPUHours = held / 3600
		if s.MakespanSec > 0 {
			ts.Allocation = held / (float64(m.TimeSlicedGPUs) * s.MakespanSec)
			ts.Effective = busy / (float64(m.TimeSlicedGPUs) * s.MakespanSec)
		}
		s.TimeSliced = ts
	}
	if m.PartitionedGPUs > 0 {
		g := group(ScopeMIG, "", onSlices, s.MakespanSec, m.PartitionedGPUs)
		s.Slices = &Slices{
			PartitionedGPUs: m.PartitionedGPUs, Workloads: len(onSlices),
			GPUHours: g.GPUHours, Allocation: g.GPUAllocation, Effective: g.GPUEffective,
			EnergyKWh: g.EnergyKWh, EnergyKWhPerGPU: g.EnergyKWh / float64(m.PartitionedGPUs),
		}
	}
	return s
}

// sliceHours adds to g, the group of the workloads that ran on one MIG profile, its slice-hours.
func sliceHours(g *Group, recs []*Record) {
	var sliceSec float64
	for _, r := range recs {
		if r.SliceShare > 0 {
			sliceSec += r.GPUSeconds / r.SliceShare
		}
	}
	g.SliceHours = sliceSec / 3600
}

func group(scope, name string, recs []*Record, runSpan float64, capacity int64) Group {
	g := Group{Scope: scope, Name: name, Workloads: len(recs)}
	var tta, jct, sd []float64
	var gpuSec, effSec, energy, lost float64
	for _, r := range recs {
		switch r.State {
		case StateSucceeded:
			g.Succeeded++
		case StateFailed:
			g.Failed++
		case StateRejected:
			g.Rejected++
		default:
			g.Unfinished++
		}
		if v, ok := r.TimeToAdmission(); ok {
			tta = append(tta, v)
		}
		if v, ok := r.JCT(); ok {
			jct = append(jct, v)
		}
		if v, ok := r.Slowdown(); ok {
			sd = append(sd, v)
		}
		gpuSec += r.GPUSeconds
		effSec += r.EffectiveGPUSeconds()
		energy += r.EnergyJ
		lost += r.LostEnergyJ
		g.Preemptions += len(r.Preemptions)
		g.Evictions += len(r.Evictions)
		g.Requeues += r.Requeues
		g.FaultTotals.add(r)
	}
	g.TimeToAdmissionSec, g.JCTSec, g.Slowdown = quantiles(tta), quantiles(jct), quantiles(sd)
	g.MakespanSec = makespan(recs)
	g.GPUHours = gpuSec / 3600
	if scope == ScopeMIG && gpuSec > 0 {
		g.DeviceUtilization = effSec / gpuSec
	}
	if capacity > 0 && runSpan > 0 {
		g.GPUAllocation = gpuSec / (float64(capacity) * runSpan)
		g.GPUEffective = effSec / (float64(capacity) * runSpan)
	}
	g.EnergyKWh = energy / 3.6e6
	g.LostEnergyKWh = lost / 3.6e6
	return g
}

// makespan is the last finish − the first submission (0 when nothing finished).
func makespan(recs []*Record) float64 {
	first, last := math.Inf(1), math.Inf(-1)
	for _, r := range recs {
		if r.Submitted != nil {
			first = math.Min(first, *r.Submitted)
		}
		if r.Finished != nil {
			last = math.Max(last, *r.Finished)
		}
	}
	if last > first {
		return last - first
	}
	return 0
}

func quantiles(v []float64) Quantiles {
	q := Quantiles{N: len(v)}
	if len(v) == 0 {
		return q
	}
	sort.Float64s(v)
	at := func(p float64) *float64 {
		x := stat.Quantile(p, stat.Empirical, v, nil)
		return &x
	}
	q.P50, q.P95, q.P99 = at(0.5), at(0.95), at(0.99)
	return q
}

// WriteJSON writes s as indented JSON.
func (s *Summary) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteTable prints the summary table: one row per group, times in trace seconds.
func (s *Summary) WriteTable(w io.Writer) error {
	if s.Engine == EngineSim {
		fmt.Fprintf(w, "makespan %s trace (%s wall, sim engine), %d GPUs\n", dur(s.MakespanSec), dur(s.WallSec), s.GPUCapacity)
	} else {
		fmt.Fprintf(w, "makespan %s trace (%s wall at speedup %s), %d GPUs\n",
			dur(s.MakespanSec), dur(s.WallSec), s.Speedup, s.GPUCapacity)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "group\tn\tok\tfail\trej\tunfin\tTTA p50\tp95\tp99\tJCT p50\tp95\tp99\tslowdown p50\tp95\tp99\tGPU alloc\teff\tkWh\tpreempt\tevict\t")
	for _, g := range s.Groups {
		name := g.Scope
		if g.Name != "" {
			name += " " + g.Name
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t\n",
			name, g.Workloads, g.Succeeded, g.Failed, g.Rejected, g.Unfinished,
			qdur(g.TimeToAdmissionSec.P50), qdur(g.TimeToAdmissionSec.P95), qdur(g.TimeToAdmissionSec.P99),
			qdur(g.JCTSec.P50), qdur(g.JCTSec.P95), qdur(g.JCTSec.P99),
			qratio(g.Slowdown.P50), qratio(g.Slowdown.P95), qratio(g.Slowdown.P99),
			pct(g.GPUAllocation), pct(g.GPUEffective), strconv.FormatFloat(g.EnergyKWh, 'f', 1, 64),
			g.Preemptions, g.Evictions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := s.writeFaultLine(w); err != nil {
		return err
	}
	if err := s.writeSlices(w); err != nil {
		return err
	}
	if s.ReservedIdle != nil {
		if err := s.ReservedIdle.WriteText(w); err != nil {
			return err
		}
	}
	if s.Incomplete != "" {
		_, err := fmt.Fprintf(w, "INCOMPLETE: %s\n", s.Incomplete)
		return err
	}
	return nil
}

// dur prints seconds compactly: 42s, 12.5m, 3.2h.
func dur(sec float64) string {
	switch a := math.Abs(sec); {
	case a < 120:
		return strconv.FormatFloat(sec, 'f', 0, 64) + "s"
	case a < 7200:
		return strconv.FormatFloat(sec/60, 'f', 1, 64) + "m"
	default:
		return strconv.FormatFloat(sec/3600, 'f', 1, 64) + "h"
	}
}

func qdur(p *float64) string {
	if p == nil {
		return "-"
	}
	return dur(*p)
}

func qratio(p *float64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(*p, 'f', 2, 64)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

// WriteFiles writes a run's workloads.csv and summary.json into dir (events.jsonl and
// timeseries.csv are written as the run goes).
func WriteFiles(dir string, recs []Record, s *Summary) error {
	write := func(name string, f func(io.Writer) error) error {
		p := filepath.Join(dir, name)
		fh, err := os.Create(p)
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", p, err), fh.Close())
		}
		return fh.Close()
	}
	return errors.Join(
		write(WorkloadsFile, func(w io.Writer) error { return WriteWorkloadsCSV(w, recs) }),
		write(SummaryFile, s.WriteJSON),
	)
}

// KueueClockMeta is what the local Kueue's timers on the trace clock did: the trace clock stopped
// at Timers of them; at LateAcks Kueue did not report its work done within the wait's limit (each
// is a timer whose effect may have come after the clock moved on: the residual); LongestAckSec is
// the longest wall wait for Kueue at one. WorkloadWaits counts the holds after a Workload change
// until Kueue's workload controller had taken it in (the reconcile that arms a timer), LateWorkloadWaits
// those that reached the same limit first.
type KueueClockMeta struct {
	Timers            int     `json:"timers"`
	LateAcks          int     `json:"lateAcks"`
	LongestAckSec     float64 `json:"longestAckSec"`
	WorkloadWaits     int     `json:"workloadWaits"`
	LateWorkloadWaits int     `json:"lateWorkloadWaits"`
}

// writeSlices prints what the MIG-partitioned GPUs did and a row per profile workloads ran on;
// nothing on a cluster without them.
func (s *Summary) writeSlices(w io.Writer) error {
	if ts := s.TimeSliced; ts != nil {
		fmt.Fprintf(w, "time-slicing: %d GPUs, %d workloads on replicas: %s allocated, %s effective (%.1f GPU-h held)\n",
			ts.GPUs, ts.Workloads, pct(ts.Allocation), pct(ts.Effective), ts.GPUHours)
	}
	if s.Slices == nil {
		return nil
	}
	sl := s.Slices
	fmt.Fprintf(w, "MIG: %d partitioned GPUs, %d workloads on slices: %s allocated, %s effective, %.1f kWh on slices (%.2f kWh a GPU)\n",
		sl.PartitionedGPUs, sl.Workloads, pct(sl.Allocation), pct(sl.Effective), sl.EnergyKWh, sl.EnergyKWhPerGPU)
	var rows []Group
	for _, g := range s.Groups {
		if g.Scope == ScopeMIG {
			rows = append(rows, g)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MIG profile\tn\tslice-h\tGPU-h\tslice util\tkWh\tTTA p50\tJCT p50\t")
	for _, g := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%.1f\t%s\t%s\t\n", g.Name, g.Workloads, g.SliceHours, g.GPUHours,
			pct(g.DeviceUtilization), g.EnergyKWh, qdur(g.TimeToAdmissionSec.P50), qdur(g.JCTSec.P50))
	}
	return tw.Flush()
}
