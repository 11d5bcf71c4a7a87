// Package controlplane is the control-plane model both engines apply in trace time: what Kueue's
// own speed costs the workloads it queues. Kueue's decisions are its own code's; the model adds
// what those decisions take to reach the cluster:
//   - Kueue's API client is rate limited by client-go's token bucket (golang.org/x/time/rate,
//     QPS and burst from Kueue's Configuration clientConnection), one bucket for its Workload
//     writes;
//   - a write is seen by every watcher (Kueue's own informer, the job controllers) one write
//     latency after its token;
//   - the scheduler's admission write runs in a goroutine of its own (the cycle goes on, the
//     quota is held by Kueue's cache meanwhile); its writes for the heads it could not admit and
//     for the preemptions it issues are made in the cycle, which ends when they have been
//     answered;
//   - a scheduling cycle computes for a time that grows with the heads it tries.
//
// With no model (None) both engines replay an infinitely fast control plane: writes are seen at
// once and a cycle takes the sim's fixed cycle time.
package controlplane

import (
	"errors"
	"fmt"
	"math"
)

// Model is a control-plane model's parameters, in seconds of trace time.
type Model struct {
	// Name says which model a run used, in its summary and report: the file's metadata.name.
	Name string `json:"name"`
	// QPS and Burst are Kueue's client rate limit. Zero QPS: the Kueue Configuration's
	// clientConnection (Kueue's own default when that is unset) decides; a negative QPS turns
	// client-side rate limiting off, as it does in client-go.
	QPS   float64 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// WriteLatencySec is one write's round trip, from its token to the answer, which is also
	// when watchers receive its event.
	WriteLatencySec float64 `json:"writeLatencySec"`
	// CycleBaseSec and CyclePerHeadSec are a scheduling cycle's computation: snapshot,
	// nomination and the admission checks, before its writes.
	CycleBaseSec    float64 `json:"cycleBaseSec"`
	CyclePerHeadSec float64 `json:"cyclePerHeadSec"`
	// HarnessJobs: the jobs are those of Kueue's scheduler-performance harness
	// (test/performance/scheduler): its generator creates the Workloads with a client of its
	// own, its runner's controller (one worker) finishes them and releases evicted ones, one
	// write at a time, and nothing writes PodsReady (the sim's stand-in pods report it at no
	// cost, so that waitForPodsReady does not evict long workloads the harness never has). Without it the job reconciler's writes are
	// Kueue's (jobframework, through Kueue's client), as in a cluster.
	HarnessJobs bool `json:"harnessJobs,omitempty"`
	// HarnessWriteSec is one write of the harness runner's worker, from asking to the answer
	// (HarnessJobs only).
	HarnessWriteSec float64 `json:"harnessWriteSec,omitempty"`
}

// CycleSec is the computation of a cycle that tries heads workloads (one per ClusterQueue with
// a head).
func (m *Model) CycleSec(heads int) float64 {
	return m.CycleBaseSec + m.CyclePerHeadSec*float64(heads)
}

// Check reports parameters no control plane can have.
func (m *Model) Check() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"writeLatency", m.WriteLatencySec}, {"cycle.base", m.CycleBaseSec}, {"cycle.perHead", m.CyclePerHeadSec}, {"harnessRunner.write", m.HarnessWriteSec}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("%s: %v is not a finite value ≥ 0", f.name, f.v))
		}
	}
	if math.IsNaN(m.QPS) || math.IsInf(m.QPS, 0) {
		errs = append(errs, fmt.Errorf("qps: %v is not finite", m.QPS))
	}
	if m.QPS > 0 && m.Burst < 1 {
		errs = append(errs, fmt.Errorf("burst: %d with qps %g: client-go's token bucket needs a burst of at least 1", m.Burst, m.QPS))
	}
	return errors.Join(errs...)
}

// WithClient returns m with Kueue's client rate limit when m does not set one.
func (m Model) WithClient(qps float64, burst int) Model {
	if m.QPS == 0 {
		m.QPS, m.Burst = qps, burst
	}
	return m
}

// Client is Kueue's API client in trace time. Its rate limit is client-go's token bucket
// (golang.org/x/time/rate, tokens granted in the order they are asked for), kept as the
// equivalent generic cell rate algorithm: the time the bucket's next token is due. The model asks
// for a writer's sequential writes ahead of time (each at the answer of the one before), so calls
// do not come in time order, which rate.Limiter does not allow (a call before its last one moves
// its clock back and credits the same tokens twice); in time order the two agree
// (TestClientIsClientGosBucket).
type Client struct {
	interval float64 // seconds per token; 0 without a rate limit
	slack    float64 // (burst - 1) intervals: how far ahead of its due time a token may go
	due      float64 // when the next token is due (−∞: the bucket is full)
	latency  float64
	writes   int64
	waited   float64
}

// NewClient is a client with m's rate limit, its bucket full, as client-go's is when Kueue starts.
func (m *Model) NewClient() (*Client, error) {
	switch {
	case m.QPS < 0:
		return &Client{latency: m.WriteLatencySec, due: math.Inf(-1)}, nil
	case m.QPS == 0 || m.Burst < 1:
		return nil, fmt.Errorf("control plane %s: the client needs a rate limit (qps %g, burst %d)", m.Name, m.QPS, m.Burst)
	}
	iv := 1 / m.QPS
	return &Client{interval: iv, slack: float64(m.Burst-1) * iv, due: math.Inf(-1), latency: m.WriteLatencySec}, nil
}

// Write is a write issued at trace time t: it gets the bucket's next token (tokens are granted in
// the order writes ask for them) and returns when it is answered and seen by watchers.
func (c *Client) Write(t float64) float64 {
	c.writes++
	if c.interval == 0 {
		return t + c.latency
	}
	granted := max(t, c.due-c.slack)
	c.due = max(c.due, t) + c.interval
	c.waited += granted - t
	return granted + c.latency
}

// Worker is a controller's single worker writing through a client without a rate limit of its
// own: a write waits for the one before it to be answered.
type Worker struct {
	free    float64
	latency float64
}

// NewWorker is the harness runner's worker: its writes take HarnessWriteSec.
func (m *Model) NewWorker() *Worker { return &Worker{latency: m.HarnessWriteSec} }

// Write is a write the worker is asked for at trace time t; it returns when it is answered.
func (w *Worker) Write(t float64) float64 {
	w.free = max(t, w.free) + w.latency
	return w.free
}

// Seen is a write of another client, issued at trace time t: seen one write latency later.
func (c *Client) Seen(t float64) float64 { return t + c.latency }

// Writes is the number of writes made and WaitedSec their total wait for tokens.
func (c *Client) Writes() (int64, float64) { return c.writes, c.waited }
