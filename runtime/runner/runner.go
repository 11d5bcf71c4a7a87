// Package runner replays a trace on a cluster: it applies the cluster side of a spec, submits each
// workload's rendered objects at its submit time ÷ speedup, plays Katib's part for HPO
// experiments, watches Kueue Workloads and pods, and records every workload's life in results.
package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// AgentLabel selects the agent Deployment the Helm chart installs.
const AgentLabel = "app.kubernetes.io/name=kueuelab-agent"

// Agent is the simulation agent run in-process next to the runner (runtime/agent.Agent).
type Agent interface {
	Run(ctx context.Context) error
}

// Config is one run.
type Config struct {
	REST *rest.Config
	// Trace is the trace in memory; TraceName labels the results.
	Trace     *trace.Trace
	TraceName string
	Spec      *rcluster.Spec
	// Mapping picks the kind per family (nil: render.DefaultMapping).
	Mapping render.Mapping
	// Speedup is trace seconds per wall second (> 0).
	Speedup float64
	// Timeout bounds the run's wall time after setup (0: none).
	Timeout time.Duration
	// OutDir receives the results files (created if missing).
	OutDir string
	// Keep leaves the submitted objects on the cluster at the end.
	Keep bool
	// QPS and Burst bound the runner's create calls (defaults 50 and 100).
	QPS   float64
	Burst int
	// Seed drives the placer's GPU-family choice and Katib's parameter sampling.
	Seed int64
	// Agent, when set, runs in-process for the duration of the run; when nil the cluster must run
	// the agent Deployment of charts/kueuelab-agent (checked).
	Agent Agent
	// Clock is the trace clock, shared with an in-process Agent so that both see the same trace
	// time; the runner places holds on it while the control plane owes a transition. Nil: a
	// clock without holds at Speedup (the only choice with an agent in another process).
	Clock *simclock.Clock
	// NodePower reports the agent's node power in watts by node name (nil: the Agent's
	// NodePower method if it has one, else no power series).
	NodePower func() map[string]float64
	// SampleStep is the time series step in trace seconds (default: 60, raised so that a sample
	// is at most every 100 ms of wall time).
	SampleStep float64
	// Progress receives the progress display (nil: none); TTY selects the bar.
	Progress io.Writer
	TTY      bool
	// Out receives setup messages and the summary table (nil: discarded).
	Out io.Writer
}

// Result is what a run measured besides the results files.
type Result struct {
	Summary results.Summary
	// Submitted is the number of workloads created; SubmitWallSec the wall time from the first to
	// the last submission; MaxLagSec the worst delay of a submission behind its due time.
	Submitted     int
	SubmitWallSec float64
	MaxLagSec     float64
	// SetupSec is the wall time of applying the cluster side and syncing watches.
	SetupSec float64
}

// ErrIncomplete is wrapped by Run's error when the run stopped before every workload was terminal.
var ErrIncomplete = errors.New("run incomplete")

func (c *Config) check() error {
	var errs []error
	if c.REST == nil {
		errs = append(errs, errors.New("no rest config"))
	}
	if c.Trace == nil || len(c.Trace.Workloads) == 0 {
		errs = append(errs, errors.New("trace: no workloads"))
	}
	if c.Spec == nil {
		errs = append(errs, errors.New("no cluster spec"))
	}
	if !(c.Speedup > 0) || math.IsInf(c.Speedup, 0) {
		errs = append(errs, fmt.Errorf("speedup %g: must be a positive number", c.Speedup))
	}
	if c.OutDir == "" {
		errs = append(errs, errors.New("no output directory"))
	}
	if c.QPS == 0 {
		c.QPS = 50
	}
	if c.Burst == 0 {
		c.Burst = int(math.Max(1, 2*c.QPS))
	}
	if c.QPS < 0 || c.Burst < 0 {
		errs = append(errs, fmt.Errorf("qps %g / burst %d: must be > 0", c.QPS, c.Burst))
	}
	if c.Mapping == nil {
		c.Mapping = render.DefaultMapping()
	}
	if c.Clock != nil && c.Clock.HoldsEnabled() && c.Agent == nil {
		errs = append(errs, errors.New("clock: holds slow trace time for the in-process agent only; an agent in another process would not see them (use simclock.Options{Disabled: true})"))
	}
	if c.Clock != nil && c.Clock.Speedup() != c.Speedup {
		errs = append(errs, fmt.Errorf("clock: speedup %g differs from the run's %g", c.Clock.Speedup(), c.Speedup))
	}
	if c.SampleStep == 0 {
		c.SampleStep = math.Max(60, c.Speedup/10)
	}
	if c.SampleStep < 0 {
		errs = append(errs, fmt.Errorf("sample step %g: must be > 0", c.SampleStep))
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	return errors.Join(errs...)
}

// Run replays cfg.Trace. It returns the summary; the error wraps ErrIncomplete when the run
// ended (timeout, ctx cancelled) before every workload was terminal. Results files are written
// in every case where the run started.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	setupStart := time.Now()
	plan, err := newPlan(&cfg)
	if err != nil {
		return nil, err
	}
	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	rc := rest.CopyConfig(cfg.REST)
	rc.QPS, rc.Burst = float32(math.Max(100, 2*cfg.QPS)), int(math.Max(200, 4*cfg.QPS))
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("run: client: %w", err)
	}

	if n := len(plan.unrunnable); n > 0 {
		fmt.Fprintf(cfg.Out, "%d workloads cannot run on this cluster and stay unfinished, e.g. %s\n", n, plan.unrunnable[0])
	}
	fmt.Fprintf(cfg.Out, "applying cluster spec %s: %d objects\n", specName(cfg.Spec), len(plan.clusterObjs))
	if err := cluster.ApplyObjects(ctx, rc, plan.clusterObjs); err != nil {
		return nil, fmt.Errorf("run: apply cluster spec: %w", err)
	}
	if err := waitClusterQueuesActive(ctx, c, plan.queues, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}

	agentCtx, stopAgent := context.WithCancel(context.Background())
	var agentWG sync.WaitGroup
	agentErr := make(chan error, 1)
	defer func() {
		stopAgent()
		agentWG.Wait()
	}()
	if cfg.Agent != nil {
		agentWG.Add(1)
		go func() {
			defer agentWG.Done()
			if err := cfg.Agent.Run(agentCtx); err != nil {
				agentErr <- err
			}
		}()
	} else if err := checkAgentDeployment(ctx, c); err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}

	evlog, err := results.CreateEventLog(filepath.Join(cfg.OutDir, results.EventsFile), time.Second)
	if err != nil {
		return nil, err
	}
	rec, err := results.NewRecorder(plan.records, evlog)
	if err != nil {
		return nil, errors.Join(err, evlog.Close())
	}
	series, err := results.CreateSeries(filepath.Join(cfg.OutDir, results.TimeSeriesFile))
	if err != nil {
		return nil, errors.Join(err, evlog.Close())
	}

	if np, ok := cfg.Agent.(interface{ NodePower() map[string]float64 }); ok && cfg.NodePower == nil {
		cfg.NodePower = np.NodePower
	}
	clk := cfg.Clock
	if clk == nil {
		clk = simclock.New(cfg.Speedup, simclock.Options{Disabled: true})
	}
	sub := newSubmitter(c, plan, rec, clk, cfg.QPS, cfg.Burst, cfg.Seed)
	w := newWatcher(plan, rec, clk, sub.trials)
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	if cfg.Timeout > 0 {
		var cancelT context.CancelFunc
		runCtx, cancelT = context.WithTimeout(runCtx, cfg.Timeout)
		defer cancelT()
	}
	informers, err := w.start(runCtx, rc, scheme)
	if err != nil {
		return nil, errors.Join(err, evlog.Close(), series.Close())
	}
	res := &Result{SetupSec: time.Since(setupStart).Seconds()}
	clk.Start()

	var bg sync.WaitGroup
	bg.Add(2)
	go func() { defer bg.Done(); sub.run(runCtx) }()
	smp := &sampler{plan: plan, cache: informers, clk: clk, nodePower: cfg.NodePower, out: series, step: cfg.SampleStep}
	go func() { defer bg.Done(); smp.run(runCtx) }()

	var prog *results.Progress
	if cfg.Progress != nil {
		prog = results.NewProgress(cfg.Progress, len(plan.records), cfg.TTY, 10*time.Second)
	}
	incomplete := waitDone(runCtx, ctx, rec, prog, clk, agentErr, cfg.Timeout)
	cancelRun()
	bg.Wait()
	if prog != nil {
		prog.Done(results.Status{Counts: rec.Counts(), TraceSec: clk.Now()})
	}
	res.Submitted, res.SubmitWallSec, res.MaxLagSec = sub.stats()
	if n := len(plan.unrunnable); n > 0 && incomplete == "" {
		incomplete = fmt.Sprintf("%d workloads cannot run on this cluster (e.g. %s)", n, plan.unrunnable[0])
	}

	recordLostEnergy(cfg.Agent, plan, rec, clk.Now())
	recs := rec.Records()
	cs := clk.Stats()
	meta := results.Meta{Trace: cfg.TraceName, Cluster: specName(cfg.Spec), Speedup: cfg.Speedup, WallSec: clk.Wall().Seconds(),
		TraceSec: clk.Now(), GPUCapacity: plan.gpuCapacity, Incomplete: incomplete,
		HeldWallSec: cs.Held.Seconds(), Holds: cs.Placed, HoldsExpired: cs.ExpiredTotal()}
	if len(cs.ByKind) > 0 {
		meta.HeldByKindSec = make(map[string]float64, len(cs.ByKind))
		for k, d := range cs.ByKind {
			meta.HeldByKindSec[k] = d.Seconds()
		}
	}
	if cs.Placed > 0 {
		fmt.Fprintf(cfg.Out, "trace clock held at real time for %.1fs of %.1fs wall: %d holds while the control plane owed a step (%s), %d reached their limit %v\n",
			cs.Held.Seconds(), meta.WallSec, cs.Placed, byKind(cs.ByKind), cs.ExpiredTotal(), cs.Expired)
	}
	res.Summary = results.Summarize(recs, meta)
	// Quota held idle is computed from events.jsonl (as the sim engine's would be): flush it first.
	werr := evlog.Flush()
	if werr == nil {
		werr = results.AddReservedIdle(cfg.OutDir, recs, &res.Summary, clk.Now())
	}
	werr = errors.Join(werr, writeResults(cfg.OutDir, recs, &res.Summary))
	werr = errors.Join(werr, evlog.Close(), series.Close())
	if err := res.Summary.WriteTable(cfg.Out); err != nil {
		werr = errors.Join(werr, err)
	}
	fmt.Fprintf(cfg.Out, "results in %s\n", cfg.OutDir)

	if !cfg.Keep {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := cleanup(cctx, c, sub.created()); err != nil {
			werr = errors.Join(werr, fmt.Errorf("cleanup: %w", err))
		}
		cancel()
	}
	if werr != nil {
		return res, werr
	}
	if incomplete != "" {
		return res, fmt.Errorf("%w: %s", ErrIncomplete, incomplete)
	}
	return res, nil
}

// waitDone shows progress until every workload is terminal or the run must stop, and returns
// why the run is incomplete ("" when it is not).
func waitDone(runCtx, parent context.Context, rec *results.Recorder, prog *results.Progress, clk *simclock.Clock, agentErr <-chan error, timeout time.Duration) string {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if rec.Pending() == 0 {
			return ""
		}
		select {
		case err := <-agentErr:
			return describe(rec, "the agent stopped: "+err.Error())
		case <-runCtx.Done():
			why := "interrupted"
			if parent.Err() == nil && timeout > 0 {
				why = fmt.Sprintf("timeout %s reached", timeout)
			}
			return describe(rec, why)
		case <-t.C:
			if prog != nil {
				prog.Update(results.Status{Counts: rec.Counts(), TraceSec: clk.Now()})
			}
		}
	}
}

func describe(rec *results.Recorder, why string) string {
	c := rec.Counts()
	return fmt.Sprintf("%s: %d of %d workloads unfinished (%d never submitted, %d submitted but never admitted)",
		why, c.Total-c.Finished, c.Total, c.Total-c.Submitted, c.Submitted-c.Admitted)
}

func writeResults(dir string, recs []results.Record, s *results.Summary) error {
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
		write(results.WorkloadsFile, func(w io.Writer) error { return results.WriteWorkloadsCSV(w, recs) }),
		write(results.SummaryFile, s.WriteJSON),
	)
}

func specName(s *rcluster.Spec) string {
	if s.File() != "" {
		return s.File()
	}
	return s.Metadata.Name
}

// checkAgentDeployment looks for the chart's agent Deployment with a ready replica.
func checkAgentDeployment(ctx context.Context, c client.Client) error {
	var deps appsv1.DeploymentList
	sel, err := labelSelector(AgentLabel)
	if err != nil {
		return err
	}
	if err := c.List(ctx, &deps, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("look for the kueuelab agent Deployment (%s): %w", AgentLabel, err)
	}
	var found []string
	for _, d := range deps.Items {
		if d.Status.ReadyReplicas > 0 {
			return nil
		}
		found = append(found, d.Namespace+"/"+d.Name)
	}
	if len(found) > 0 {
		return fmt.Errorf("the kueuelab agent Deployment (%s) has no ready replica; pods would never finish", strings.Join(found, ", "))
	}
	return fmt.Errorf("no kueuelab agent on this cluster (no Deployment labelled %s): install charts/kueuelab-agent, or run without --kubeconfig to use the local cluster and the in-process agent", AgentLabel)
}

// kindOf names an object's kind (rendered objects carry their TypeMeta).
func kindOf(o runtime.Object) string { return o.GetObjectKind().GroupVersionKind().Kind }

// recordLostEnergy adds to each workload the energy of its pods deleted before they finished
// (evicted, preempted), which no pod's energy annotation reports, when the agent runs in-process
// and kept it. The agent keys it by pod namespace and the contract's workload id, which render
// sets to the trace's id verbatim on every pod template (trial Jobs copy it from the template).
func recordLostEnergy(a Agent, p *plan, rec *results.Recorder, now float64) {
	la, ok := a.(interface{ LostEnergy() map[string]float64 })
	if !ok {
		return
	}
	ids := make(map[string]string, len(p.items))
	for _, it := range p.items {
		ids[it.ns+"/"+it.id] = it.id
	}
	lost := la.LostEnergy()
	for _, k := range slices.Sorted(maps.Keys(lost)) { // sorted: events.jsonl is reproducible
		if id, ok := ids[k]; ok && lost[k] > 0 {
			// A log write error is kept by the log and surfaces at its Close, as for the watcher's events.
			_, _ = rec.Record(results.Event{T: now, Workload: id, Type: results.EvLostEnergy, EnergyJ: lost[k]})
		}
	}
}

// byKind formats the held time per hold kind, longest first.
func byKind(m map[string]time.Duration) string {
	kinds := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %.1fs", k, m[k].Seconds())
	}
	return strings.Join(parts, ", ")
}
