package runner

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// controlPlanePoll is how often the run reads the supervisor's status: one small file read.
// The supervisor sees an exit at once; this bounds how long the clock may run on after it.
const controlPlanePoll = 100 * time.Millisecond

// crashLogLines is how much of a crash-looping component's log the run's error carries.
const crashLogLines = 20

// controlPlane follows the supervisor of kueuelab's local cluster through a run, the way a
// cluster's own monitoring would: while any component is down or not ready the control plane owes
// every step, so the trace clock holds (an outage costs wall time, never trace time); each restart
// and each outage is an event in events.jsonl and counted in the summary; a component that
// crash-loops ends the run, named, with the last lines of its log.
type controlPlane struct {
	read func() (supervisorStatus, error) // the supervisor's status now (readSupervisor)
	clk  *simclock.Clock
	log  *results.EventLog
	out  io.Writer

	fatal chan error // the crash loop that ends the run (buffered, sent once)

	mu         sync.Mutex
	down       []string
	restarts   map[string]int
	outages    int
	outageWall time.Duration
}

// supervisorStatus is what the run reads of the local cluster's supervisor: local.go reads it
// from the supervisor's status file (readSupervisor), so this file knows nothing of the local
// control plane's package.
type supervisorStatus struct {
	alive      bool              // the supervisor runs: it restarts a component that exits
	components []componentStatus // in start order
	// crashLoop names a crash-looping component, with the last lines of its log; nil when none.
	crashLoop error
}

// componentStatus is one supervised component.
type componentStatus struct {
	name, state string
	ready       bool
	restarts    int
	lastExit    string // how its last process ended; empty when none has
}

// newControlPlane follows the supervisor of the local cluster whose state dir is dir.
func newControlPlane(dir string, clk *simclock.Clock, log *results.EventLog, out io.Writer) *controlPlane {
	return &controlPlane{read: func() (supervisorStatus, error) { return readSupervisor(dir) },
		clk: clk, log: log, out: out, fatal: make(chan error, 1), restarts: map[string]int{}}
}

// run polls the supervisor's status until ctx ends.
func (cp *controlPlane) run(ctx context.Context) {
	key := simclock.Key{Kind: simclock.KindOutage, ID: "control-plane"}
	t := time.NewTicker(controlPlanePoll)
	defer t.Stop()
	var seen map[string]int // restarts per component when last read
	var downSince time.Time
	warned, failed := false, false
	for {
		var down []string
		h, err := cp.read()
		switch {
		case err != nil:
			down = []string{"supervisor status: " + err.Error()}
		default:
			if seen == nil {
				seen = map[string]int{}
				for _, c := range h.components {
					seen[c.name] = c.restarts
				}
			}
			for _, c := range h.components {
				if n := c.restarts - seen[c.name]; n > 0 {
					cp.restarted(c, n)
				}
				seen[c.name] = c.restarts
			}
			// A dead supervisor leaves the components running, unsupervised: nothing to wait
			// for, but the user must know nothing restarts them now.
			if !h.alive && !warned {
				warned = true
				fmt.Fprintf(cp.out, "control plane: the supervisor is not running, so no component will be restarted; `kueuelab cluster up` with this cluster's name starts one that adopts them\n")
			}
			for _, c := range h.components {
				if !c.ready {
					down = append(down, fmt.Sprintf("%s %s", c.name, c.state))
				}
			}
			if err := h.crashLoop; err != nil && !failed {
				failed = true
				cp.fatal <- err
			}
		}
		now := time.Now()
		switch {
		case len(down) > 0 && downSince.IsZero():
			downSince = now
			cp.clk.HoldFor(key, time.Hour)
			cp.event(results.EvControlPlaneDown, "", strings.Join(down, ", "))
			fmt.Fprintf(cp.out, "control plane: %s; the trace clock holds at %.0f s until it is ready\n", strings.Join(down, ", "), cp.clk.Now())
			cp.mu.Lock()
			cp.outages++
			cp.mu.Unlock()
		case len(down) == 0 && !downSince.IsZero():
			d := now.Sub(downSince)
			downSince = time.Time{}
			cp.clk.Release(key)
			cp.event(results.EvControlPlaneReady, "", fmt.Sprintf("ready after %s", d.Round(10*time.Millisecond)))
			fmt.Fprintf(cp.out, "control plane: ready again after %s of wall time\n", d.Round(10*time.Millisecond))
			cp.mu.Lock()
			cp.outageWall += d
			cp.mu.Unlock()
		}
		cp.mu.Lock()
		cp.down = down
		cp.mu.Unlock()
		select {
		case <-ctx.Done():
			if !downSince.IsZero() {
				cp.mu.Lock()
				cp.outageWall += time.Since(downSince)
				cp.mu.Unlock()
			}
			cp.clk.Release(key)
			return
		case <-t.C:
		}
	}
}

func (cp *controlPlane) restarted(c componentStatus, n int) {
	exit := ""
	if c.lastExit != "" {
		exit = "last exit: " + c.lastExit
	}
	for range n {
		cp.event(results.EvComponentRestarted, c.name, exit)
	}
	fmt.Fprintf(cp.out, "control plane: %s restarted by the supervisor (%d restarts in all; %s)\n", c.name, c.restarts, exit)
	cp.mu.Lock()
	cp.restarts[c.name] += n
	cp.mu.Unlock()
}

// event writes a control-plane event at the current trace time; a write error is kept by the
// log and surfaces at its Close, as for the watcher's events.
func (cp *controlPlane) event(t results.EventType, object, msg string) {
	_ = cp.log.Write(&results.Event{T: cp.clk.Now(), Type: t, Object: object, Message: msg})
}

// unhealthy is what was down or unready at the last read.
func (cp *controlPlane) unhealthy() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return slices.Clone(cp.down)
}

// meta fills the summary's control-plane counters.
func (cp *controlPlane) meta(m *results.Meta) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if len(cp.restarts) > 0 {
		m.Restarts = maps.Clone(cp.restarts)
	}
	m.Outages, m.OutageWallSec = cp.outages, cp.outageWall.Seconds()
}
