// Package simclock is the trace clock of a replay: an event-driven clock that jumps over time in
// which nothing happens and stands still while the control plane owes a step.
//
// Participants that know when their next event is due (the submitter's next submission, the
// agent's next pod completion, the sampler's next row, a Kueue timer) arm an Alarm. When no hold is
// active, trace time advances to the earliest armed alarm — at once by default, or at most
// MaxRate trace seconds per wall second — and stops there until the alarm's owner has done its
// work and re-armed or stopped it. Whoever sees a step of the control plane begin (a created job
// without its Kueue Workload, reserved quota without running pods, finished pods without a
// finished Workload, ...) places a hold on it; while any hold is active trace time does not move,
// so a step that takes wall time on a real control plane takes no trace time, and a workload alone
// on an idle cluster takes exactly its work's time. What the holds cost is measured (Stats).
//
// A hold has a wall-time limit after which it stops counting, so a step that never ends cannot
// stall the replay; a hold that reaches its limit is a bug in the hold set, counted in Stats.
package simclock

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Kind says which step of the control plane a hold covers.
type Kind string

// Hold kinds. Each names the party that places it and the event that ends it.
const (
	KindSubmit    Kind = "submit"    // runner: a created object whose Kueue Workload is not there yet
	KindKueue     Kind = "kueue"     // runner: Kueue's queues have not settled on what the API shows
	KindPods      Kind = "pods"      // runner: quota reserved, not all of the Workload's pods created
	KindSchedule  Kind = "schedule"  // runner: kube-scheduler has not settled on the unbound pods
	KindStart     Kind = "start"     // runner → agent: a pod not yet Running and started by the agent
	KindSeen      Kind = "seen"      // runner: a pod owed its start that the runner's own informer has not shown Running
	KindGone      Kind = "gone"      // runner → agent: a deleted pod the agent still simulates
	KindDone      Kind = "done"      // agent → runner: a completed pod not yet seen terminal
	KindFinish    Kind = "finish"    // runner: a Workload whose pods are done is not Finished yet
	KindEvict     Kind = "evict"     // runner: an evicted Workload still holds quota
	KindTrials    Kind = "trials"    // runner: an experiment's next trial Jobs are owed
	KindTimer     Kind = "timer"     // runner: a Kueue timer is due in trace time, Kueue has not acted
	KindOutage    Kind = "outage"    // runner: a control-plane component is down or not ready
	KindFault     Kind = "fault"     // runner: an injected fault's own steps (node NotReady, pods evicted or failed) not yet seen
	KindRecover   Kind = "recover"   // runner: a running workload lost a pod; its owner owes the replacement (or the workload's end)
	KindPodsReady Kind = "podsready" // runner: every pod of an admitted Workload runs, Kueue's PodsReady condition does not say so yet
	KindOrphans   Kind = "orphans"   // runner: a workload's quota is released, pods of its last admission are still not being deleted
	KindSetup     Kind = "setup"     // runner: the run is being prepared
	kindAlarm     Kind = "alarm"     // internal: a fired alarm whose owner has not finished
)

// Key names one hold.
type Key struct {
	Kind Kind
	ID   string
}

func (k Key) String() string { return string(k.Kind) + "/" + k.ID }

// maxExpiredNamed bounds Stats.FirstExpired.
const maxExpiredNamed = 5

// DefaultMaxHold bounds a hold unless Options.MaxHold says otherwise.
const DefaultMaxHold = 20 * time.Second

// DefaultSettle is how long the clock stays still after the last hold ends before it moves.
const DefaultSettle = 2 * time.Millisecond

// tombTTL bounds how long an early Ack waits for its hold (see Ack).
const tombTTL = time.Minute

// Options tune a Clock; the zero value is the default.
type Options struct {
	// MaxRate caps trace seconds per wall second while the clock moves between events; 0 or +Inf
	// means no cap: the clock jumps to the next event.
	MaxRate float64
	// Settle is how long holds must have been released before the clock moves (default
	// DefaultSettle; negative: 0). It covers a step that begins a few milliseconds after the
	// previous one ended, before anyone could see it and place its hold.
	Settle time.Duration
	// MaxHold bounds every hold and every fired alarm (default DefaultMaxHold of wall time).
	MaxHold time.Duration
	// Disabled makes holds no-ops and trace time MaxRate × wall time, with alarms firing on wall
	// timers: for an agent in another process, which cannot share the clock. Needs a finite MaxRate.
	Disabled bool
	// Wall is the wall clock (default the real one); tests inject a fake.
	Wall clock.WithTicker
	// Trace, when set, receives one line per hold placed or ended and per move of the clock:
	// "<wall seconds since Start> <event> <kind/id or trace time>", for measuring where a
	// replay's wall time goes (hack/clocktrace.py).
	Trace io.Writer
}

type hold struct {
	kind    Kind
	placed  time.Time
	until   time.Time
	expired bool
}

// Clock is a trace clock. All methods are safe for concurrent use.
type Clock struct {
	rate     float64 // +Inf: jump
	trace    io.Writer
	settle   time.Duration
	maxHold  time.Duration
	disabled bool
	wall     clock.WithTicker

	mu       sync.Mutex
	started  bool
	stopped  bool
	t0       time.Time
	now      float64   // trace time at base
	base     time.Time // wall time at which now was set
	moving   bool      // rate mode: trace time runs from base at rate
	holds    map[Key]*hold
	active   int // holds not expired
	byKind   map[Kind]int
	tomb     map[Key]time.Time
	alarms   alarmHeap
	fired    map[*Alarm]struct{}
	quietAt  time.Time // wall time since which nothing blocks (zero while blocked)
	blockAt  time.Time // wall time since which something blocks (zero while unblocked)
	kick     chan struct{}
	follower Follower
	follow   *Alarm // the follower's earliest timer
	stats    Stats
	kindWall map[Kind]time.Time // since when each kind has had an active hold
}

// Stats is what the clock did.
type Stats struct {
	// Held is the wall time during which at least one hold (or fired alarm) blocked the clock;
	// Placed counts holds; ByKind is the wall time during which at least one hold of a kind was
	// active (kinds overlap, so they sum to more than Held).
	Held   time.Duration
	Placed int
	ByKind map[Kind]time.Duration
	// Expired counts the holds (and fired alarms) that reached their limit, by kind; FirstExpired
	// names the first maxExpiredNamed holds that did ("pods/workload-000123 at trace 4711.000s"),
	// so that a run that shows one says which step the control plane was late with.
	Expired      map[Kind]int
	FirstExpired []string
	// Jumps counts the moves of the clock to an event; Jumped is the trace time they covered.
	Jumps  int
	Jumped float64
	// EarlyAcks counts Acks that arrived before their hold (see Ack).
	EarlyAcks int
}

// ExpiredTotal sums Expired.
func (s Stats) ExpiredTotal() int {
	n := 0
	for _, v := range s.Expired {
		n += v
	}
	return n
}

// New returns a clock at trace time 0. It does not move before Start.
func New(o Options) *Clock {
	c := &Clock{rate: o.MaxRate, trace: o.Trace, settle: o.Settle, maxHold: o.MaxHold, disabled: o.Disabled, wall: o.Wall,
		holds: map[Key]*hold{}, byKind: map[Kind]int{}, tomb: map[Key]time.Time{}, fired: map[*Alarm]struct{}{},
		kick: make(chan struct{}, 1), kindWall: map[Kind]time.Time{},
		stats: Stats{ByKind: map[Kind]time.Duration{}, Expired: map[Kind]int{}}}
	if !(c.rate > 0) || math.IsInf(c.rate, 1) {
		c.rate = math.Inf(1)
	}
	if c.settle == 0 {
		c.settle = DefaultSettle
	}
	if c.settle < 0 {
		c.settle = 0
	}
	if c.maxHold <= 0 {
		c.maxHold = DefaultMaxHold
	}
	if c.wall == nil {
		c.wall = clock.RealClock{}
	}
	return c
}

// Jumps reports whether the clock jumps between events (no rate cap).
func (c *Clock) Jumps() bool { return math.IsInf(c.rate, 1) && !c.disabled }

// MaxRate is the cap on trace seconds per wall second (+Inf: none).
func (c *Clock) MaxRate() float64 { return c.rate }

// HoldsEnabled reports whether holds have an effect (false with Options.Disabled).
func (c *Clock) HoldsEnabled() bool { return !c.disabled }

// Start sets the wall time of trace time 0 and runs the clock until ctx ends or Stop.
func (c *Clock) Start(ctx context.Context) {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return
	}
	w := c.wall.Now()
	c.started, c.t0, c.base = true, w, w
	if c.active == 0 && len(c.fired) == 0 {
		c.quietAt = w
	} else {
		c.blockAt = w
	}
	c.mu.Unlock()
	go c.drive(ctx)
}

// Stop freezes the clock: trace time no longer moves and alarms no longer fire.
func (c *Clock) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	w := c.wall.Now()
	c.sync(w)
	c.now, c.base = c.current(w), w
	c.stopped = true
	c.moving = false
	c.publish(w)
	c.poke()
}

// Now is the current trace time in seconds.
func (c *Clock) Now() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current(c.wall.Now())
}

// Wall is the wall time since Start.
func (c *Clock) Wall() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return 0
	}
	return c.wall.Now().Sub(c.t0)
}

// Stats reports what the clock did so far.
func (c *Clock) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Now()
	c.sync(w)
	s := c.stats
	s.ByKind = make(map[Kind]time.Duration, len(c.stats.ByKind))
	for k, d := range c.stats.ByKind {
		s.ByKind[k] = d
	}
	for k, since := range c.kindWall {
		s.ByKind[k] += w.Sub(since)
	}
	if !c.blockAt.IsZero() {
		s.Held += w.Sub(c.blockAt)
	}
	s.Expired = make(map[Kind]int, len(c.stats.Expired))
	for k, n := range c.stats.Expired {
		s.Expired[k] = n
	}
	s.FirstExpired = slices.Clone(c.stats.FirstExpired)
	return s
}

// Hold places the hold k for at most the clock's MaxHold. Holding a key already held does nothing.
func (c *Clock) Hold(k Key) { c.HoldFor(k, 0) }

// HoldFor places the hold k for at most limit of wall time (0: the clock's MaxHold).
func (c *Clock) HoldFor(k Key, limit time.Duration) {
	if c.disabled {
		return
	}
	limit = c.holdLimit(limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Now()
	if _, ok := c.tomb[k]; ok {
		delete(c.tomb, k)
		return
	}
	if c.holds[k] != nil {
		return
	}
	c.sync(w)
	c.holds[k] = &hold{kind: k.Kind, placed: w, until: w.Add(limit)}
	c.log(w, "hold", k.String())
	c.stats.Placed++
	c.activate(k.Kind, w)
}

// Extend renews the limit of the hold k from now (0: the clock's MaxHold), for a party that has
// seen its step progress and wants the limit to catch a stuck step, not a long one (a settler
// while Kueue is still draining a deep queue). A no-op when k is not held or has expired.
func (c *Clock) Extend(k Key, limit time.Duration) {
	if c.disabled {
		return
	}
	limit = c.holdLimit(limit)
	c.mu.Lock()
	defer c.mu.Unlock()
	if h := c.holds[k]; h != nil && !h.expired {
		h.until = c.wall.Now().Add(limit)
	}
}

// holdLimit is limit, or the clock's MaxHold when limit is 0 or less.
func (c *Clock) holdLimit(limit time.Duration) time.Duration {
	if limit <= 0 {
		return c.maxHold
	}
	return limit
}

// Release ends the hold k; a no-op when k is not held.
func (c *Clock) Release(k Key) {
	if c.disabled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release(k, c.wall.Now(), false)
}

// Ack ends the hold k, or, when k is not held yet, keeps the acknowledgement so that the next
// Hold(k) does nothing. It is for handing a step from one party to another whose informers may see
// the object first: the runner holds a pod until the agent has started it, and the agent may
// start it before the runner has seen it. Keys acknowledged early are forgotten after a minute.
func (c *Clock) Ack(k Key) {
	if c.disabled {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release(k, c.wall.Now(), true)
}

func (c *Clock) release(k Key, w time.Time, early bool) {
	h := c.holds[k]
	if h == nil {
		if early {
			if len(c.tomb) > 1024 {
				for key, at := range c.tomb {
					if w.Sub(at) > tombTTL {
						delete(c.tomb, key)
					}
				}
			}
			c.tomb[k] = w
			c.stats.EarlyAcks++
			c.log(w, "early", k.String())
		}
		return
	}
	c.sync(w)
	delete(c.holds, k)
	c.log(w, "release", k.String())
	if !h.expired {
		c.deactivate(h.kind, w)
	}
}

// Note writes a free-form line to the trace (Options.Trace), if there is one.
func (c *Clock) Note(event, what string) {
	if c.trace == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log(c.wall.Now(), event, strings.ReplaceAll(what, " ", "_"))
}

// log writes a trace line (Options.Trace); c.mu is held.
func (c *Clock) log(w time.Time, event, what string) {
	if c.trace != nil {
		fmt.Fprintf(c.trace, "%.6f %s %s\n", w.Sub(c.t0).Seconds(), event, what)
	}
}

// Held reports whether k is held (active or expired).
func (c *Clock) Held(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds[k] != nil
}

// Blockers describes what keeps the clock still now: active holds by kind, fired alarms not yet
// done, and the next armed alarm.
func (c *Clock) Blockers() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sync(c.wall.Now())
	var parts []string
	for k, n := range c.byKind {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s holds", n, k))
		}
	}
	for a := range c.fired {
		parts = append(parts, fmt.Sprintf("alarm %s fired at %g", a.name, a.t))
	}
	if len(c.alarms) > 0 {
		parts = append(parts, fmt.Sprintf("next alarm %s at %g", c.alarms[0].name, c.alarms[0].t))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// Active is the number of holds that block the clock now, by kind.
func (c *Clock) Active() map[Kind]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sync(c.wall.Now())
	out := make(map[Kind]int, len(c.byKind))
	for k, n := range c.byKind {
		if n > 0 {
			out[k] = n
		}
	}
	return out
}

func (c *Clock) activate(k Kind, w time.Time) {
	if c.byKind[k] == 0 {
		c.kindWall[k] = w
	}
	c.byKind[k]++
	c.active++
	c.blockChanged(w)
}

func (c *Clock) deactivate(k Kind, w time.Time) {
	c.byKind[k]--
	if c.byKind[k] == 0 {
		c.stats.ByKind[k] += w.Sub(c.kindWall[k])
		if k == KindOutage {
			c.resumeLimits(c.kindWall[k], w)
		}
		delete(c.kindWall, k)
	}
	c.active--
	c.blockChanged(w)
}

// limitRuns reports whether the limits of holds of kind k (and of fired alarms, kindAlarm) run
// now: a component that is down owes every step that waits for it, so only the outage's own
// hold's limit runs until the control plane is back (resumeLimits then moves the others on).
func (c *Clock) limitRuns(k Kind) bool { return k == KindOutage || c.byKind[KindOutage] == 0 }

// resumeLimits moves the limits of the holds and fired alarms on by the part of the outage from
// since to w that each has waited through.
func (c *Clock) resumeLimits(since, w time.Time) {
	for _, h := range c.holds {
		if h.kind != KindOutage && !h.expired {
			h.until = h.until.Add(w.Sub(laterOf(since, h.placed)))
		}
	}
	for a := range c.fired {
		a.firedAt = a.firedAt.Add(w.Sub(laterOf(since, a.firedAt)))
	}
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// blocked reports whether anything keeps the clock still.
func (c *Clock) blocked() bool { return c.active > 0 || len(c.fired) > 0 }

// blockChanged keeps the held-time accounting and the settle window after a change of the holds
// or fired alarms, and wakes the driver.
func (c *Clock) blockChanged(w time.Time) {
	switch b := c.blocked(); {
	case b && c.blockAt.IsZero():
		if c.moving {
			c.now = c.advanced(w)
			c.base = w
			c.moving = false
			c.publish(w)
		}
		c.blockAt, c.quietAt = w, time.Time{}
	case !b && !c.blockAt.IsZero():
		c.stats.Held += w.Sub(c.blockAt)
		c.blockAt, c.quietAt = time.Time{}, w
	case b:
		// Still blocked: a hold placed during the settle window restarts it when released.
	}
	c.poke()
}

func (c *Clock) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// current is trace time at wall time w.
func (c *Clock) current(w time.Time) float64 {
	if c.stopped {
		return c.now
	}
	if c.disabled {
		if !c.started {
			return 0
		}
		return c.now + w.Sub(c.base).Seconds()*c.rate
	}
	if c.moving {
		return c.advanced(w)
	}
	return c.now
}

// advanced is trace time at wall w while moving: at rate from base, never past the next alarm.
func (c *Clock) advanced(w time.Time) float64 {
	t := c.now + w.Sub(c.base).Seconds()*c.rate
	if len(c.alarms) > 0 && t > c.alarms[0].t {
		t = c.alarms[0].t
	}
	return t
}

// sync expires holds and fired alarms that reached their limits by wall time w.
func (c *Clock) sync(w time.Time) {
	if c.disabled {
		return
	}
	for k, h := range c.holds {
		if !c.limitRuns(h.kind) {
			continue
		}
		if !h.expired && !w.Before(h.until) {
			c.log(w, "expire", k.String())
			h.expired = true
			c.stats.Expired[h.kind]++
			if len(c.stats.FirstExpired) < maxExpiredNamed {
				c.stats.FirstExpired = append(c.stats.FirstExpired, fmt.Sprintf("%s at trace %.3fs", k, c.now))
			}
			c.deactivate(h.kind, h.until)
		}
	}
	for a := range c.fired {
		if c.limitRuns(kindAlarm) && !w.Before(a.firedAt.Add(c.maxHold)) {
			delete(c.fired, a)
			c.stats.Expired[kindAlarm]++
			c.blockChanged(w)
		}
	}
}

// drive moves the clock: whenever nothing blocks it and the settle window has passed, trace time
// goes to the next armed alarm (at once, or at the capped rate) and the alarms due fire.
func (c *Clock) drive(ctx context.Context) {
	timer := c.wall.NewTimer(time.Hour)
	defer timer.Stop()
	go func() { <-ctx.Done(); c.Stop() }()
	for {
		c.mu.Lock()
		if c.stopped {
			c.mu.Unlock()
			return
		}
		wait := c.step(c.wall.Now())
		c.mu.Unlock()
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-c.kick:
		case <-timer.C():
		}
		if wait >= 0 && !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
	}
}

// step does what can be done at wall time w and returns how long to sleep before the next step
// (negative: until something changes).
func (c *Clock) step(w time.Time) time.Duration {
	if c.disabled {
		return c.stepWall(w)
	}
	c.sync(w)
	c.syncFollower(w)
	defer c.publish(w)
	next := time.Duration(-1)
	soonest := func(d time.Duration) {
		if d < 0 {
			d = 0
		}
		if next < 0 || d < next {
			next = d
		}
	}
	for _, h := range c.holds {
		if !h.expired && c.limitRuns(h.kind) {
			soonest(h.until.Sub(w))
		}
	}
	if c.limitRuns(kindAlarm) {
		for a := range c.fired {
			soonest(a.firedAt.Add(c.maxHold).Sub(w))
		}
	}
	if c.blocked() {
		return next
	}
	if len(c.alarms) == 0 {
		if c.moving {
			c.now, c.base, c.moving = c.advanced(w), w, false
		}
		return next
	}
	if d := c.quietAt.Add(c.settle).Sub(w); d > 0 {
		soonest(d)
		return next
	}
	target := c.alarms[0].t
	if !c.moving {
		if target <= c.now || math.IsInf(c.rate, 1) {
			c.jump(target, w)
			return 0
		}
		c.moving, c.base = true, w
	}
	if t := c.advanced(w); t >= target {
		c.moving = false
		c.jump(target, w)
		return 0
	}
	soonest(time.Duration((target - c.advanced(w)) / c.rate * float64(time.Second)))
	return next
}

// jump sets trace time to t (never backwards) and fires the alarms due of the first order: the
// alarms of a later order at the same time fire once everything the first ones started has
// settled (see Order).
func (c *Clock) jump(t float64, w time.Time) {
	if t > c.now {
		c.log(w, "jump", strconv.FormatFloat(t, 'f', 3, 64))
		c.stats.Jumps++
		c.stats.Jumped += t - c.now
		c.now = t
	}
	c.base = w
	if len(c.alarms) == 0 {
		return
	}
	// The follower (Kueue) reads the new time before anyone an alarm wakes can act at it.
	c.publish(w)
	order := c.alarms[0].order
	for len(c.alarms) > 0 && c.alarms[0].t <= c.now && c.alarms[0].order == order {
		a := heap.Pop(&c.alarms).(*Alarm)
		c.fire(a, w)
	}
}

func (c *Clock) fire(a *Alarm, w time.Time) {
	c.log(w, "fire", a.name)
	a.armed = false
	a.firedAt = w
	if !c.disabled {
		c.fired[a] = struct{}{}
		c.blockChanged(w)
	}
	close(a.ch)
	if a == c.follow {
		c.follower.Reached(a.t)
	}
}

// stepWall is step without holds: trace time is rate × wall time and alarms fire when it passes them.
func (c *Clock) stepWall(w time.Time) time.Duration {
	now := c.current(w)
	for len(c.alarms) > 0 && c.alarms[0].t <= now {
		c.fire(heap.Pop(&c.alarms).(*Alarm), w)
	}
	if len(c.alarms) == 0 || math.IsInf(c.rate, 1) {
		return -1
	}
	return time.Duration((c.alarms[0].t - now) / c.rate * float64(time.Second))
}

// Order ranks alarms due at the same trace time: all alarms of the lowest order fire first, and
// those of the next order fire only when everything the first started has settled (no hold, no
// fired alarm). Simultaneous events are thus handled the same way in every run: a workload that
// ends at t frees its quota before one submitted at t asks for it, as in discrete-event
// simulation, rather than in whatever order the control plane happens to see them.
type Order int

// Alarm orders, first to last.
const (
	OrderCompletion Order = iota // the agent's pod completions
	OrderFault                   // injected faults: a pod that completes at t is done before a fault at t
	OrderTimer                   // Kueue's timers
	OrderSubmission              // the runner's submissions
	OrderSample                  // the time series rows: the state once everything at t happened
	OrderLimit                   // a run's end at a trace time: after its last row
)

// Alarm is one participant's next event. It fires when trace time reaches its time and then keeps
// the clock still until its owner calls Set, Done or Stop.
type Alarm struct {
	c       *Clock
	name    string
	order   Order
	t       float64
	idx     int
	armed   bool
	ch      chan struct{}
	firedAt time.Time
}

// NewAlarm returns an unarmed alarm of the given order; name labels it in diagnostics.
func (c *Clock) NewAlarm(name string, order Order) *Alarm {
	return &Alarm{c: c, name: name, order: order, idx: -1, ch: make(chan struct{})}
}

// C is closed when the alarm fires. Read it again after each Set.
func (a *Alarm) C() <-chan struct{} {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.ch
}

// Set arms the alarm at trace time t, ending a fired alarm's hold on the clock. A time already
// passed fires at once.
func (a *Alarm) Set(t float64) {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Now()
	c.sync(w)
	a.unfire(w)
	a.setLocked(t, w)
}

func (a *Alarm) setLocked(t float64, w time.Time) {
	c := a.c
	if math.IsNaN(t) {
		t = math.Inf(1)
	}
	if a.armed && a.t == t {
		return
	}
	if !a.armed {
		select {
		case <-a.ch:
			a.ch = make(chan struct{})
		default:
		}
	}
	if c.moving {
		// The alarm may be earlier than where the moving clock is heading: settle the position.
		c.now, c.base = c.advanced(w), w
	}
	a.t = t
	if a.armed {
		heap.Fix(&c.alarms, a.idx)
	} else {
		a.armed = true
		heap.Push(&c.alarms, a)
	}
	c.publish(w)
	c.poke()
}

// Done ends a fired alarm's hold on the clock without arming it again.
func (a *Alarm) Done() {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	a.unfire(c.wall.Now())
}

// Stop disarms the alarm and ends its hold on the clock.
func (a *Alarm) Stop() {
	c := a.c
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Now()
	a.unfire(w)
	a.stopLocked(w)
}

func (a *Alarm) stopLocked(w time.Time) {
	c := a.c
	if a.armed {
		if c.moving {
			c.now, c.base = c.advanced(w), w
		}
		heap.Remove(&c.alarms, a.idx)
		a.armed = false
		c.publish(w)
		c.poke()
	}
}

func (a *Alarm) unfire(w time.Time) {
	if _, ok := a.c.fired[a]; ok {
		a.c.log(w, "done", a.name)
		delete(a.c.fired, a)
		a.c.blockChanged(w)
	}
}

// Wait blocks until trace time reaches t or ctx ends (then it returns ctx's error even when t has
// come too: a caller working through past times must still stop). The clock does not wait for the
// caller to act on the time: use an Alarm for that.
func (c *Clock) Wait(ctx context.Context, t float64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a := c.NewAlarm("wait", OrderSample)
	a.Set(t)
	defer a.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-a.C():
		return nil
	}
}

type alarmHeap []*Alarm

func (h alarmHeap) Len() int { return len(h) }
func (h alarmHeap) Less(i, j int) bool {
	return h[i].t < h[j].t || (h[i].t == h[j].t && h[i].order < h[j].order)
}
func (h alarmHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *alarmHeap) Push(x any)   { a := x.(*Alarm); a.idx = len(*h); *h = append(*h, a) }
func (h *alarmHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	a.idx = -1
	return a
}
