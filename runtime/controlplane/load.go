package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

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

// DefaultWriteLatencySec is the built-in model's write latency: 500 sequential PATCHes to the
// local cluster's kube-apiserver (v1.36.2, etcd v3.5.21) on an idle 2-core machine took 3.7, 4.1
// and 4.6 ms on average in three runs (go run ./hack/apilatency).
const DefaultWriteLatencySec = 0.004

// Default is the built-in model. Its rate limit is Kueue's Configuration's (an input, never
// fitted). A cycle computes for 0.66 ms + 0.096 ms per head, Kueue v0.19.2's snapshot and
// nomination fitted on its own harness's logs (hack/kueue-harness/fit.py, 3,560 cycles). A write is
// answered and seen DefaultWriteLatencySec after its token.
func Default() Model {
	return Model{Name: DefaultName, WriteLatencySec: DefaultWriteLatencySec, CycleBaseSec: 0.00066, CyclePerHeadSec: 0.000096}
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
	// JobWrites says who writes the jobs' part of the Workloads: "kueue" (the default: Kueue's
	// job reconcilers, through its client, as in a cluster) or "harness" (Kueue's
	// scheduler-performance harness: Model.HarnessJobs).
	JobWrites string `yaml:"jobWrites"`
	// HarnessRunner is the harness runner's controller (jobWrites: harness only): the time one
	// write of its single worker takes.
	HarnessRunner *struct {
		Write string `yaml:"write"`
	} `yaml:"harnessRunner"`
	Cycle struct {
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
	var f file
	root, err := yamldoc.Strict(name, "control-plane file", "apiVersion, kind, metadata, clientConnection, writeLatency, jobWrites, harnessRunner, cycle", data, &f)
	if err != nil {
		return nil, err
	}
	var errs fielderr.List
	add := func(p yamldoc.Path, format string, args ...any) {
		errs = append(errs, fielderr.New(name, yamldoc.Line(root, p), p.String(), format, args...))
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
	case "harness":
		m.HarnessJobs = true
	default:
		add(yamldoc.Path{"jobWrites"}, "%q: want kueue or harness", f.JobWrites)
	}
	switch {
	case f.HarnessRunner != nil && !m.HarnessJobs:
		add(yamldoc.Path{"harnessRunner"}, "only with jobWrites: harness")
	case m.HarnessJobs && f.HarnessRunner == nil:
		add(yamldoc.Path{"jobWrites"}, "jobWrites: harness needs harnessRunner.write (one write of the harness runner's worker, such as 22ms)")
	case m.HarnessJobs:
		dur(yamldoc.Path{"harnessRunner", "write"}, f.HarnessRunner.Write, &m.HarnessWriteSec)
	}
	dur(yamldoc.Path{"writeLatency"}, f.WriteLatency, &m.WriteLatencySec)
	dur(yamldoc.Path{"cycle", "base"}, f.Cycle.Base, &m.CycleBaseSec)
	dur(yamldoc.Path{"cycle", "perHead"}, f.Cycle.PerHead, &m.CyclePerHeadSec)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
