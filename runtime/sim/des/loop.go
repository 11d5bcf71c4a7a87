// Package des is the sim engine's discrete-event loop: a queue of events ordered by virtual time
// (trace seconds) and, for equal times, by the order they were scheduled, and Clock, the loop's
// time as the k8s.io/utils clock that Kueue's code is given. Nothing here reads the wall clock,
// so a run's outcome depends only on its inputs.
package des

import (
	"container/heap"
	"context"
	"fmt"
	"math"
)

// Event is a scheduled call. Cancel removes it from the queue if it has not run yet.
type Event struct {
	at    float64
	seq   uint64
	fn    func()
	index int // in the heap; -1 once run or cancelled
	loop  *Loop
}

// At is the event's virtual time.
func (e *Event) At() float64 { return e.at }

// Cancel removes the event from its loop's queue; it reports whether the event was still queued.
func (e *Event) Cancel() bool {
	if e == nil || e.index < 0 {
		return false
	}
	heap.Remove(&e.loop.q, e.index)
	e.index = -1
	return true
}

// Loop runs events in time order. It is not safe for concurrent use: everything it runs runs on
// the goroutine that calls Run or Step.
type Loop struct {
	now  float64
	seq  uint64
	q    queue
	runs uint64
}

// New returns a loop at virtual time start.
func New(start float64) *Loop { return &Loop{now: start} }

// Now is the virtual time of the event running, or of the last one run.
func (l *Loop) Now() float64 { return l.now }

// Events is the number of events run so far.
func (l *Loop) Events() uint64 { return l.runs }

// Scheduled is the number of events scheduled so far (places reserved included).
func (l *Loop) Scheduled() uint64 { return l.seq }

// Pending is the number of queued events.
func (l *Loop) Pending() int { return len(l.q) }

// At schedules f at virtual time t; a t in the past runs at the current time (after the events
// already queued for it).
func (l *Loop) At(t float64, f func()) *Event {
	if math.IsNaN(t) {
		panic(fmt.Sprintf("des: event at NaN (now %g)", l.now))
	}
	if t < l.now {
		t = l.now
	}
	l.seq++
	e := &Event{at: t, seq: l.seq, fn: f, loop: l}
	heap.Push(&l.q, e)
	return e
}

// Reserve sets aside n places in the order of events at equal times, as if n events were
// scheduled now; AtReserved schedules an event in one of them. A long series of events known in
// advance (a trace's submissions) can so be queued one at a time, each by the previous one, and
// run exactly as if all had been queued at the start, without a queue as long as the series.
// It returns the first reserved place.
func (l *Loop) Reserve(n int) uint64 {
	first := l.seq + 1
	l.seq += uint64(n)
	return first
}

// AtReserved schedules f at virtual time t in place seq, one that Reserve returned (each used at
// most once). Like At, a t in the past runs at the current time.
func (l *Loop) AtReserved(t float64, seq uint64, f func()) *Event {
	if math.IsNaN(t) {
		panic(fmt.Sprintf("des: event at NaN (now %g)", l.now))
	}
	if seq == 0 || seq > l.seq {
		panic(fmt.Sprintf("des: place %d was not reserved", seq))
	}
	if t < l.now {
		t = l.now
	}
	e := &Event{at: t, seq: seq, fn: f, loop: l}
	heap.Push(&l.q, e)
	return e
}

// After schedules f d seconds from now.
func (l *Loop) After(d float64, f func()) *Event { return l.At(l.now+d, f) }

// Next returns the time of the next queued event; ok is false when the queue is empty.
func (l *Loop) Next() (t float64, ok bool) {
	if len(l.q) == 0 {
		return 0, false
	}
	return l.q[0].at, true
}

// Step runs the next event and reports whether there was one.
func (l *Loop) Step() bool {
	if len(l.q) == 0 {
		return false
	}
	e := heap.Pop(&l.q).(*Event)
	e.index = -1
	l.now = e.at
	l.runs++
	e.fn()
	return true
}

// Run steps until the queue is empty, done reports true (checked before every event) or ctx ends
// (checked every 4096 events); it returns ctx's error in the last case.
func (l *Loop) Run(ctx context.Context, done func() bool) error {
	for n := 0; ; n++ {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if done != nil && done() {
			return nil
		}
		if !l.Step() {
			return nil
		}
	}
}

// queue is a binary heap of events by (at, seq).
type queue []*Event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *queue) Push(x any) {
	e := x.(*Event)
	e.index = len(*q)
	*q = append(*q, e)
}
func (q *queue) Pop() any {
	old := *q
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return e
}
