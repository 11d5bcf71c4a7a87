// Package fault says which faults a replay injects and when: explicit events ("at 36h node
// h100-003 fails for 2h") and random faults drawn from mean times between failures per GPU-hour
// and per node-hour, seeded, with the defaults of the hardware catalog (model/hw). A Schedule
// turns a Spec and the cluster's nodes into fault events in trace-time order; it is pure
// arithmetic, so the same seed and nodes give the same faults in every run and every variant.
// It also holds the checkpoint arithmetic a sweep compares with: Young/Daly's optimal interval.
package fault

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Spec is the faults section of a run, an experiment or a scenario.
type Spec struct {
	// Seed drives the random faults (0: 1).
	Seed uint64 `yaml:"seed,omitempty"`
	// Events are explicit faults.
	Events []EventSpec `yaml:"events,omitempty"`
	// Random draws faults at the catalog's rates (or those given here).
	Random *Random `yaml:"random,omitempty"`
	// EvictAfter is how long the pods of a NotReady node stay bound to it, stopped, before they
	// are evicted (default 5m: the tolerationSeconds that Kubernetes' DefaultTolerationSeconds
	// admission gives every pod for node.kubernetes.io/not-ready and unreachable). A node back
	// sooner loses its pods when it returns: a rebooted node's containers are gone.
	EvictAfter Duration `yaml:"evictAfter,omitempty"`
	// ExitCode is the exit code of a failed pod's container (default 137: killed, which
	// training-operator's ExitCode restart policy retries; 1-127 it does not).
	ExitCode int32 `yaml:"exitCode,omitempty"`
}

// EventSpec is one explicit fault: a node failure (node, for), a GPU failure (node, gpu) or a
// pod failure (workload, role).
type EventSpec struct {
	At Duration `yaml:"at"`
	// Node fails (NotReady) for For, or with GPU set, its GPU of that index fails.
	Node string   `yaml:"node,omitempty"`
	For  Duration `yaml:"for,omitempty"`
	GPU  *int     `yaml:"gpu,omitempty"`
	// Workload (a trace workload id) loses one running pod, of Role when set.
	Workload string `yaml:"workload,omitempty"`
	Role     string `yaml:"role,omitempty"`
}

// Random are random faults: Poisson processes per GPU and per node.
type Random struct {
	// GPUMTBFHours is the GPU-hours between GPU faults of one GPU (0: the catalog's).
	GPUMTBFHours float64 `yaml:"gpuMTBFHours,omitempty"`
	// NodeMTBFHours is the node-hours between node faults of one node (0: the catalog's).
	NodeMTBFHours float64 `yaml:"nodeMTBFHours,omitempty"`
	// Repair is how long a failed node stays NotReady (0: the catalog's).
	Repair Duration `yaml:"repair,omitempty"`
	// Scale multiplies both rates (0: 1), to study failure rates other than the catalog's.
	Scale float64 `yaml:"scale,omitempty"`
	// Pools limits the faults to these node pools (default: every pool).
	Pools []string `yaml:"pools,omitempty"`
	// GPUOnly, when set, draws no node faults; NodeOnly no GPU faults.
	GPUOnly  bool `yaml:"gpuOnly,omitempty"`
	NodeOnly bool `yaml:"nodeOnly,omitempty"`
}

// Defaults of Spec.
const (
	DefaultEvictAfter = 300.0
	DefaultExitCode   = 137
)

// Duration is a trace-time duration in seconds, written in YAML as a Go duration ("36h",
// "90m", "1h30m") or a number of seconds.
type Duration float64

// UnmarshalYAML reads a Go duration or a number of seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		// A TypeError, as yaml.v3 reports a wrong type: the strict loaders print its lines as file:line.
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d Duration) String() string {
	s := float64(d)
	switch {
	case s != 0 && math.Mod(s, 3600) == 0:
		return strconv.FormatFloat(s/3600, 'f', -1, 64) + "h"
	case s != 0 && math.Mod(s, 60) == 0:
		return strconv.FormatFloat(s/60, 'f', -1, 64) + "m"
	default:
		return strconv.FormatFloat(s, 'f', -1, 64) + "s"
	}
}

// ParseDuration reads "36h", "90m", "1h30m" or "5400" (seconds); it must not be negative.
func ParseDuration(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("duration %q: must be a finite number of seconds >= 0", s)
		}
		return v, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q: want a Go duration such as 36h or 90m, or seconds", s)
	}
	return d.Seconds(), nil
}

// Problem is one thing wrong with a Spec: the field's path below the spec and why.
type Problem struct {
	Path []any // keys and indexes, as internal/yamldoc.Path
	Msg  string
}

// Check reports what is wrong with s: each Problem names the field.
func (s *Spec) Check() []Problem {
	var out []Problem
	bad := func(msg string, path ...any) { out = append(out, Problem{Path: path, Msg: msg}) }
	if s.ExitCode < 0 || s.ExitCode > 255 {
		bad(fmt.Sprintf("must be in [1, 255], got %d", s.ExitCode), "exitCode")
	}
	for i, e := range s.Events {
		node, pod := e.Node != "", e.Workload != ""
		switch {
		case node == pod:
			bad("give node (a node fault, or with gpu a GPU fault) or workload (a pod fault)", "events", i)
		case pod && (e.For > 0 || e.GPU != nil):
			bad("a pod fault (workload) takes no for or gpu", "events", i)
		case node && e.Role != "":
			bad("role goes with workload, not node", "events", i, "role")
		case node && e.GPU != nil && e.For > 0:
			bad("a GPU fault fails a pod and takes no for", "events", i, "for")
		case e.GPU != nil && *e.GPU < 0:
			bad(fmt.Sprintf("must be >= 0, got %d", *e.GPU), "events", i, "gpu")
		}
	}
	if r := s.Random; r != nil {
		for _, f := range []struct {
			name string
			v    float64
		}{{"gpuMTBFHours", r.GPUMTBFHours}, {"nodeMTBFHours", r.NodeMTBFHours}, {"scale", r.Scale}} {
			if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				bad(fmt.Sprintf("must be a finite number >= 0, got %g", f.v), "random", f.name)
			}
		}
		if r.GPUOnly && r.NodeOnly {
			bad("gpuOnly and nodeOnly exclude each other", "random")
		}
	}
	return out
}

// Err is Check as one error, each problem as "faults.path: reason".
func (s *Spec) Err() error {
	var errs []error
	for _, p := range s.Check() {
		errs = append(errs, fmt.Errorf("%s: %s", PathString(append([]any{"faults"}, p.Path...)), p.Msg))
	}
	return errors.Join(errs...)
}

// PathString prints a path as a.b[0].c.
func PathString(p []any) string {
	var b strings.Builder
	for _, s := range p {
		switch v := s.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}

// Empty reports whether s injects nothing.
func (s *Spec) Empty() bool { return s == nil || (len(s.Events) == 0 && s.Random == nil) }

// evictAfter and exitCode apply the defaults.
func (s *Spec) evictAfter() float64 {
	if s.EvictAfter > 0 {
		return float64(s.EvictAfter)
	}
	return DefaultEvictAfter
}

// EvictAfterSec is EvictAfter with its default.
func (s *Spec) EvictAfterSec() float64 { return s.evictAfter() }

// ExitCodeOrDefault is ExitCode with its default.
func (s *Spec) ExitCodeOrDefault() int32 {
	if s.ExitCode > 0 {
		return s.ExitCode
	}
	return DefaultExitCode
}
