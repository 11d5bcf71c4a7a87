package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/internal/yamldoc"
	"github.com/kueuelab/kueuelab/model/fielderr"
)

// APIVersion and Kind head a control-plane file.
const (
	APIVersion = "kueuelab.io/v1alpha1"
	Kind       = "ControlPlane"
)

// NoneName is --control-plane none: no model, Kueue infinitely fast.
const NoneName = "none"

// DefaultName is the built-in model, Default's name.
const DefaultName = "kueue"

// Default is the built-in model. Its rate limit is Kueue's Configuration's (an input, never
// fitted). A cycle computes for 10 ms, the sim's decision-only cycle, measured on the local
// cluster; its growth with the heads it tries is not fitted yet (0). A write is seen 2 ms after
// its token: Kueue's harness metrics have no request-latency histogram to fit it from, and its
// baseline replays alike between 2 and 30 ms, where the tokens dominate
// (docs/notes/wave3/issue-27.md).
func Default() Model {
	return Model{Name: DefaultName, WriteLatencySec: 0.002, CycleBaseSec: 0.010}
}

// file is a control-plane file as written.
type file struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	// ClientConnection is Kueue's client rate limit, when it is not the one Kueue's
	// Configuration gives (Kueue's scheduler-performance harness hard-codes 50/100).
	ClientConnection *struct {
		QPS   float64 `yaml:"qps"`
		Burst int     `yaml:"burst"`
	} `yaml:"clientConnection"`
	WriteLatency string `yaml:"writeLatency"`
	// JobWrites says whose client makes the job reconciler's Workload writes: "kueue" (the
	// default, as in a cluster) or "external" (Kueue's scheduler-performance harness: its runner
	// creates and finishes the Workloads).
	JobWrites string `yaml:"jobWrites"`
	Cycle     struct {
		Base    string `yaml:"base"`
		PerHead string `yaml:"perHead"`
	} `yaml:"cycle"`
}

// Resolve turns a --control-plane value into a model: "none" (nil: no model), "kueue" (Default)
// or a control-plane file's path.
func Resolve(v string) (*Model, error) {
	switch v {
	case NoneName:
		return nil, nil
	case DefaultName, "":
		m := Default()
		return &m, nil
	}
	m, err := Load(v)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Load reads a control-plane file; every problem is reported as "file:line: field: reason".
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("control plane: %w", err)
	}
	return Parse(path, data)
}

// Parse is Load on bytes already read; name is the file in errors.
func Parse(name string, data []byte) (*Model, error) {
	root, err := yamldoc.Root(name, "control-plane file", data)
	if err != nil {
		return nil, err
	}
	var errs fielderr.List
	add := func(p yamldoc.Path, format string, args ...any) {
		errs = append(errs, fielderr.New(name, yamldoc.Line(root, p), p.String(), format, args...))
	}
	if root.Kind != yaml.MappingNode {
		add(nil, "a control-plane file is a mapping (apiVersion, kind, metadata, clientConnection, writeLatency, jobWrites, cycle)")
		return nil, errs.Err()
	}
	yamldoc.UnknownFields(root, reflect.TypeOf(file{}), func(key *yaml.Node, p yamldoc.Path, known []string) {
		errs = append(errs, fielderr.New(name, key.Line, p.String(), "unknown field (known fields: %s)", strings.Join(known, ", ")))
	})
	if err := errs.Err(); err != nil {
		return nil, err
	}
	var f file
	if err := root.Decode(&f); err != nil {
		return nil, yamldoc.Errors(name, err)
	}
	if f.APIVersion != APIVersion {
		add(yamldoc.Path{"apiVersion"}, "%q, want %s", f.APIVersion, APIVersion)
	}
	if f.Kind != Kind {
		add(yamldoc.Path{"kind"}, "%q, want %s", f.Kind, Kind)
	}
	m := &Model{Name: f.Metadata.Name}
	if m.Name == "" {
		m.Name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	}
	if m.Name == NoneName || m.Name == DefaultName {
		add(yamldoc.Path{"metadata", "name"}, "%q names a built-in model; give the file's model another name", m.Name)
	}
	if c := f.ClientConnection; c != nil {
		if c.QPS <= 0 {
			add(yamldoc.Path{"clientConnection", "qps"}, "%g: a rate limit needs qps > 0", c.QPS)
		}
		if c.Burst < 1 {
			add(yamldoc.Path{"clientConnection", "burst"}, "%d: client-go's token bucket needs a burst of at least 1", c.Burst)
		}
		m.QPS, m.Burst = c.QPS, c.Burst
	}
	dur := func(p yamldoc.Path, s string, dst *float64) {
		if s == "" {
			add(p, "missing (a duration such as 5ms; 0s for none)")
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			add(p, "%q is not a duration ≥ 0 (such as 5ms)", s)
			return
		}
		*dst = d.Seconds()
	}
	switch f.JobWrites {
	case "", "kueue":
	case "external":
		m.ExternalJobWrites = true
	default:
		add(yamldoc.Path{"jobWrites"}, "%q: want kueue or external", f.JobWrites)
	}
	dur(yamldoc.Path{"writeLatency"}, f.WriteLatency, &m.WriteLatencySec)
	dur(yamldoc.Path{"cycle", "base"}, f.Cycle.Base, &m.CycleBaseSec)
	dur(yamldoc.Path{"cycle", "perHead"}, f.Cycle.PerHead, &m.CyclePerHeadSec)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
