package agent

import (
	"errors"
	"fmt"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	"github.com/kueuelab/kueuelab/render"
)

// Keys the agent reads (besides the render contract) and writes on pods and nodes.
const (
	// CompleteAnnotation carries the agent's verdict to the KWOK completion stages: "true" or "fail".
	CompleteAnnotation = "kueuelab.io/complete"
	// ProgressAnnotation holds a Progress as JSON, rewritten every checkpoint interval.
	ProgressAnnotation = "kueuelab.io/progress"
	// EnergyAnnotation is the pod's energy in joules of trace time, written at completion.
	EnergyAnnotation = "kueuelab.io/energy-joules"
	// RunTraceSecAnnotation is how long the pod ran, in trace seconds, written at completion.
	RunTraceSecAnnotation = "kueuelab.io/run-trace-sec"
	// FinishedAtAnnotation is the wall-clock time (RFC 3339, ns) of the completion write.
	FinishedAtAnnotation = "kueuelab.io/finished-at"
	// InjectFailureAnnotation makes a pod fail: "true" when its work is done, or a fraction in
	// (0, 1) to fail once that share of the work is done.
	InjectFailureAnnotation = "kueuelab.io/inject-failure"
	// PowerCapKey is the default node label or annotation (annotation wins) holding a GPU power
	// cap: a catalog profile ("eco", "performance"), a percentage of max ("70%") or watts ("450W").
	PowerCapKey = "kueuelab.io/power-cap"
	// GPUFamilyLabel names the node's catalog GPU family; without it the vendor product label is mapped.
	GPUFamilyLabel = "kueuelab.io/gpu-family"
	// CPUModelAnnotation names the node's catalog CPU model.
	CPUModelAnnotation = "kueuelab.io/cpu-model"
)

// Completion modes: the KWOK stage reacting to CompleteAnnotation, or a direct pods/status write.
const (
	CompleteViaStage  = "stage"
	CompleteViaStatus = "status"
)

// Config configures an Agent; the zero value of every field but Speedup means its default.
type Config struct {
	// Speedup is trace seconds per wall second (required, > 0).
	Speedup float64
	// TickInterval is the wall time between ticks (default 200ms).
	TickInterval time.Duration
	// PodSelector is a label selector for the pods to simulate; "" is every pod on a simulated
	// node: rendered ones by their contract, others (a user's own manifests) by the contract's
	// defaults for unrendered pods (render/contract.Unrendered).
	PodSelector string
	// Namespace, when set, limits the pods simulated to one namespace.
	Namespace string
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
	// PowerCapKey is the node label/annotation holding the GPU power cap (default PowerCapKey).
	PowerCapKey string
	// WriteQPS and WriteBurst bound the agent's pod writes (default 50 and 100).
	WriteQPS   float64
	WriteBurst int
	// WriteWorkers is the number of concurrent writers per queue (default 4).
	WriteWorkers int
	// MetricsAddr, when set, serves /metrics there (e.g. 127.0.0.1:9090).
	MetricsAddr string
	// Clock drives ticks and timestamps (default the real clock); tests inject a fake one.
	Clock clock.WithTicker
	// TraceNow, when set, is the trace clock the agent advances its pods by, shared with an
	// in-process runner whose clock slows to real time while the control plane owes a
	// transition (runtime/simclock); when nil trace time is wall time × Speedup.
	TraceNow func() float64
}

// TickFor is a tick interval for speedup: at most 5 trace seconds a tick, so a pod's completion
// is written within 5 trace seconds of its end whatever the speedup, between 10 ms and 200 ms
// of wall time.
func TickFor(speedup float64) time.Duration {
	d := time.Duration(5 / speedup * float64(time.Second))
	return min(200*time.Millisecond, max(10*time.Millisecond, d))
}

func (c *Config) setDefaults() error {
	var errs []error
	if !(c.Speedup > 0) || math.IsInf(c.Speedup, 0) {
		errs = append(errs, fmt.Errorf("speedup: must be a positive number, got %g", c.Speedup))
	}
	if c.TickInterval == 0 {
		c.TickInterval = 200 * time.Millisecond
	}
	if c.TickInterval < 0 {
		errs = append(errs, fmt.Errorf("tick interval: must be > 0, got %s", c.TickInterval))
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
		c.PowerCapKey = PowerCapKey
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
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return errors.Join(errs...)
}
