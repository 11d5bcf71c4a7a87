// Package simclock holds the trace clock of a replay: trace time runs at speedup × wall time,
// except while the control plane owes a transition.
//
// A real control plane takes wall time to turn a Job into a Kueue Workload, to start an admitted
// workload's pods and to finish a Workload whose pods are done (the Job controller alone batches
// pod updates for one second). On a real cluster that costs seconds; replayed at speedup S it
// would cost S times as many trace seconds, so a faster replay would report longer queue waits
// and completion times for the same trace. The runner therefore places a hold on the clock while
// it has seen a step begin and not yet seen it end; while any hold is active trace time runs at
// real time (1 trace second per wall second), which is what that latency costs on a real
// cluster. A hold that lasts longer than its limit stops counting, so a step that never ends (a
// pod no node can take) cannot stall the replay.
package simclock

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxHold bounds a hold unless Options.MaxHold says otherwise.
const DefaultMaxHold = 5 * time.Second

// Clock is a trace clock. All methods are safe for concurrent use.
type Clock struct {
	speedup  float64
	holdRate float64
	maxHold  time.Duration
	wallNow  func() time.Time

	mu       sync.Mutex
	t0       time.Time
	last     time.Time
	trace    float64
	holds    map[string]*hold
	active   int
	changed  chan struct{} // closed and replaced whenever active holds change
	heldWall time.Duration
	expired  map[string]int // by kind: the key up to its first '/'
	byKind   map[string]time.Duration
	placed   int
}

type hold struct {
	until   time.Time
	expired bool
}

// Options tune a Clock; the zero value is the default.
type Options struct {
	// MaxHold bounds every hold (default DefaultMaxHold of wall time).
	MaxHold time.Duration
	// Disabled makes Hold a no-op: trace time is always speedup × wall time. Used when the
	// agent is not in this process and so cannot share the clock.
	Disabled bool
	// Now is the wall clock (default time.Now); tests inject a fake one.
	Now func() time.Time
}

// New returns a clock that runs speedup trace seconds per wall second once started.
func New(speedup float64, o Options) *Clock {
	c := &Clock{speedup: speedup, holdRate: 1, maxHold: o.MaxHold, wallNow: o.Now, holds: map[string]*hold{},
		changed: make(chan struct{}), expired: map[string]int{}, byKind: map[string]time.Duration{}}
	if c.maxHold <= 0 {
		c.maxHold = DefaultMaxHold
	}
	if c.wallNow == nil {
		c.wallNow = time.Now
	}
	if o.Disabled {
		c.holds = nil
	}
	return c
}

// HoldsEnabled reports whether Hold has an effect (false with Options.Disabled).
func (c *Clock) HoldsEnabled() bool { return c.holds != nil }

// Speedup is the clock's trace seconds per wall second without holds.
func (c *Clock) Speedup() float64 { return c.speedup }

// Start sets trace time 0 to now. Before Start, Now is 0.
func (c *Clock) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t0 = c.wallNow()
	c.last = c.t0
}

// Now is the current trace time in seconds.
func (c *Clock) Now() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.wallNow())
	return c.trace
}

// Wall is the wall time since Start.
func (c *Clock) Wall() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t0.IsZero() {
		return 0
	}
	return c.wallNow().Sub(c.t0)
}

// Stats is what a clock's holds cost.
type Stats struct {
	// Held is the wall time with at least one hold active; Placed counts holds.
	Held   time.Duration
	Placed int
	// Expired counts the holds that reached their limit, by kind (a key up to its first '/').
	Expired map[string]int
	// ByKind is the wall time during which at least one hold of a kind was active; kinds
	// overlap, so they sum to more than Held.
	ByKind map[string]time.Duration
}

// ExpiredTotal sums Expired.
func (s Stats) ExpiredTotal() int {
	n := 0
	for _, v := range s.Expired {
		n += v
	}
	return n
}

// Stats reports what the holds cost so far.
func (c *Clock) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advance(c.wallNow())
	return Stats{Held: c.heldWall, Placed: c.placed, Expired: maps.Clone(c.expired), ByKind: maps.Clone(c.byKind)}
}

// Hold places the hold key for at most the clock's MaxHold. Holding a key already held (or
// held until it expired) does nothing: a hold ends only with Release.
func (c *Clock) Hold(key string) { c.HoldFor(key, 0) }

// HoldFor places the hold key for at most limit (0: the clock's MaxHold).
func (c *Clock) HoldFor(key string, limit time.Duration) {
	if limit <= 0 || limit > c.maxHold {
		limit = c.maxHold
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holds == nil || c.holds[key] != nil {
		return
	}
	now := c.wallNow()
	c.advance(now)
	c.holds[key] = &hold{until: now.Add(limit)}
	c.placed++
	c.setActive(c.active + 1)
}

// Release ends the hold key (a no-op when it is not held).
func (c *Clock) Release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.holds[key]
	if h == nil {
		return
	}
	c.advance(c.wallNow())
	delete(c.holds, key)
	if !h.expired {
		c.setActive(c.active - 1)
	}
}

// Held reports whether key is held (active or expired).
func (c *Clock) Held(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds[key] != nil
}

func (c *Clock) setActive(n int) {
	if (n == 0) != (c.active == 0) {
		close(c.changed)
		c.changed = make(chan struct{})
	}
	c.active = n
}

// advance integrates trace time up to wall time now, expiring holds at their limits on the way.
func (c *Clock) advance(now time.Time) {
	if c.t0.IsZero() || !now.After(c.last) {
		return
	}
	for c.active > 0 {
		var next *hold
		nextKey := ""
		for k, h := range c.holds {
			if !h.expired && (next == nil || h.until.Before(next.until)) {
				next, nextKey = h, k
			}
		}
		if next.until.After(now) {
			break
		}
		if next.until.After(c.last) {
			d := next.until.Sub(c.last)
			c.trace += d.Seconds() * c.holdRate
			c.heldWall += d
			c.attribute(d)
			c.last = next.until
		}
		next.expired = true
		kind, _, _ := strings.Cut(nextKey, "/")
		c.expired[kind]++
		c.setActive(c.active - 1)
	}
	d := now.Sub(c.last)
	if c.active > 0 {
		c.trace += d.Seconds() * c.holdRate
		c.heldWall += d
		c.attribute(d)
	} else {
		c.trace += d.Seconds() * c.speedup
	}
	c.last = now
}

// attribute adds d to every kind with an active hold.
func (c *Clock) attribute(d time.Duration) {
	seen := make([]string, 0, 4) // kinds are few; stays on the stack
	for k, h := range c.holds {
		if h.expired {
			continue
		}
		kind, _, _ := strings.Cut(k, "/")
		if slices.Contains(seen, kind) {
			continue
		}
		seen = append(seen, kind)
		c.byKind[kind] += d
	}
}

// Wait blocks until trace time reaches t or ctx ends (then it returns ctx's error, even when t
// has come too: a caller working through past times must still stop).
func (c *Clock) Wait(ctx context.Context, t float64) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.mu.Lock()
		now := c.wallNow()
		c.advance(now)
		if !c.t0.IsZero() && c.trace >= t {
			c.mu.Unlock()
			return nil
		}
		var d time.Duration
		switch {
		case c.t0.IsZero():
			d = 10 * time.Millisecond
		case c.active > 0:
			d = secs((t - c.trace) / c.holdRate)
			for _, h := range c.holds {
				if !h.expired {
					d = min(d, h.until.Sub(now))
				}
			}
		default:
			d = secs((t - c.trace) / c.speedup)
		}
		changed := c.changed
		c.mu.Unlock()
		timer.Reset(max(d, 0))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-timer.C:
		}
	}
}

func secs(s float64) time.Duration {
	const maxSec = float64(1 << 33) // ~272 years: keeps the conversion in range
	return time.Duration(min(s, maxSec) * float64(time.Second))
}
