package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// Engine is the cluster engine behind replay.Engine: the cluster side of a run (where, which
// metrics settle the trace clock, which agent drives the pods) and the runner's own limits; the
// trace, spec and outputs come with the replay's inputs.
type Engine struct {
	// Cluster is the cluster the run uses and how its trace clock is built; its Spec and Seed are
	// the inputs'.
	Cluster InProcess
	// AgentInCluster relies on the cluster's agent Deployment (charts/kueuelab-agent) instead of
	// an agent in this process: the trace clock then runs on wall time at Cluster.Speedup, which
	// must be a number.
	AgentInCluster bool
	// StallTimeout, Keep, QPS and UntilSec are Config's (UntilSec implies Keep).
	StallTimeout time.Duration
	Keep         bool
	QPS          float64
	UntilSec     float64
}

// errWallClockSpeedup is the error of an in-cluster agent with an unbounded speedup.
var errWallClockSpeedup = errors.New("the cluster's agent (--agent in-cluster) runs on wall time: the speedup needs a number (e.g. 100)")

// Name is the cluster engine's.
func (e *Engine) Name() results.Engine { return results.EngineCluster }

// Replay runs the inputs on the engine's cluster.
func (e *Engine) Replay(ctx context.Context, in replay.Inputs) (*replay.Result, error) {
	cfg, err := e.config(ctx, in)
	if err != nil {
		return nil, err
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Trace != nil {
		fmt.Fprintf(cfg.Out, "replaying %d workloads, speedup %s\n", len(cfg.Trace.Workloads), e.Cluster.Speedup)
	}
	res, err := Run(ctx, cfg)
	if res == nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Out, "submitted %d workloads over %.1fs wall; setup %.1fs\n", res.Submitted, res.SubmitWallSec, res.SetupSec)
	return &replay.Result{Summary: res.Summary}, err
}

// config builds the run's Config from the inputs and the engine's cluster side: the one place a
// cluster run is put together.
func (e *Engine) config(ctx context.Context, in replay.Inputs) (Config, error) {
	tr := in.Trace
	if tr == nil && in.TracePath != "" {
		var err error
		if tr, err = trace.LoadWorkloads(ctx, in.TracePath, trace.Options{}); err != nil {
			return Config{}, err
		}
	}
	name := in.TraceName
	if name == "" {
		name = in.TracePath
	}
	side := e.Cluster
	side.Spec, side.Seed = in.Spec, in.Seed
	var cfg Config
	if e.AgentInCluster {
		if side.Speedup.Max() {
			return Config{}, errWallClockSpeedup
		}
		cfg = Config{REST: side.REST, Spec: side.Spec, Seed: side.Seed, Prune: side.Prune,
			Clock: simclock.New(simclock.Options{Disabled: true, MaxRate: float64(side.Speedup)})}
	} else {
		var err error
		if cfg, err = NewInProcess(ctx, side); err != nil {
			return Config{}, err
		}
	}
	cfg.Trace, cfg.TraceName, cfg.Mapping, cfg.Faults = tr, name, in.Mapping, in.Faults
	cfg.Timeout, cfg.StallTimeout, cfg.OutDir, cfg.Keep, cfg.QPS = in.Timeout, e.StallTimeout, in.OutDir, e.Keep || e.UntilSec > 0, e.QPS
	cfg.UntilSec = e.UntilSec
	cfg.Progress, cfg.TTY, cfg.Out = in.Progress, in.TTY, in.Out
	return cfg, nil
}
