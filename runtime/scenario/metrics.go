package scenario

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// variantData is what a variant's run left: its results (repeat 0) and the node → topology block
// of the scenario's base cluster (empty without a topology).
type variantData struct {
	dir    *results.Dir
	blocks map[string]string
}

// metricDef is a metric: of a group of workloads (scope) or of one workload.
type metricDef struct {
	desc     string
	group    func(d *variantData, scope string) (float64, error)
	workload func(r *results.Record) (float64, bool)
}

// Metrics describes every metric a check can name.
func Metrics() map[string]string {
	out := map[string]string{}
	for k, m := range metrics {
		out[k] = m.desc
	}
	return out
}

// MetricNames lists the metrics, sorted.
func MetricNames() []string {
	out := make([]string, 0, len(metrics))
	for k := range metrics {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func groupField(desc string, f func(g *results.Group) float64) metricDef {
	return metricDef{desc: desc, group: func(d *variantData, scope string) (float64, error) {
		g, err := d.group(scope)
		if err != nil {
			return 0, err
		}
		return f(g), nil
	}}
}

func groupQuantile(desc string, f func(g *results.Group) *float64) metricDef {
	return metricDef{desc: desc, group: func(d *variantData, scope string) (float64, error) {
		g, err := d.group(scope)
		if err != nil {
			return 0, err
		}
		if v := f(g); v != nil {
			return *v, nil
		}
		return 0, fmt.Errorf("%s: no value (no workload of the group got that far)", scope)
	}}
}

// workloadsStat aggregates a per-workload value over the scope's workloads that have it.
func workloadsStat(desc string, value func(r *results.Record) (float64, bool), agg func([]float64) float64) metricDef {
	return metricDef{desc: desc, group: func(d *variantData, scope string) (float64, error) {
		var vs []float64
		for i := range d.dir.Workloads {
			r := &d.dir.Workloads[i]
			if !inScope(r, scope) {
				continue
			}
			if v, ok := value(r); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			return 0, fmt.Errorf("%s: no workload of the scope has a value", scopeName(scope))
		}
		return agg(vs), nil
	}}
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func maxOf(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

func opt(p *float64) (float64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

var metrics = map[string]metricDef{
	"workloads":   groupField("workloads in the scope", func(g *results.Group) float64 { return float64(g.Workloads) }),
	"succeeded":   groupField("workloads that succeeded", func(g *results.Group) float64 { return float64(g.Succeeded) }),
	"failed":      groupField("workloads that failed", func(g *results.Group) float64 { return float64(g.Failed) }),
	"unfinished":  groupField("workloads not finished when the run ended", func(g *results.Group) float64 { return float64(g.Unfinished) }),
	"preemptions": groupField("Kueue preemptions", func(g *results.Group) float64 { return float64(g.Preemptions) }),
	"evictions":   groupField("Kueue evictions", func(g *results.Group) float64 { return float64(g.Evictions) }),
	"requeues":    groupField("requeues after evictions", func(g *results.Group) float64 { return float64(g.Requeues) }),
	"restarts":    groupField("restarts from a checkpoint (or from zero) after an interruption", func(g *results.Group) float64 { return float64(g.Restarts) }),
	"faults":      groupField("injected faults that hit the scope's pods", func(g *results.Group) float64 { return float64(g.Faults) }),
	"ttaP50":      groupQuantile("time-to-admission p50, s", func(g *results.Group) *float64 { return g.TimeToAdmissionSec.P50 }),
	"ttaP95":      groupQuantile("time-to-admission p95, s", func(g *results.Group) *float64 { return g.TimeToAdmissionSec.P95 }),
	"jctP50":      groupQuantile("job completion time p50, s", func(g *results.Group) *float64 { return g.JCTSec.P50 }),
	"jctP95":      groupQuantile("job completion time p95, s", func(g *results.Group) *float64 { return g.JCTSec.P95 }),
	"slowdownP50": groupQuantile("slowdown p50 (JCT ÷ ideal)", func(g *results.Group) *float64 { return g.Slowdown.P50 }),
	"ttaMean":     workloadsStat("mean time-to-admission of the admitted workloads, s", (*results.Record).TimeToAdmission, mean),
	"ttaMax":      workloadsStat("longest time-to-admission, s", (*results.Record).TimeToAdmission, maxOf),
	"jctMean":     workloadsStat("mean job completion time, s", (*results.Record).JCT, mean),
	"jctMax":      workloadsStat("longest job completion time, s", (*results.Record).JCT, maxOf),
	"gpuAllocation": groupField("GPU allocation: GPU-hours of running pods over capacity × makespan, %",
		func(g *results.Group) float64 { return 100 * g.GPUAllocation }),
	"gpuEffective": groupField("GPU effective utilisation: GPU compute used over capacity × makespan, %",
		func(g *results.Group) float64 { return 100 * g.GPUEffective }),
	"energyKWh":     groupField("energy, kWh", func(g *results.Group) float64 { return g.EnergyKWh }),
	"lostEnergyKWh": groupField("energy of pods that did not finish, kWh", func(g *results.Group) float64 { return g.LostEnergyKWh }),
	"makespanSec":   groupField("last finish − first submission, s", func(g *results.Group) float64 { return g.MakespanSec }),
	"lostGPUHours":  groupField("GPU-hours of work thrown away by interruptions (redone)", func(g *results.Group) float64 { return g.LostGPUHours }),
	"checkpointGPUHours": groupField("GPU-hours paused writing checkpoints",
		func(g *results.Group) float64 { return g.CheckpointGPUHours }),
	"restartGPUHours": groupField("GPU-hours paused restarting", func(g *results.Group) float64 { return g.RestartGPUHours }),
	"faultOverheadGPUHours": groupField("GPU-hours lost to faults and checkpoints: lost + checkpointing + restarting",
		func(g *results.Group) float64 { return g.LostGPUHours + g.CheckpointGPUHours + g.RestartGPUHours }),
	"holdsExpired": {desc: "trace-clock holds that reached their limit (0 in an exact run)", group: func(d *variantData, _ string) (float64, error) {
		return float64(d.dir.Summary.HoldsExpired), nil
	}},
	"lateSteps": {desc: "steps seen after their trace time (0 in an exact run)", group: func(d *variantData, _ string) (float64, error) {
		return float64(d.dir.Summary.LateSteps), nil
	}},
	"maxPartialGangSec": {desc: "longest time a gang workload had some but not all of its pods running, s",
		group: func(d *variantData, scope string) (float64, error) { return d.partialGang(scope) }},
	"gangsSpanningBlocks": {desc: "gang workloads whose pods, once all running, were on more than one topology block",
		group: func(d *variantData, scope string) (float64, error) { return d.spanningBlocks(scope) }},
	// One workload's.
	"submittedSec":       {desc: "when the workload was submitted, trace s", workload: func(r *results.Record) (float64, bool) { return opt(r.Submitted) }},
	"admittedSec":        {desc: "when it was first admitted, trace s", workload: func(r *results.Record) (float64, bool) { return opt(r.Admitted) }},
	"firstPodRunningSec": {desc: "when its first pod ran, trace s", workload: func(r *results.Record) (float64, bool) { return opt(r.FirstPodRunning) }},
	"allPodsRunningSec":  {desc: "when all its pods first ran, trace s", workload: func(r *results.Record) (float64, bool) { return opt(r.AllPodsRunning) }},
	"finishedSec":        {desc: "when it finished, trace s", workload: func(r *results.Record) (float64, bool) { return opt(r.Finished) }},
	"ttaSec":             {desc: "its time-to-admission, s", workload: (*results.Record).TimeToAdmission},
	"jctSec":             {desc: "its job completion time, s", workload: (*results.Record).JCT},
	"workloadPreemptions": {desc: "its preemptions", workload: func(r *results.Record) (float64, bool) {
		return float64(len(r.Preemptions)), true
	}},
	"workloadRestarts": {desc: "its restarts", workload: func(r *results.Record) (float64, bool) { return float64(r.Restarts), true }},
	"workloadLostGPUHours": {desc: "GPU-hours of its work redone", workload: func(r *results.Record) (float64, bool) {
		return r.LostGPUSec / 3600, true
	}},
	"state": {desc: "its final state (Succeeded, Failed, ...; compare with == or !=)", workload: func(*results.Record) (float64, bool) { return 0, true }},
}

func inScope(r *results.Record, scope string) bool {
	kind, name, _ := strings.Cut(scope, " ")
	switch kind {
	case "queue":
		return r.Queue == name
	case "family":
		return string(r.Family) == name
	}
	return true
}

func scopeName(scope string) string {
	if scope == "" {
		return "all"
	}
	return scope
}

func (d *variantData) group(scope string) (*results.Group, error) {
	kind, name, _ := strings.Cut(scope, " ")
	if kind == "" {
		kind = "all"
	}
	for i := range d.dir.Summary.Groups {
		if g := &d.dir.Summary.Groups[i]; g.Scope == kind && g.Name == name {
			return g, nil
		}
	}
	return nil, fmt.Errorf("no group %q in %s", scopeName(scope), d.dir.Path)
}

func (d *variantData) record(id string) (*results.Record, error) {
	for i := range d.dir.Workloads {
		if d.dir.Workloads[i].ID == id {
			return &d.dir.Workloads[i], nil
		}
	}
	return nil, fmt.Errorf("no workload %q in %s", id, d.dir.Path)
}

func (d *variantData) state(id string) (string, error) {
	r, err := d.record(id)
	if err != nil {
		return "", err
	}
	return r.State, nil
}

// measure is an operand's value.
func (d *variantData) measure(o Operand) (float64, error) {
	if d == nil {
		return 0, fmt.Errorf("variant %s: no results", o.Variant)
	}
	m := metrics[o.Metric]
	if m.workload != nil {
		r, err := d.record(o.Workload)
		if err != nil {
			return 0, err
		}
		v, ok := m.workload(r)
		if !ok {
			return 0, fmt.Errorf("%s: %s never happened (state %s)", o.Workload, o.Metric, r.State)
		}
		return v, nil
	}
	return m.group(d, o.Scope)
}

// gangs are the scope's workloads of more than one pod, with their pods' running intervals from
// the event log: per workload, the running pods (and their nodes) at each change.
type gangTimeline struct {
	rec    *results.Record
	events []results.Event
}

func (d *variantData) gangs(scope string) []gangTimeline {
	byID := map[string]*gangTimeline{}
	var order []string
	for i := range d.dir.Workloads {
		r := &d.dir.Workloads[i]
		if r.Pods > 1 && inScope(r, scope) {
			byID[r.ID] = &gangTimeline{rec: r}
			order = append(order, r.ID)
		}
	}
	for _, e := range d.dir.Events {
		if g := byID[e.Workload]; g != nil && (e.Type == results.EvPodRunning || e.Type == results.EvPodFinished) {
			g.events = append(g.events, e)
		}
	}
	out := make([]gangTimeline, 0, len(order))
	for _, id := range order {
		g := byID[id]
		sort.SliceStable(g.events, func(i, j int) bool { return g.events[i].T < g.events[j].T })
		out = append(out, *g)
	}
	return out
}

// partialGang is the longest stretch during which a gang workload had some but not all of its
// pods running (a stretch still open when the run ended lasts until then).
func (d *variantData) partialGang(scope string) (float64, error) {
	end := d.dir.Summary.TraceSec
	worst := 0.0
	for _, g := range d.gangs(scope) {
		running := map[string]bool{}
		since := -1.0
		for i, e := range g.events {
			if e.Type == results.EvPodRunning {
				running[e.Object] = true
			} else {
				delete(running, e.Object)
			}
			if i+1 < len(g.events) && g.events[i+1].T == e.T {
				continue // settle all changes at one time first
			}
			partial := len(running) > 0 && len(running) < g.rec.Pods
			switch {
			case partial && since < 0:
				since = e.T
			case !partial && since >= 0:
				worst = math.Max(worst, e.T-since)
				since = -1
			}
		}
		if since >= 0 {
			worst = math.Max(worst, end-since)
		}
	}
	return worst, nil
}

// spanningBlocks counts the gang workloads whose pods, the first time they all ran, were on more
// than one topology block of the scenario's cluster. Nodes outside the topology (a parameter
// server on a CPU node) are in no block and do not count.
func (d *variantData) spanningBlocks(scope string) (float64, error) {
	if len(d.blocks) == 0 {
		return 0, fmt.Errorf("the scenario's cluster has no topology: no blocks to count")
	}
	n := 0
	for _, g := range d.gangs(scope) {
		nodes := map[string]string{}
		for _, e := range g.events {
			if e.Type == results.EvPodRunning {
				nodes[e.Object] = e.Node
			} else {
				delete(nodes, e.Object)
			}
			if len(nodes) == g.rec.Pods {
				blocks := map[string]bool{}
				for _, node := range nodes {
					if b, ok := d.blocks[node]; ok {
						blocks[b] = true
					}
				}
				if len(blocks) > 1 {
					n++
				}
				break
			}
		}
	}
	return float64(n), nil
}
