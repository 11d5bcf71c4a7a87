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

	"github.com/kueuelab/kueuelab/runtime/localcluster"
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
	dir string // the cluster's state dir (status.json, logs/)
	clk *simclock.Clock
	log *results.EventLog
	out io.Writer

	fatal chan error // the crash loop that ends the run (buffered, sent once)

	mu         sync.Mutex
	down       []string
	restarts   map[string]int
	outages    int
	outageWall time.Duration
}

func newControlPlane(dir string, clk *simclock.Clock, log *results.EventLog, out io.Writer) *controlPlane {
	return &controlPlane{dir: dir, clk: clk, log: log, out: out, fatal: make(chan error, 1), restarts: map[string]int{}}
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
		h, err := localcluster.ReadHealth(cp.dir)
		switch {
		case err != nil:
			down = []string{"supervisor status: " + err.Error()}
		default:
			if seen == nil {
				seen = map[string]int{}
				for _, c := range h.Components {
					seen[c.Name] = c.Restarts
				}
			}
			for _, c := range h.Components {
				if n := c.Restarts - seen[c.Name]; n > 0 {
					cp.restarted(c, n)
				}
				seen[c.Name] = c.Restarts
			}
			// A dead supervisor leaves the components running, unsupervised: nothing to wait
			// for, but the user must know nothing restarts them now.
			if !h.Supervisor.Alive && !warned {
				warned = true
				fmt.Fprintf(cp.out, "control plane: the supervisor is not running, so no component will be restarted; `kueuelab cluster up` with this cluster's name starts one that adopts them\n")
			}
			for _, c := range h.NotReady() {
				down = append(down, fmt.Sprintf("%s %s", c.Name, c.State))
			}
			if err := h.CrashLooping(cp.dir, crashLogLines); err != nil && !failed {
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

func (cp *controlPlane) restarted(c localcluster.ComponentHealth, n int) {
	exit := ""
	if c.LastExit != nil {
		exit = "last exit: " + c.LastExit.String()
	}
	for range n {
		cp.event(results.EvComponentRestarted, c.Name, exit)
	}
	fmt.Fprintf(cp.out, "control plane: %s restarted by the supervisor (%d restarts in all; %s)\n", c.Name, c.Restarts, exit)
	cp.mu.Lock()
	cp.restarts[c.Name] += n
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
