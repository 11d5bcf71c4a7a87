// Package render turns a logical workload of a trace into the Kubernetes objects an expert would
// write for it (MPIJob, PyTorchJob, JobSet, TrainJob, TFJob, Katib Experiment, RayJob, batch/v1
// Job), queued through Kueue and carrying the agent's contract (package contract) on every pod
// template. Each kind is one Integration, in one kind_*.go file, holding every fact about it;
// a Mapping picks the kind per family.
package render

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"text/template"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
	"github.com/kueuelab/kueuelab/render/contract"
)

// Target says where the objects will run.
type Target string

// Targets.
const (
	// TargetKWOK runs pods on fake KWOK nodes: a pause image, the agent decides completion.
	TargetKWOK Target = "kwok"
	// TargetReal runs pods on real nodes: a small image sleeps for the workload's duration ÷ speedup.
	TargetReal Target = "real"
)

// Defaults for Options.
const (
	KWOKImage        = "registry.k8s.io/pause:3.10"
	DefaultRealImage = "busybox:1.36"
	// DefaultCommandTemplate is the shell command a real-target container runs.
	DefaultCommandTemplate = `sleep {{printf "%.3f" .SleepSec}}`
)

// Options are the choices that do not depend on the cluster spec.
type Options struct {
	// Target is kwok (default) or real.
	Target Target
	// Speedup compresses time on a real target: containers sleep duration ÷ Speedup (default 1).
	Speedup float64
	// Image is the container image on a real target (default busybox:1.36).
	Image string
	// Command renders the shell command of a real-target container from a CommandData (nil: the default).
	Command *template.Template
	// Rates convert durations to work units when the trace has no job records (zero: work.DefaultRates).
	Rates work.Rates
	// Warn receives what render leaves out of a workload and why (a trace's node-affinity hint on a
	// label no node carries). A Renderer passes each distinct message on once. Nil discards them.
	Warn func(msg string)
}

// CommandData is what a command template sees.
type CommandData struct {
	// DurationSec is the workload's ideal duration in trace seconds.
	DurationSec float64
	Speedup     float64
	// SleepSec is DurationSec ÷ Speedup: the wall-clock seconds the container should run.
	SleepSec float64
	Role     string
}

// ParseCommandTemplate parses a --command-template value (a Go text/template over CommandData).
func ParseCommandTemplate(s string) (*template.Template, error) {
	t, err := template.New("command").Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("command template: %w", err)
	}
	return t, nil
}

// withDefaults fills the zero fields of o and checks the rest.
func (o Options) withDefaults() (Options, error) {
	switch o.Target {
	case "":
		o.Target = TargetKWOK
	case TargetKWOK, TargetReal:
	default:
		return o, fmt.Errorf("target %q: want kwok or real", o.Target)
	}
	if o.Speedup == 0 {
		o.Speedup = 1
	}
	if !(o.Speedup > 0) {
		return o, fmt.Errorf("speedup %g: must be > 0", o.Speedup)
	}
	if o.Image == "" {
		o.Image = DefaultRealImage
	}
	if o.Command == nil {
		t, err := ParseCommandTemplate(DefaultCommandTemplate)
		if err != nil {
			return o, err
		}
		o.Command = t
	}
	if o.Rates == (work.Rates{}) {
		o.Rates = work.DefaultRates()
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	return o, nil
}

// onceEach wraps warn so that each distinct message reaches it once, one call at a time: a
// Renderer renders on several goroutines.
func onceEach(warn func(string)) func(string) {
	var mu sync.Mutex
	seen := map[string]bool{}
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[msg] {
			seen[msg] = true
			warn(msg)
		}
	}
}

// Kind renders workloads of some families as one upstream kind; its Integration holds the
// kind's other facts.
type Kind interface {
	// Name is the kind's name in mapping files ("MPIJob", "JobSet", ...).
	Name() string
	// Families lists the families the kind can render.
	Families() []trace.Family
	// Render builds the objects of w. jobs are w's job records (nil for a workload-only trace).
	Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error)
}

// Registry holds the integrations by kind name.
type Registry struct {
	kinds map[string]Kind
	order []Integration
}

// NewRegistry registers integrations; two with one kind name are an error.
func NewRegistry(ins ...Integration) (*Registry, error) {
	r := &Registry{kinds: make(map[string]Kind, len(ins))}
	for _, in := range ins {
		if in.Kind == nil {
			return nil, fmt.Errorf("integration of %s has no Kind", in.GVK)
		}
		if _, dup := r.kinds[in.Name()]; dup {
			return nil, fmt.Errorf("kind %s registered twice", in.Name())
		}
		r.kinds[in.Name()] = in.Kind
		r.order = append(r.order, in)
	}
	return r, nil
}

// DefaultRegistry returns a registry of every built-in kind.
func DefaultRegistry() *Registry {
	r, err := NewRegistry(DefaultIntegrations()...)
	if err != nil {
		panic(err) // the built-in names are distinct; a duplicate is a programming error
	}
	return r
}

// Kind returns the kind named name.
func (r *Registry) Kind(name string) (Kind, bool) {
	k, ok := r.kinds[name]
	return k, ok
}

// Names returns the registered kind names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.kinds))
	for n := range r.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Supports reports whether kind name can render family f.
func (r *Registry) Supports(name string, f trace.Family) bool {
	k, ok := r.kinds[name]
	return ok && slices.Contains(k.Families(), f)
}

// Renderer renders workloads with one registry, mapping and set of options.
type Renderer struct {
	reg     *Registry
	mapping Mapping
	opts    Options
}

// NewRenderer checks the mapping against the registry and fills the options' defaults.
func NewRenderer(reg *Registry, m Mapping, o Options) (*Renderer, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	o.Warn = onceEach(o.Warn)
	for _, f := range trace.Families {
		name, ok := m[f]
		if !ok {
			return nil, fmt.Errorf("mapping: no kind for family %s", f)
		}
		if !reg.Supports(name, f) {
			return nil, fmt.Errorf("mapping: kind %s cannot render family %s", name, f)
		}
	}
	return &Renderer{reg: reg, mapping: m, opts: o}, nil
}

// Options returns the options with their defaults filled in.
func (r *Renderer) Options() Options { return r.opts }

// KindFor returns the kind that renders family f.
func (r *Renderer) KindFor(f trace.Family) (Kind, error) {
	name, ok := r.mapping[f]
	if !ok {
		return nil, fmt.Errorf("unknown family %q", f)
	}
	k, _ := r.reg.Kind(name)
	return k, nil
}

// onDevices resolves what w's pods ask for to the devices p places them on: MIG slices of
// p.MIGProfile, and a share of a GPU on a slice of it or, without one, on a whole GPU; every
// distinct rounding of a share is reported through Options.Warn.
func (r *Renderer) onDevices(w *trace.Workload, jobs []*trace.Job, p Placement) (*trace.Workload, []*trace.Job) {
	if r.opts.Warn != nil {
		for _, g := range w.Pods {
			f := g.Requests.GPUFraction()
			switch {
			case f == 0:
			case p.MIGProfile != "":
				r.opts.Warn(fmt.Sprintf("a pod's share %g of a GPU runs on one %s slice", f, trace.MIGResource(p.MIGProfile)))
			case p.GPUNodeSelector[contract.GPUSharing] == contract.SharingTimeSlicing:
				r.opts.Warn(fmt.Sprintf("a pod's share %g of a GPU runs on one replica of a time-sliced %s", f, trace.ResourceGPU))
			default:
				r.opts.Warn(fmt.Sprintf("a pod's share %g of a GPU runs on a whole %s (its ClusterQueue has no MIG slice quota that holds it)", f, trace.ResourceGPU))
			}
		}
	}
	return OnDevices(w, jobs, p)
}

// OnDevices returns w and its job records as their pods run at p: on MIG slices of p.MIGProfile
// where p names one, a share of a GPU on a whole GPU where it does not; w and jobs are returned
// unchanged when nothing moves, never changed in place.
func OnDevices(w *trace.Workload, jobs []*trace.Job, p Placement) (*trace.Workload, []*trace.Job) {
	switch {
	case p.MIGProfile != "":
		return OnSlices(w, jobs, p.MIGProfile)
	case w.GPUFractionPods() > 0:
		return OnWholeGPUs(w, jobs)
	}
	return w, jobs
}

// Render builds the objects of one workload placed at p.
func (r *Renderer) Render(w *trace.Workload, jobs []*trace.Job, p Placement) ([]client.Object, error) {
	k, err := r.KindFor(w.WorkloadType)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", w.WorkloadID, err)
	}
	w, jobs = r.onDevices(w, jobs, p)
	objs, err := k.Render(w, jobs, p, r.opts)
	if err != nil {
		return nil, fmt.Errorf("render %s as %s: %w", w.WorkloadID, k.Name(), err)
	}
	if claims := migClaimTemplates(w, p); len(claims) > 0 {
		// Before the object Kueue queues: Kueue reads the templates when it sizes the Workload.
		objs = append(claims, objs...)
	}
	return objs, nil
}
