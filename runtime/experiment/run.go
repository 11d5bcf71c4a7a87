package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/internal/atomicfile"
	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
	"github.com/kueuelab/kueuelab/runtime/sim"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
	"github.com/kueuelab/kueuelab/runtime/simver"
)

// Files Run writes in the output directory.
const (
	// ManifestFile (experiment.json) lists the variants in order, the baseline and the repeats.
	ManifestFile = "experiment.json"
	// DoneFile marks a finished variant/repeat directory; it holds a DoneMarker.
	DoneFile = "done"
	// SpecFile is each variant's patched cluster spec (<out>/<variant>/cluster.yaml).
	SpecFile = "cluster.yaml"
)

// Manifest is experiment.json: what `kueuelab report` needs to compare the variants.
type Manifest struct {
	Name     string   `json:"name"`
	File     string   `json:"file"`
	Baseline string   `json:"baseline"`
	Variants []string `json:"variants"`
	Repeats  int      `json:"repeats"`
}

// DoneMarker is the content of a done file.
type DoneMarker struct {
	Variant    string          `json:"variant"`
	Repeat     int             `json:"repeat"`
	Seed       uint64          `json:"seed"`
	TraceSeed  uint64          `json:"traceSeed,omitempty"`
	Trace      string          `json:"trace"`
	WallSec    float64         `json:"wallSec"`
	FinishedAt time.Time       `json:"finishedAt"`
	Summary    results.Summary `json:"summary"`
}

// LocalCluster says where the fresh local clusters run.
type LocalCluster struct {
	Root     string // state root (default: the kueuelab state dir)
	Name     string // cluster name (default "experiment"); any cluster of that name is replaced
	BinDir   string // control-plane binaries (default: the tools cache)
	PortBase int
	Go       string
}

// slotPortStride separates the port blocks of the clusters of parallel runs: a cluster uses
// fewer than 100 consecutive ports.
const slotPortStride = 100

// slot is the local cluster of parallel run slot i: its own name (so its own state dir) and its
// own block of ports. Slot 0 of a sequential experiment keeps the configured name and ports.
func (l LocalCluster) slot(i, parallel int) LocalCluster {
	if l.Name == "" {
		l.Name = "experiment"
	}
	if parallel <= 1 {
		return l
	}
	base := l.PortBase
	if base == 0 {
		base = localcluster.PortBaseFor(l.Name)
	}
	l.Name = fmt.Sprintf("%s-%d", l.Name, i)
	l.PortBase = base + i*slotPortStride
	return l
}

// Options configure Run.
type Options struct {
	OutDir string
	// Repeats overrides the experiment's repeats when > 0.
	Repeats int
	// Parallel runs that many variant × repeat runs at once, each on its own local cluster
	// (names <name>-<i>, port blocks 100 apart); 0 or 1: one after another. Not with REST.
	Parallel int
	// InProcess runs every sim job in this process: it is the process a job on another Kueue
	// release is sent to (executeThroughRelease).
	InProcess bool
	// Index, when set, runs only run number *Index of the experiment: variant Index ÷ repeats,
	// repeat Index mod repeats (one completion index of `experiment render-job`'s Indexed Job).
	Index *int
	// REST, when set, runs every variant on that cluster, reset between runs, instead of on a
	// fresh local cluster each.
	REST *rest.Config
	// State, with REST, is that cluster's state when it is kueuelab's local cluster (its component
	// metrics then settle the trace clock exactly).
	State *localcluster.State
	// KueueMetrics, SchedulerMetrics and Timers, with REST and no State, are that cluster's Kueue
	// and kube-scheduler metrics and Kueue's wall-time timers (runner.InProcess).
	KueueMetrics, SchedulerMetrics runner.MetricsSource
	Timers                         runner.KueueTimers
	// Kueue, with REST and no State, is that cluster's Kueue for the summaries.
	Kueue *results.KueueMeta
	// AgentInCluster, with REST, uses the cluster's agent Deployment (charts/kueuelab-agent)
	// instead of the in-process agent: the trace clock then runs on wall time at the experiment's
	// speedup, which must be a number.
	AgentInCluster bool
	// ReconfigureKueue, with REST, lets variants that set kueueConfig run on that cluster: it is
	// called before every run with the run's Kueue configuration fields (empty for a variant
	// without kueueConfig) and returns once Kueue runs with them. On kueuelab's local cluster
	// localcluster.Up with KueueConfig does that: it restarts a Kueue whose configuration changed.
	ReconfigureKueue func(ctx context.Context, fields map[string]any) error
	Local            LocalCluster
	// Out receives the progress lines; Log the detail (cluster up/down, run summaries).
	Out io.Writer
	Log io.Writer

	// exec replaces the real run (tests).
	exec func(ctx context.Context, r *job) (*replay.Result, error)
	// resetObjs are what a reset deletes (REST only).
	resetObjs []client.Object
}

// Outcome is what Run did.
type Outcome struct {
	Manifest Manifest
	Ran      int // runs executed now
	Skipped  int // runs a previous invocation finished
}

// job is one variant × repeat.
type job struct {
	exp      *Experiment
	variant  *Variant
	vi, rep  int
	repeats  int
	spec     *cluster.Spec
	dir      string
	seed     uint64
	trace    *trace.Trace
	traceRef string
	slot     int // the parallel slot running it
}

func (j *job) label() string {
	return fmt.Sprintf("variant %d/%d (%s) repeat %d/%d", j.vi+1, len(j.exp.Variants), j.variant.Name, j.rep+1, j.repeats)
}

// Runs is the number of variant × repeat runs of e (the completions of its Indexed Job).
func (e *Experiment) Runs(repeats int) int {
	if repeats <= 0 {
		repeats = e.Repeats
	}
	return len(e.Variants) * repeats
}

// Run executes every variant × repeat of e not already done in o.OutDir: <out>/<variant>/r<k>/
// holds the results of repeat k and, once it finished, a done marker. Every variant's cluster
// spec is built and checked before anything runs. Run number i (Options.Index) is variant
// i ÷ repeats, repeat i mod repeats.
func Run(ctx context.Context, e *Experiment, o Options) (*Outcome, error) {
	if o.OutDir == "" {
		return nil, errors.New("experiment: no output directory")
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Parallel > 1 && o.REST != nil {
		return nil, errors.New("experiment: parallel runs need a local cluster each; with a kubeconfig the runs share its cluster one after another")
	}
	repeats := e.Repeats
	if o.Repeats > 0 {
		repeats = o.Repeats
	}
	if o.Index != nil && (*o.Index < 0 || *o.Index >= len(e.Variants)*repeats) {
		return nil, fmt.Errorf("experiment %s: run index %d: want 0..%d (%d variants × %d repeats)", e.file, *o.Index, len(e.Variants)*repeats-1, len(e.Variants), repeats)
	}
	if err := o.checkGates(e); err != nil {
		return nil, err
	}
	specs := make([]*cluster.Spec, len(e.Variants))
	var errs []error
	// Refused before anything is written, as each run would be (execute).
	if err := replay.Check(e.Engine, &replay.Inputs{Asks: o.asks()}); err != nil {
		return nil, fmt.Errorf("%s: %w", e.file, err)
	}
	for i := range e.Variants {
		v := &e.Variants[i]
		if o.REST != nil && o.ReconfigureKueue == nil && !v.KueueConfig.Empty() {
			errs = append(errs, fmt.Errorf("%s:%d: variant %s: kueueConfig needs a fresh local cluster: the cluster behind --kubeconfig keeps its own Kueue configuration", e.file, v.line, v.Name))
			continue
		}
		s, doc, err := e.Spec(v)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if o.REST != nil && s.Scheduler != nil {
			errs = append(errs, fmt.Errorf("%s:%d: variant %s: a scheduler section needs a fresh local cluster: the cluster behind --kubeconfig keeps its own kube-scheduler configuration", e.file, v.line, v.Name))
			continue
		}
		specs[i] = s
		// Every run of a sharded experiment writes every variant's spec (the same bytes, through
		// a temp file of its own), so the tree is complete whichever runs are done.
		dir := filepath.Join(o.OutDir, v.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := atomicfile.Write(filepath.Join(dir, SpecFile), doc); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	out := &Outcome{Manifest: Manifest{Name: e.Metadata.Name, File: e.file, Baseline: e.BaselineName(), Repeats: repeats}}
	for _, v := range e.Variants {
		out.Manifest.Variants = append(out.Manifest.Variants, v.Name)
	}
	if err := writeJSON(filepath.Join(o.OutDir, ManifestFile), out.Manifest); err != nil {
		return nil, err
	}
	exec := o.exec
	if exec == nil {
		exec = o.execute
	}
	if o.REST != nil && o.exec == nil {
		objs, err := clusterObjects(specs)
		if err != nil {
			return nil, err
		}
		o.resetObjs = objs
		defer func() {
			if err := reset(context.Background(), o.REST, objs, o.State != nil, o.Log); err != nil {
				fmt.Fprintf(o.Out, "experiment: final reset: %v\n", err)
			}
		}()
	}
	traces := &traceCache{e: e, dir: filepath.Join(o.OutDir, "traces"), loaded: map[int]*trace.Trace{}, refs: map[int]string{}}
	var todo []*job
	for i := range e.Variants {
		for k := 0; k < repeats; k++ {
			if o.Index != nil && *o.Index != i*repeats+k {
				continue
			}
			j := &job{exp: e, variant: &e.Variants[i], vi: i, rep: k, repeats: repeats, spec: specs[i],
				dir: filepath.Join(o.OutDir, e.Variants[i].Name, "r"+strconv.Itoa(k)), seed: e.Seed + uint64(k)}
			if m, ok := ReadDone(j.dir); ok {
				fmt.Fprintf(o.Out, "%s: done earlier (%s), skipped\n", j.label(), m.FinishedAt.Format(time.RFC3339))
				out.Skipped++
				continue
			}
			todo = append(todo, j)
		}
	}
	ran, err := runJobs(ctx, todo, max(1, o.Parallel), func(ctx context.Context, j *job) error {
		return o.runOne(ctx, j, traces, exec)
	})
	out.Ran = ran
	return out, err
}

// runJobs runs the jobs, parallel at a time, each with a slot number no running job shares. After
// the first failure no new job starts; the running ones finish. It returns how many succeeded and
// every failure.
func runJobs(ctx context.Context, jobs []*job, parallel int, run func(context.Context, *job) error) (int, error) {
	slots := make(chan int, parallel)
	for i := range parallel {
		slots <- i
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		done int
	)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return len(errs) > 0 }
	for _, j := range jobs {
		var slot int
		select {
		case slot = <-slots:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("experiment interrupted before %s; rerun to resume: %w", j.label(), ctx.Err()))
			mu.Unlock()
			break
		}
		if failed() {
			slots <- slot
			break
		}
		j.slot = slot
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := run(ctx, j)
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				done++
			}
			mu.Unlock()
			slots <- slot
		}()
	}
	wg.Wait()
	return done, errors.Join(errs...)
}

// runOne runs one job and writes its done marker.
func (o *Options) runOne(ctx context.Context, j *job, traces *traceCache, exec func(context.Context, *job) (*replay.Result, error)) error {
	var err error
	if j.trace, j.traceRef, err = traces.get(ctx, j.rep); err != nil {
		return err
	}
	// A directory without a done marker is a run that was cut short: start it over.
	if err := os.RemoveAll(j.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s: starting (%d workloads, seed %d)\n", j.label(), len(j.trace.Workloads), j.seed)
	t0 := time.Now()
	res, err := exec(ctx, j)
	timedOut := errors.Is(err, replay.ErrIncomplete) && ctx.Err() == nil && res != nil &&
		strings.HasPrefix(res.Summary.Incomplete, "timeout")
	if err != nil && !timedOut {
		return fmt.Errorf("%s: %w (rerun the experiment to resume)", j.label(), err)
	}
	// A run that hit the timeout is a result (its unfinished workloads are counted); an
	// interrupted one is not and reruns next time.
	m := DoneMarker{Variant: j.variant.Name, Repeat: j.rep, Seed: j.seed, Trace: j.traceRef,
		WallSec: time.Since(t0).Seconds(), FinishedAt: time.Now().UTC(), Summary: res.Summary}
	if g := j.exp.Generator; g != nil {
		m.TraceSeed = g.Seed + uint64(j.rep)
	}
	if err := writeJSON(filepath.Join(j.dir, DoneFile), m); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "%s: done in %s, %s\n", j.label(), time.Since(t0).Round(time.Second), brief(&res.Summary))
	return nil
}

// brief is a one-line summary of a run.
func brief(s *results.Summary) string {
	for _, g := range s.Groups {
		if g.Scope == "all" {
			tta := "-"
			if g.TimeToAdmissionSec.P50 != nil {
				tta = strconv.FormatFloat(*g.TimeToAdmissionSec.P50, 'f', 0, 64) + "s"
			}
			line := fmt.Sprintf("%d/%d finished, time-to-admission p50 %s, %.1f kWh", g.Succeeded+g.Failed, g.Workloads, tta, g.EnergyKWh)
			if s.Incomplete != "" {
				line += " (INCOMPLETE: " + s.Incomplete + ")"
			}
			return line
		}
	}
	return "no workloads"
}

// ReadDone reads the done marker of a variant/repeat directory; ok is false when there is none
// or it does not parse (the run is then redone).
func ReadDone(dir string) (*DoneMarker, bool) {
	b, err := os.ReadFile(filepath.Join(dir, DoneFile))
	if err != nil {
		return nil, false
	}
	var m DoneMarker
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, false
	}
	return &m, true
}

// writeJSON writes v atomically, so a crash never leaves half a marker.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'))
}

// execute runs one job through its engine: the variant's workloads and faults are the inputs, its
// spec and Kueue configuration the engine's.
func (o *Options) execute(ctx context.Context, j *job) (*replay.Result, error) {
	e := j.exp
	in := replay.Inputs{Trace: j.variant.Workloads.Apply(j.trace), TraceName: j.traceRef, Spec: j.spec, Seed: j.seed,
		Faults: e.FaultsOf(j.variant), Asks: o.asks(), OutDir: j.dir, Timeout: e.timeout,
		Progress: &prefixWriter{w: o.Out, prefix: j.label() + ": "}, Out: &prefixWriter{w: o.Log, prefix: j.label() + ": "}}
	var eng replay.Engine
	if e.Engine == results.EngineSim {
		v, err := e.KueueVersionOf(j.variant)
		if err != nil {
			return nil, err
		}
		if !o.InProcess && v.Name != kueuelib.KueueVersion {
			return o.executeThroughRelease(ctx, j, v)
		}
		se, err := simEngine(j)
		if err != nil {
			return nil, err
		}
		eng = se
	} else {
		ce, done, err := o.clusterEngine(ctx, j)
		if err != nil {
			return nil, err
		}
		defer done()
		eng = ce
	}
	return replay.Run(ctx, eng, in)
}

// executeThroughRelease runs one sim job in the kueuelab binary linking release v (built on
// first use, runtime/simver): that binary runs this experiment's run number alone (--in-process),
// into the same directory, as an index of the experiment's Indexed Job does, and its done marker
// is the result.
func (o *Options) executeThroughRelease(ctx context.Context, j *job, v kueuever.Version) (*replay.Result, error) {
	bin, err := simver.Binary(ctx, v, &prefixWriter{w: o.Out, prefix: j.label() + ": "})
	if err != nil {
		return nil, err
	}
	args := []string{"experiment", "run", j.exp.file, "--out", o.OutDir, "--in-process",
		"--index", strconv.Itoa(j.vi*j.repeats + j.rep), "--repeats", strconv.Itoa(j.repeats)}
	var stderr bytes.Buffer
	log := &prefixWriter{w: o.Log, prefix: j.label() + " (Kueue " + v.Name + "): "}
	if err := simver.Run(ctx, bin, args, log, io.MultiWriter(log, &stderr)); err != nil {
		return nil, fmt.Errorf("sim for Kueue %s: %w: %s", v.Name, err, bytes.TrimSpace(stderr.Bytes()))
	}
	m, ok := ReadDone(j.dir)
	if !ok {
		return nil, fmt.Errorf("sim for Kueue %s ended without a done marker in %s", v.Name, j.dir)
	}
	return &replay.Result{Summary: m.Summary}, nil
}

// checkGates refuses sim runs at once in this process with different Kueue feature gates: the
// gates are process-wide (variants on another release run in processes of their own).
func (o *Options) checkGates(e *Experiment) error {
	if e.Engine != results.EngineSim || o.Parallel <= 1 {
		return nil
	}
	var first *Variant
	for i := range e.Variants {
		v := &e.Variants[i]
		if rel, err := e.KueueVersionOf(v); err != nil || (rel.Name != kueuelib.KueueVersion && !o.InProcess) {
			continue
		}
		if first == nil {
			first = v
		} else if !maps.Equal(first.KueueConfig.OwnGates(), v.KueueConfig.OwnGates()) {
			return fmt.Errorf("%s: variants %s and %s set different Kueue feature gates, which are process-wide: run them with --parallel 1", e.file, first.Name, v.Name)
		}
	}
	return nil
}

// asks are the capabilities the options ask of the experiment's engine.
func (o *Options) asks() []replay.Capability {
	if o.REST != nil {
		return []replay.Capability{replay.RemoteCluster}
	}
	return nil
}

// clusterEngine readies the cluster of one job: a fresh local cluster with the variant's Kueue
// configuration and Kueue's defaults in trace time (taken down by done), or the REST cluster,
// reset.
func (o *Options) clusterEngine(ctx context.Context, j *job) (eng *runner.Engine, done func(), err error) {
	e := j.exp
	log := &prefixWriter{w: o.Log, prefix: j.label() + ": "}
	kc := j.variant.KueueConfig
	if o.REST == nil || o.ReconfigureKueue != nil {
		kc = kc.WithKueueDefaults(kueuever.MustLookup(kueuever.Default)) // a Kueue kueuelab configures
	}
	done = func() {}
	rc, state := o.REST, o.State
	if rc == nil {
		l := o.Local.slot(j.slot, o.Parallel)
		objs, err := j.spec.Objects(cluster.Options{})
		if err != nil {
			return nil, nil, err
		}
		if err := downIfPresent(ctx, l, log); err != nil {
			return nil, nil, err
		}
		fields, err := j.spec.WithKueueResources(kc.Fields())
		if err != nil {
			return nil, nil, err
		}
		cl, err := localcluster.Up(ctx, localcluster.Options{Root: l.Root, Name: l.Name, BinDir: l.BinDir, PortBase: l.PortBase, Go: l.Go,
			Objects: objs, KueueConfig: fields, Scheduler: j.spec.KubeSchedulerConfiguration(), Out: log})
		done = func() {
			if err := localcluster.Down(context.Background(), l.Root, l.Name, true, log); err != nil {
				fmt.Fprintf(o.Out, "%s: cluster down: %v\n", j.label(), err)
			}
		}
		if err != nil {
			done()
			return nil, nil, fmt.Errorf("cluster up: %w", err)
		}
		rc, state = cl.Config, cl.State
	} else {
		// Before the reset, which then clears whatever reconfiguring applied (a local cluster's
		// Up applies its default nodes).
		if o.ReconfigureKueue != nil {
			if err := o.ReconfigureKueue(ctx, kc.Fields()); err != nil {
				return nil, nil, fmt.Errorf("variant %s: reconfigure Kueue: %w", j.variant.Name, err)
			}
		}
		if err := reset(ctx, rc, o.resetObjs, o.State != nil, log); err != nil {
			return nil, nil, err
		}
	}
	eng = &runner.Engine{Cluster: runner.InProcess{REST: rc, Local: state, Speedup: e.Speedup, Timers: kc.Timers()},
		AgentInCluster: o.REST != nil && o.AgentInCluster}
	if o.REST == nil || o.ReconfigureKueue != nil {
		eng.Cluster.Kueue = kc.Meta()
	}
	if o.REST != nil && o.State == nil {
		eng.Cluster.KueueMetrics, eng.Cluster.SchedulerMetrics, eng.Cluster.Timers, eng.Cluster.Kueue = o.KueueMetrics, o.SchedulerMetrics, o.Timers, o.Kueue
	}
	return eng, done, nil
}

// simEngine is the sim engine of one job: the variant's Kueue configuration (its durations in
// trace time) and the experiment's timing.
func simEngine(j *job) (*sim.Engine, error) {
	kc, err := sim.KueueConfigFromFields(j.variant.KueueConfig.WithKueueDefaults(kueuever.MustLookup(kueuelib.KueueVersion)).Fields())
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", j.variant.Name, err)
	}
	tm, err := j.exp.SimTiming()
	if err != nil {
		return nil, err
	}
	cp, err := j.exp.ControlPlaneOf(j.variant)
	if err != nil {
		return nil, fmt.Errorf("variant %s: %w", j.variant.Name, err)
	}
	return &sim.Engine{Kueue: kc, Timing: tm, ControlPlane: cp}, nil
}

// downIfPresent stops and purges a leftover cluster of the experiment's name, so every run
// starts on a fresh one (a running Kueue would keep its old configuration).
func downIfPresent(ctx context.Context, l LocalCluster, log io.Writer) error {
	root := l.Root
	if root == "" {
		r, err := localcluster.StateRoot()
		if err != nil {
			return err
		}
		root = r
	}
	if _, err := os.Stat(filepath.Join(root, l.Name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := localcluster.Down(ctx, root, l.Name, true, log); err != nil {
		return fmt.Errorf("remove the leftover cluster %s: %w", l.Name, err)
	}
	return nil
}

// traceCache gives each repeat its trace: the experiment's trace file, or one generated with
// seed + repeat and kept in <out>/traces so a resumed experiment replays the same workloads.
type traceCache struct {
	e      *Experiment
	dir    string
	mu     sync.Mutex // parallel runs share the cache
	loaded map[int]*trace.Trace
	refs   map[int]string
}

func (c *traceCache) get(ctx context.Context, rep int) (*trace.Trace, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := rep
	if c.e.Generator == nil {
		key = 0
	}
	if t, ok := c.loaded[key]; ok {
		return t, c.refs[key], nil
	}
	path := c.e.path(c.e.Trace)
	if g := c.e.Generator; g != nil {
		path = filepath.Join(c.dir, fmt.Sprintf("seed-%d.jsonl", g.Seed+uint64(rep)))
		if _, err := os.Stat(path); err != nil {
			if err := c.generate(ctx, path, g.Seed+uint64(rep)); err != nil {
				return nil, "", err
			}
		}
	}
	t, err := trace.LoadWorkloads(ctx, path, trace.Options{})
	if err != nil {
		return nil, "", err
	}
	c.loaded[key], c.refs[key] = t, path
	return t, path, nil
}

func (c *traceCache) generate(ctx context.Context, path string, seed uint64) error {
	g := c.e.Generator
	p, err := gen.DefaultProfile()
	name := gen.DefaultProfileName
	if g.Profile != "" {
		name = c.e.path(g.Profile)
		p, _, err = gen.LoadProfile(name)
	}
	if err != nil {
		return fmt.Errorf("%s: generator: %w", c.e.file, err)
	}
	g.Overrides.apply(p)
	if err := p.Validate(name + " with the overrides of " + c.e.file); err != nil {
		return err
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	// A temp file of its own: the runs of a sharded experiment may generate the same trace at once.
	f, err := os.CreateTemp(c.dir, "."+filepath.Base(path)+".*.jsonl")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	fw, err := trace.Create(tmp)
	if err != nil {
		return err
	}
	_, genErr := gen.Write(ctx, fw.Writer, gen.New(p, seed), gen.Options{Workloads: g.Jobs, EmitWorkloadRecords: true})
	if err := errors.Join(genErr, fw.Close()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("generate %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

func (ov *Overrides) apply(p *gen.Profile) {
	if ov == nil {
		return
	}
	for _, o := range []struct{ dst, src *float64 }{
		{&p.Arrival.MeanInterArrivalSec, ov.MeanInterArrivalSec},
		{&p.GPURatio, ov.GPURatio},
		{&p.Intent.PerformanceRatio, ov.PerfRatio},
		{&p.Intent.EcoRatio, ov.EcoRatio},
		{&p.Arrival.Burst.DayProbability, ov.BurstDayProbability},
		{&p.Arrival.Burst.Multiplier, ov.BurstMultiplier},
		{&p.Arrival.Burst.MeanJobs, ov.BurstMeanJobs},
		{&p.Work.CPURatePerCore, ov.CPUWorkRatePerCore},
		{&p.Work.GPURatePerGPU, ov.GPUWorkRatePerGPU},
	} {
		if o.src != nil {
			*o.dst = *o.src
		}
	}
}

// prefixWriter prefixes every line written to it (one progress view across variants).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i]); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
}
