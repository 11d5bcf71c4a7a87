package experiment

import (
	"fmt"
	"slices"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/replay"
)

// Faults and checkpoints in an experiment: the experiment's faults apply to every
// variant unless a variant gives its own (`faults: {}` for none); a variant's workloads section
// changes the trace's checkpointing and restart budget before it runs, which is how a sweep of
// the checkpoint interval is written.

// WorkloadOverrides change the fault tolerance of the trace's workloads (of Families, or all).
// A value left out keeps the trace's.
type WorkloadOverrides struct {
	Families []trace.Family `yaml:"families,omitempty"`
	// CheckpointInterval is the work between checkpoints ("0" turns checkpointing off).
	CheckpointInterval *fault.Duration `yaml:"checkpointInterval,omitempty"`
	// CheckpointCost is the pause each checkpoint costs.
	CheckpointCost *fault.Duration `yaml:"checkpointCost,omitempty"`
	// RestartOverhead is how long a restart takes before work resumes from the checkpoint.
	RestartOverhead *fault.Duration `yaml:"restartOverhead,omitempty"`
	// MaxRestarts is the owner's restart budget (render/restarts.go).
	MaxRestarts *int `yaml:"maxRestarts,omitempty"`
}

// Empty reports whether o changes nothing.
func (o *WorkloadOverrides) Empty() bool {
	return o == nil || (o.CheckpointInterval == nil && o.CheckpointCost == nil && o.RestartOverhead == nil && o.MaxRestarts == nil)
}

// Apply returns t with the overrides applied to a copy of each workload they select (t itself is
// shared by the variants and stays as it is).
func (o *WorkloadOverrides) Apply(t *trace.Trace) *trace.Trace {
	if o.Empty() {
		return t
	}
	out := *t
	out.Workloads = make([]*trace.Workload, len(t.Workloads))
	for i, w := range t.Workloads {
		if len(o.Families) > 0 && !slices.Contains(o.Families, w.WorkloadType) {
			out.Workloads[i] = w
			continue
		}
		c := *w
		if o.CheckpointInterval != nil {
			c.CheckpointIntervalSec = float64(*o.CheckpointInterval)
		}
		if o.CheckpointCost != nil {
			c.CheckpointCostSec = float64(*o.CheckpointCost)
		}
		if o.RestartOverhead != nil {
			c.RestartOverheadSec = float64(*o.RestartOverhead)
		}
		if o.MaxRestarts != nil {
			c.MaxRestarts = *o.MaxRestarts
		}
		out.Workloads[i] = &c
	}
	return &out
}

// FaultsOf is the fault spec variant v runs with (nil: none).
func (e *Experiment) FaultsOf(v *Variant) *fault.Spec {
	if v.Faults != nil {
		return v.Faults
	}
	return e.Faults
}

// validateFaults checks the experiment's and the variants' faults and workload overrides.
func (e *Experiment) validateFaults(root *yaml.Node, el *errList) {
	check := func(s *fault.Spec, at yamldoc.Path) {
		if s == nil {
			return
		}
		for _, p := range s.Check() {
			path := append(at[:len(at):len(at)], p.Path...)
			el.add(yamldoc.Line(root, path), yamldoc.Path(path).String(), "%s", p.Msg)
		}
	}
	check(e.Faults, yamldoc.Path{"faults"})
	simFaultsSaid := false
	for i := range e.Variants {
		v := &e.Variants[i]
		check(v.Faults, yamldoc.Path{"variants", i, "faults"})
		// The sim engine plays no injector, no owners' failure policies and no Kueue requeue
		// after a failure: it refuses faults rather than run without them.
		if err := replay.Require(e.Engine, replay.Faults); err != nil && !e.FaultsOf(v).Empty() {
			switch {
			case v.Faults != nil:
				at := yamldoc.Path{"variants", i, "faults"}
				el.add(yamldoc.Line(root, at), at.String(), "%v (or faults: {})", err)
			case !simFaultsSaid:
				simFaultsSaid = true
				el.add(yamldoc.Line(root, yamldoc.Path{"faults"}), "faults", "%v (or faults: {} in every variant; variant %q has them)", err, v.Name)
			}
		}
		if o := v.Workloads; o != nil {
			at := yamldoc.Path{"variants", i, "workloads"}
			for j, f := range o.Families {
				if !f.Known() {
					el.add(yamldoc.Line(root, at.Key("families").Idx(j)), at.Key("families").Idx(j).String(), "unknown family %q", f)
				}
			}
			if o.MaxRestarts != nil && *o.MaxRestarts < 0 {
				el.add(yamldoc.Line(root, at.Key("maxRestarts")), at.Key("maxRestarts").String(), "must be >= 0, got %d", *o.MaxRestarts)
			}
			if o.CheckpointCost != nil && *o.CheckpointCost > 0 && o.CheckpointInterval != nil && *o.CheckpointInterval > 0 && *o.CheckpointInterval < 1 {
				el.add(yamldoc.Line(root, at.Key("checkpointInterval")), at.Key("checkpointInterval").String(),
					"must be >= 1s when checkpoints cost a pause, got %s", *o.CheckpointInterval)
			}
		}
	}
}

// DescribeFaults says what a variant's faults and overrides are, for `experiment check`.
func (e *Experiment) DescribeFaults(v *Variant) string {
	s := ""
	if f := e.FaultsOf(v); !f.Empty() {
		s += fmt.Sprintf(", %d fault events", len(f.Events))
		if f.Random != nil {
			s += ", random faults"
		}
	}
	if !v.Workloads.Empty() {
		s += ", workload overrides"
	}
	return s
}
