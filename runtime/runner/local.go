package runner

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// This file is the runner's only way to kueuelab's local control plane (runtime/localcluster): the
// local cluster's metrics readers and its supervisor's status. A run on another cluster goes
// through runtime/cluster alone.

// InProcess says how to build the parts of a run that share this process.
type InProcess struct {
	REST *rest.Config
	// Local is kueuelab's local cluster the run uses; nil for another cluster (no component
	// metrics to read: the clock settles on quiet periods instead).
	Local *localcluster.State
	// Prune lets the run delete the cluster-side objects of other specs (Config.Prune): for a
	// cluster the run has to itself.
	Prune bool
	// KueueMetrics and SchedulerMetrics, when set, read another cluster's components (e.g. through
	// a port-forward); Local's are used otherwise.
	KueueMetrics, SchedulerMetrics MetricsSource
	Spec                           *rcluster.Spec
	// Speedup caps trace seconds per wall second between events (max: the clock jumps).
	Speedup results.Speedup
	Seed    uint64
	// Timers are Kueue's waitForPodsReady settings, held for on a Kueue that keeps wall time.
	Timers KueueTimers
	// Kueue is the Kueue the run replays on, for the summary (nil: not recorded).
	Kueue *results.KueueMeta
	// ClockTrace, when set, is a file that receives the trace clock's hold log
	// (simclock.Options.Trace; hack/clocktrace.py summarises it).
	ClockTrace string
	// Clock tunes the trace clock (tests); Speedup above wins.
	Clock simclock.Options
}

// NewInProcess builds the event-driven trace clock, the agent that shares it and, on kueuelab's
// local cluster, the readers of Kueue's and kube-scheduler's metrics, into a Config that the
// caller completes (trace, output, timeouts). run, experiment run and the e2e tests all use it.
func NewInProcess(ctx context.Context, o InProcess) (Config, error) {
	var cfgClose []func() error
	if o.REST == nil || o.Spec == nil {
		return Config{}, fmt.Errorf("in-process run: rest config and cluster spec are required")
	}
	co := o.Clock
	co.MaxRate = float64(o.Speedup)
	if !(co.MaxRate > 0) || math.IsInf(co.MaxRate, 1) {
		co.MaxRate = 0
	}
	if path := o.ClockTrace; path != "" && co.Trace == nil {
		f, err := os.Create(path)
		if err != nil {
			return Config{}, fmt.Errorf("clock trace: %w", err)
		}
		co.Trace = bufio.NewWriterSize(f, 1<<20) // flushed and closed by the run (Config.closers)
		cfgClose = append(cfgClose, func() error { return errors.Join(co.Trace.(*bufio.Writer).Flush(), f.Close()) })
	}
	clk := simclock.New(co)
	cs, err := kubernetes.NewForConfig(o.REST)
	if err != nil {
		return Config{}, err
	}
	// The runner follows the pods of the spec's team namespaces; the agent hands their steps over.
	var nss []string
	for _, t := range o.Spec.Teams {
		nss = append(nss, t.Name)
	}
	handoff := func(p *corev1.Pod) bool {
		_, ok := p.Labels[contract.WorkloadLabel]
		return ok && slices.Contains(nss, p.Namespace)
	}
	// It simulates every pod of those namespaces, a user's own manifests too (by the contract's
	// defaults), and none of another run's on the same cluster.
	a, err := agent.InProcess(cs, clk, o.Seed, handoff, nss)
	if err != nil {
		return Config{}, err
	}
	cfg := Config{REST: o.REST, Spec: o.Spec, Clock: clk, Agent: a, KueueTimers: o.Timers, Kueue: o.Kueue, Seed: o.Seed, closers: cfgClose,
		KueueMetrics: o.KueueMetrics, SchedulerMetrics: o.SchedulerMetrics}
	if o.Local != nil && o.KueueMetrics == nil && o.SchedulerMetrics == nil {
		kr, sr, err := o.Local.MetricsReaders(ctx, o.REST)
		if err != nil {
			return Config{}, err
		}
		cfg.KueueMetrics = func(ctx context.Context) (io.ReadCloser, error) { return kr(ctx) }
		cfg.SchedulerMetrics = func(ctx context.Context) (io.ReadCloser, error) { return sr(ctx) }
	}
	cfg.Prune = o.Prune
	if o.Local != nil {
		cfg.ControlPlane, cfg.KueueClock = o.Local.Dir, o.Local.KueueClockPath()
	}
	return cfg, nil
}

// readSupervisor reads the status file of the local cluster whose state dir is dir, for the run's
// control-plane follower (controlplane.go).
func readSupervisor(dir string) (supervisorStatus, error) {
	h, err := localcluster.ReadHealth(dir)
	if err != nil {
		return supervisorStatus{}, err
	}
	st := supervisorStatus{alive: h.Supervisor.Alive, crashLoop: h.CrashLooping(dir, crashLogLines)}
	for _, c := range h.Components {
		cs := componentStatus{name: c.Name, state: string(c.State), ready: c.State == localcluster.StateReady, restarts: c.Restarts}
		if c.LastExit != nil {
			cs.lastExit = c.LastExit.String()
		}
		st.components = append(st.components, cs)
	}
	return st, nil
}
