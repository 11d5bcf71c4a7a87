package agent

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// Completion modes: the KWOK stage reacting to contract.Complete, or a direct pods/status write.
const (
	CompleteViaStage  = "stage"
	CompleteViaStatus = "status"
)

// Config configures an Agent; the zero value of every field but Trace means its default.
type Config struct {
	// Trace is the trace clock, the agent's only source of trace time: it advances its pods to
	// the clock's time and arms its next pod completion on it (required). An agent in the same
	// process as the runner shares the runner's event-driven clock; an agent on its own (the Helm
	// chart's Deployment) runs a clock without holds at a fixed speedup (simclock.Options.Disabled).
	Trace *simclock.Clock
	// Handoff, when set, reports whether a runner sharing the clock follows the pod's steps: the
	// agent then holds the clock from its completion write until the runner sees the pod end.
	// The agent acknowledges the runner's start and deletion holds (simclock.Ack) for every pod.
	Handoff func(*corev1.Pod) bool
	// PodSelector is a label selector for the pods to simulate; "" is every pod on a simulated
	// node: rendered ones by their contract, others (a user's own manifests) by the contract's
	// defaults for unrendered pods (render/contract.Unrendered).
	PodSelector string
	// Namespaces, when set, limits the pods simulated to these namespaces (a runner's team
	// namespaces, so that runs sharing a cluster never drive each other's pods).
	Namespaces []string
	// ServicePods are label selectors of pods that serve until their owner deletes them (a Ray
	// cluster's head and workers): when their work is done the agent writes their energy and run
	// time but does not end them. Default: those of every kind in render's registry.
	ServicePods []string
	// NodeSelector is a label selector for the simulated nodes (default "type=kwok").
	NodeSelector string
	// CheckpointInterval is the wall time between progress writes (default 10s); a restarted agent
	// loses at most this much progress.
	CheckpointInterval time.Duration
	// FailureRate is the probability in [0, 1] that a pod fails, at a fraction of its work drawn
	// from a generator seeded by Seed and the pod's name, so reruns fail the same pods.
	FailureRate float64
	Seed        uint64
	// GangBlockedAfter is the trace time a gang may wait for members before it is reported
	// (default 600 trace seconds).
	GangBlockedAfter float64
	// CompleteVia is CompleteViaStatus (default, measured faster) or CompleteViaStage.
	CompleteVia string
	// PowerCapKey is the node label/annotation holding the GPU power cap (default contract.PowerCap).
	PowerCapKey string
	// WriteQPS and WriteBurst bound the agent's pod writes (default 50 and 100).
	WriteQPS   float64
	WriteBurst int
	// WriteWorkers is the number of concurrent writers per queue (default 4).
	WriteWorkers int
	// MetricsAddr, when set, serves /metrics there (e.g. 127.0.0.1:9090).
	MetricsAddr string
	// Wall is the wall clock of progress writes and timestamps (default the real clock).
	Wall clock.WithTicker
}

func (c *Config) setDefaults() error {
	var errs []error
	if c.Trace == nil {
		errs = append(errs, errors.New("trace clock: required"))
	}
	if c.NodeSelector == "" {
		c.NodeSelector = "type=kwok"
	}
	if c.ServicePods == nil {
		c.ServicePods = render.DefaultRegistry().ServicePods()
	}
	for _, s := range []struct{ name, sel string }{{"pod selector", c.PodSelector}, {"node selector", c.NodeSelector}} {
		if _, err := labels.Parse(s.sel); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", s.name, s.sel, err))
		}
	}
	for _, sel := range c.ServicePods {
		if _, err := labels.Parse(sel); err != nil || sel == "" {
			errs = append(errs, fmt.Errorf("service pod selector %q: %v", sel, err))
		}
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = 10 * time.Second
	}
	if c.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("checkpoint interval: must be > 0, got %s", c.CheckpointInterval))
	}
	if c.FailureRate < 0 || c.FailureRate > 1 || math.IsNaN(c.FailureRate) {
		errs = append(errs, fmt.Errorf("failure rate: must be in [0, 1], got %g", c.FailureRate))
	}
	if c.GangBlockedAfter == 0 {
		c.GangBlockedAfter = 600
	}
	if c.GangBlockedAfter < 0 {
		errs = append(errs, fmt.Errorf("gang blocked after: must be >= 0 trace seconds, got %g", c.GangBlockedAfter))
	}
	switch c.CompleteVia {
	case "":
		c.CompleteVia = CompleteViaStatus
	case CompleteViaStage, CompleteViaStatus:
	default:
		errs = append(errs, fmt.Errorf("complete via: want %q or %q, got %q", CompleteViaStage, CompleteViaStatus, c.CompleteVia))
	}
	if c.PowerCapKey == "" {
		c.PowerCapKey = contract.PowerCap
	}
	if c.WriteQPS == 0 {
		c.WriteQPS = 50
	}
	if c.WriteBurst == 0 {
		c.WriteBurst = 100
	}
	if c.WriteQPS < 0 || c.WriteBurst < 0 {
		errs = append(errs, fmt.Errorf("write qps/burst: must be > 0, got %g/%d", c.WriteQPS, c.WriteBurst))
	}
	if c.WriteWorkers == 0 {
		c.WriteWorkers = 4
	}
	if c.WriteWorkers < 0 {
		errs = append(errs, fmt.Errorf("write workers: must be > 0, got %d", c.WriteWorkers))
	}
	if c.Wall == nil {
		c.Wall = clock.RealClock{}
	}
	return errors.Join(errs...)
}
