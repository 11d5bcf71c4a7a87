// Package experiment runs one trace under several cluster and Kueue configurations: an
// experiment file names a trace (or generator settings), a base cluster spec and variants, each a
// list of typed patch operations; Run executes every variant × repeat on a fresh cluster and
// records each in its own results directory, skipping those a previous run finished.
package experiment

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// APIVersion and Kind identify an experiment document.
const (
	APIVersion = "kueuelab.io/v1alpha1"
	Kind       = "Experiment"
)

// Experiment is an experiment file.
type Experiment struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	// Trace is a trace file (relative to the experiment file); exclusive with Generator.
	Trace string `yaml:"trace,omitempty"`
	// Generator generates the trace: one per repeat, with seed Seed + repeat index.
	Generator *Generator `yaml:"generator,omitempty"`
	// Cluster is the base cluster spec (relative to the experiment file).
	Cluster string `yaml:"cluster"`
	// Speedup caps trace seconds per wall second between events: a number, or "max" (the
	// default: the trace clock jumps from event to event).
	Speedup results.Speedup `yaml:"speedup,omitempty"`
	// Timeout bounds each run's wall time, as a Go duration ("20m"; default: none).
	Timeout string `yaml:"timeout,omitempty"`
	// Repeats is the number of runs per variant (default 1); --repeats overrides it.
	Repeats int `yaml:"repeats,omitempty"`
	// Seed is the runner's seed (placement, Katib sampling) of repeat 0; repeat k uses Seed + k.
	Seed uint64 `yaml:"seed,omitempty"`
	// Baseline names the variant deltas are measured against (default: the first).
	Baseline string    `yaml:"baseline,omitempty"`
	Variants []Variant `yaml:"variants"`
	// Faults are injected in every variant that does not give its own (faults.go).
	Faults *fault.Spec `yaml:"faults,omitempty"`
	// Engine runs every variant on the cluster engine ("cluster", the default: a fresh local
	// cluster per run) or the sim engine ("sim": Kueue's scheduler in virtual time, runtime/sim).
	Engine results.Engine `yaml:"engine,omitempty"`
	// Sim holds the sim engine's control-plane timing (engine: sim only).
	Sim *SimTiming `yaml:"sim,omitempty"`
	// ControlPlane is the control-plane model of every variant that does not give its own:
	// "none" (the default: Kueue infinitely fast), "kueue" (the built-in model) or a
	// control-plane file (relative to the experiment file; runtime/controlplane). Engine sim only.
	ControlPlane string `yaml:"controlPlane,omitempty"`
	// KueueVersion is the Kueue release of every variant that does not give its own (default
	// runtime/kueuever.Default). The sim engine runs every supported release (runtime/simver); the
	// cluster engine the releases its tools build.
	KueueVersion string `yaml:"kueueVersion,omitempty"`

	file    string
	timeout time.Duration
}

// SimTiming is the sim engine's timing, as Go durations of trace time (defaults: runtime/sim's
// DefaultTiming).
type SimTiming struct {
	// Cycle is the duration of one Kueue scheduling cycle.
	Cycle string `yaml:"cycle,omitempty"`
	// PodStart is the time from admission to running pods.
	PodStart string `yaml:"podStart,omitempty"`
}

// Metadata names the experiment.
type Metadata struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
}

// Generator are the settings of `kueuelab gen` that make the trace.
type Generator struct {
	Jobs int    `yaml:"jobs"`
	Seed uint64 `yaml:"seed"`
	// Profile is a profile file (relative to the experiment file; default: the embedded profile).
	Profile   string     `yaml:"profile,omitempty"`
	Overrides *Overrides `yaml:"overrides,omitempty"`
}

// Overrides are the generator flags that override profile fields (see `kueuelab gen --help`).
type Overrides struct {
	MeanInterArrivalSec *float64 `yaml:"meanInterArrivalSec,omitempty"`
	GPURatio            *float64 `yaml:"gpuRatio,omitempty"`
	PerfRatio           *float64 `yaml:"perfRatio,omitempty"`
	EcoRatio            *float64 `yaml:"ecoRatio,omitempty"`
	BurstDayProbability *float64 `yaml:"burstDayProbability,omitempty"`
	BurstMultiplier     *float64 `yaml:"burstMultiplier,omitempty"`
	BurstMeanJobs       *float64 `yaml:"burstMeanJobs,omitempty"`
	CPUWorkRatePerCore  *float64 `yaml:"cpuWorkRatePerCore,omitempty"`
	GPUWorkRatePerGPU   *float64 `yaml:"gpuWorkRatePerGPU,omitempty"`
}

// Variant is one configuration under test: the base cluster spec with ClusterPatch (a JSON merge
// patch, RFC 7386) applied first, then the typed operations of Patch in order, and Kueue run
// with KueueConfig.
type Variant struct {
	Name        string       `yaml:"name"`
	Description string       `yaml:"description,omitempty"`
	Patch       []Op         `yaml:"patch,omitempty"`
	KueueConfig *KueueConfig `yaml:"kueueConfig,omitempty"`
	// ClusterPatch is merged into the cluster spec document (for what the typed operations do
	// not cover); null deletes a field, a list replaces the list.
	ClusterPatch map[string]any `yaml:"clusterPatch,omitempty"`
	// Faults replace the experiment's faults for this variant (`{}`: none).
	Faults *fault.Spec `yaml:"faults,omitempty"`
	// Workloads change the trace's checkpointing and restart budget for this variant.
	Workloads *WorkloadOverrides `yaml:"workloads,omitempty"`
	// ControlPlane replaces the experiment's control-plane model for this variant.
	ControlPlane string `yaml:"controlPlane,omitempty"`
	// KueueVersion replaces the experiment's Kueue release for this variant: an upgrade what-if
	// is variants that differ in it alone.
	KueueVersion string `yaml:"kueueVersion,omitempty"`

	line int
}

// UnmarshalYAML keeps the variant's line for error messages.
func (v *Variant) UnmarshalYAML(n *yaml.Node) error {
	type plain Variant
	if err := n.Decode((*plain)(v)); err != nil {
		return err
	}
	v.line = n.Line
	return nil
}

// File is the path the experiment was loaded from.
func (e *Experiment) File() string { return e.file }

// TimeoutDuration is the parsed Timeout (0: none).
func (e *Experiment) TimeoutDuration() time.Duration { return e.timeout }

// BaselineName is the variant deltas are measured against.
func (e *Experiment) BaselineName() string {
	if e.Baseline != "" {
		return e.Baseline
	}
	return e.Variants[0].Name
}

// path resolves p relative to the experiment file.
func (e *Experiment) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(e.file), p)
}

// ClusterPath is the base cluster spec's path.
func (e *Experiment) ClusterPath() string { return e.path(e.Cluster) }

// Load reads and validates the experiment file at path; every problem is reported, each as
// "file:line: field.path: reason". Variants are checked against the cluster spec by Spec.
func Load(path string) (*Experiment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read; name is the file name used in errors and to resolve the
// relative paths.
func Parse(name string, data []byte) (*Experiment, error) {
	root, err := yamldoc.Root(name, "experiment file", data)
	if err != nil {
		return nil, err
	}
	return ParseNode(name, root)
}

// ParseNode is Parse on a decoded YAML tree: a document that holds an experiment among other
// fields (a scenario) passes it without them, keeping every node's line.
func ParseNode(name string, root *yaml.Node) (*Experiment, error) {
	el := &errList{file: name}
	if root.Kind != yaml.MappingNode {
		el.add(root.Line, "", "an experiment file is a mapping (apiVersion, kind, cluster, variants, ...)")
		return nil, el.err()
	}
	yamldoc.UnknownFields(root, reflect.TypeOf(Experiment{}), func(key *yaml.Node, p yamldoc.Path, known []string) {
		el.add(key.Line, p.String(), "unknown field (known fields: %s)", strings.Join(known, ", "))
	})
	if err := el.err(); err != nil {
		return nil, err
	}
	e := &Experiment{file: name}
	if err := root.Decode(e); err != nil {
		return nil, yamldoc.ErrorsIn(name, root, err)
	}
	e.validate(root, el)
	if err := el.err(); err != nil {
		return nil, err
	}
	return e, nil
}

var variantName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

func (e *Experiment) validate(root *yaml.Node, el *errList) {
	line := func(path ...any) int { return yamldoc.Line(root, path) }
	if e.APIVersion != APIVersion {
		el.add(line("apiVersion"), "apiVersion", "must be %q, got %q", APIVersion, e.APIVersion)
	}
	if e.Kind != Kind {
		el.add(line("kind"), "kind", "must be %q, got %q", Kind, e.Kind)
	}
	switch {
	case e.Trace == "" && e.Generator == nil:
		el.add(root.Line, "trace", "set trace (a trace file) or generator (jobs, seed, ...)")
	case e.Trace != "" && e.Generator != nil:
		el.add(line("generator"), "generator", "trace and generator are exclusive")
	case e.Generator != nil:
		if e.Generator.Jobs < 1 {
			el.add(line("generator", "jobs"), "generator.jobs", "must be >= 1, got %d", e.Generator.Jobs)
		}
	}
	if e.Cluster == "" {
		el.add(root.Line, "cluster", "required: the base cluster spec (a path relative to the experiment file)")
	}
	if e.Speedup < 0 {
		el.add(line("speedup"), "speedup", `want "max" or a positive number, got %s`, e.Speedup)
	}
	switch eng, err := results.ParseEngine(string(e.Engine)); {
	case err != nil:
		el.add(line("engine"), "engine", "%v", err)
	case eng == results.EngineCluster:
		e.Engine = eng
		if e.Sim != nil {
			el.add(line("sim"), "sim", "sim timing needs engine: sim")
		}
	case eng == results.EngineSim:
		if _, err := e.SimTiming(); err != nil {
			el.add(line("sim"), "sim", "%v", err)
		}
	}
	if e.Timeout != "" {
		d, err := time.ParseDuration(e.Timeout)
		if err != nil || d <= 0 {
			el.add(line("timeout"), "timeout", "want a positive Go duration such as 20m, got %q", e.Timeout)
		}
		e.timeout = d
	}
	if e.Repeats == 0 {
		e.Repeats = 1
	}
	if e.Repeats < 1 {
		el.add(line("repeats"), "repeats", "must be >= 1, got %d", e.Repeats)
	}
	if len(e.Variants) == 0 {
		el.add(root.Line, "variants", "at least one variant is required")
	}
	seen := map[string]bool{}
	for i := range e.Variants {
		v := &e.Variants[i]
		p := fmt.Sprintf("variants[%d]", i)
		if !variantName.MatchString(v.Name) {
			el.add(v.line, p+".name", "%q: want lower-case letters, digits, '.', '_' and '-' (it names a directory)", v.Name)
		}
		if seen[v.Name] {
			el.add(v.line, p+".name", "duplicate variant %q", v.Name)
		}
		seen[v.Name] = true
		for j := range v.Patch {
			if err := v.Patch[j].check(); err != nil {
				el.add(v.Patch[j].line, fmt.Sprintf("%s.patch[%d]", p, j), "%v", err)
			}
		}
		if v.KueueConfig != nil {
			if v.KueueConfig.PriorityBooster != nil && e.Engine != results.EngineSim {
				el.add(yamldoc.Line(root, yamldoc.Path{"variants", i, "kueueConfig", "priorityBooster"}), p+".kueueConfig.priorityBooster",
					"the sim engine runs Kueue's kueue-priority-booster beside Kueue; the cluster engine does not (the booster reads the wall clock, which the trace clock would have to replace as it does in Kueue): use engine: sim")
			}
			err := v.KueueConfig.check()
			// A variant on another release is checked by that release's own kueuelab.
			if rel, verr := e.KueueVersionOf(v); err == nil && verr == nil && e.Engine == results.EngineSim && rel.Name == sim.KueueVersion {
				_, err = sim.KueueConfigFromFields(v.KueueConfig.WithKueueDefaults(rel).Fields())
			}
			if err != nil {
				el.add(yamldoc.Line(root, yamldoc.Path{"variants", i, "kueueConfig"}), p+".kueueConfig", "%v", err)
			}
		}
	}
	e.validateControlPlanes(root, el)
	e.validateKueueVersions(root, el)
	if e.Baseline != "" && !seen[e.Baseline] {
		el.add(line("baseline"), "baseline", "no variant named %q", e.Baseline)
	}
	e.validateFaults(root, el)
}

// KueueVersionOf is the Kueue release variant v runs.
func (e *Experiment) KueueVersionOf(v *Variant) (kueuever.Version, error) {
	return kueuever.Lookup(cmp.Or(v.KueueVersion, e.KueueVersion))
}

// validateKueueVersions checks every release the experiment names against its engine.
func (e *Experiment) validateKueueVersions(root *yaml.Node, el *errList) {
	check := func(p yamldoc.Path, name string) {
		v, err := kueuever.Lookup(name)
		switch {
		case err != nil:
			el.add(yamldoc.Line(root, p), p.String(), "%v", err)
		case e.Engine == results.EngineCluster && !v.Cluster:
			el.add(yamldoc.Line(root, p), p.String(), "Kueue %s: the cluster engine runs Kueue %s; engine: sim runs %s", v.Name, kueuever.Default, kueuever.Names())
		}
	}
	if e.KueueVersion != "" {
		check(yamldoc.Path{"kueueVersion"}, e.KueueVersion)
	}
	for i := range e.Variants {
		if e.Variants[i].KueueVersion != "" {
			check(yamldoc.Path{"variants", i, "kueueVersion"}, e.Variants[i].KueueVersion)
		}
	}
}

// ControlPlaneOf is the control-plane model of variant v (nil: none).
func (e *Experiment) ControlPlaneOf(v *Variant) (*controlplane.Model, error) {
	name := cmp.Or(v.ControlPlane, e.ControlPlane, controlplane.NoneName)
	if name != controlplane.NoneName && name != controlplane.DefaultName {
		name = e.path(name)
	}
	return controlplane.Resolve(name)
}

// validateControlPlanes loads every control-plane model the experiment names; they need the
// sim engine.
func (e *Experiment) validateControlPlanes(root *yaml.Node, el *errList) {
	check := func(p yamldoc.Path, v *Variant) {
		m, err := e.ControlPlaneOf(v)
		switch {
		case err != nil:
			el.add(yamldoc.Line(root, p), p.String(), "%v", err)
		case m != nil && e.Engine != results.EngineSim:
			el.add(yamldoc.Line(root, p), p.String(), "a control-plane model needs engine: sim (the cluster engine does not apply one)")
		}
	}
	if e.ControlPlane != "" {
		check(yamldoc.Path{"controlPlane"}, &Variant{})
	}
	for i := range e.Variants {
		if e.Variants[i].ControlPlane != "" {
			check(yamldoc.Path{"variants", i, "controlPlane"}, &e.Variants[i])
		}
	}
}

// errList collects validation errors: fielderr's one shape, "file:line: path: reason".
type errList struct {
	file string
	errs fielderr.List
}

func (l *errList) add(line int, path, format string, args ...any) {
	l.errs = append(l.errs, fielderr.New(l.file, line, path, format, args...))
}

func (l *errList) err() error { return l.errs.Err() }

// SimTiming returns the sim engine's timing: the experiment's, on top of sim.DefaultTiming.
func (e *Experiment) SimTiming() (sim.Timing, error) {
	t := sim.DefaultTiming
	if e.Sim == nil {
		return t, nil
	}
	var errs []error
	for _, f := range []struct {
		name, v string
		dst     *float64
	}{{"cycle", e.Sim.Cycle, &t.CycleSec}, {"podStart", e.Sim.PodStart, &t.PodStartSec}} {
		if f.v == "" {
			continue
		}
		d, err := time.ParseDuration(f.v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s: want a duration ≥ 0 such as 10ms, got %q", f.name, f.v))
			continue
		}
		*f.dst = d.Seconds()
	}
	return t, errors.Join(errs...)
}
