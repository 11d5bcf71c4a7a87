package des

import (
	"time"

	"k8s.io/utils/clock"
)

// Epoch is the wall time of trace second 0 in the virtual clock. It lies in the past on purpose:
// a few places in Kueue v0.19.2 compare times against the real clock instead of an injected one
// (the queue manager's ClusterQueue backoff check, the workload controller's time.Until of
// requeueAt); against a past epoch every such comparison finds the wait over, and the sim
// decides when a backoff ends on the virtual clock instead (see runtime/sim/kueuelib).
var Epoch = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// Clock is a loop's virtual time as a k8s.io/utils clock: Now is the loop's time, timers and
// AfterFunc are events on the loop, run on the loop's goroutine (not in goroutines of their own as
// the real clock's AfterFunc does, so that what they do happens at a deterministic point).
type Clock struct {
	l *Loop
}

var _ clock.WithTickerAndDelayedExecution = Clock{}

// Clock returns the loop's virtual clock.
func (l *Loop) Clock() Clock { return Clock{l: l} }

// Time converts trace seconds to the virtual wall time.
func Time(sec float64) time.Time { return Epoch.Add(Duration(sec)) }

// Duration converts seconds to a time.Duration, rounded to the nanosecond.
func Duration(sec float64) time.Duration { return time.Duration(sec*1e9 + 0.5) }

// Seconds converts a virtual wall time back to trace seconds.
func Seconds(t time.Time) float64 { return t.Sub(Epoch).Seconds() }

// Now implements clock.PassiveClock.
func (c Clock) Now() time.Time { return Time(c.l.now) }

// Since implements clock.PassiveClock.
func (c Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// AfterFunc runs f on the loop d from now.
func (c Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, fn: f}
	t.Reset(d)
	return t
}

// NewTimer returns a timer whose channel receives the virtual time once the loop reaches it.
func (c Clock) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// After implements clock.Clock.
func (c Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// Tick implements clock.Clock.
func (c Clock) Tick(d time.Duration) <-chan time.Time { return c.NewTicker(d).C() }

// NewTicker returns a ticker whose channel receives every d of virtual time (dropping ticks
// nobody read, as time.Ticker does).
func (c Clock) NewTicker(d time.Duration) clock.Ticker {
	t := &ticker{c: c, d: d, ch: make(chan time.Time, 1)}
	t.schedule()
	return t
}

// Sleep cannot block a single-threaded loop: the loop would never reach the time it waits for.
// Code run by the sim must use timers; reaching this is a programming error.
func (c Clock) Sleep(d time.Duration) {
	panic("des: Sleep(" + d.String() + ") on the virtual clock would block the event loop forever")
}

type timer struct {
	c  Clock
	fn func()
	ch chan time.Time
	ev *Event
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	ok := t.ev.Cancel()
	t.ev = nil
	return ok
}

func (t *timer) Reset(d time.Duration) bool {
	active := t.Stop()
	t.ev = t.c.l.After(d.Seconds(), func() {
		t.ev = nil
		if t.fn != nil {
			t.fn()
			return
		}
		select {
		case t.ch <- t.c.Now():
		default:
		}
	})
	return active
}

type ticker struct {
	c  Clock
	d  time.Duration
	ch chan time.Time
	ev *Event
}

func (t *ticker) C() <-chan time.Time { return t.ch }

func (t *ticker) Stop() {
	t.ev.Cancel()
	t.ev = nil
}

func (t *ticker) schedule() {
	t.ev = t.c.l.After(t.d.Seconds(), func() {
		select {
		case t.ch <- t.c.Now():
		default:
		}
		t.schedule()
	})
}
