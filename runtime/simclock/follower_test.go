package simclock

import (
	"math"
	"testing"
	"time"
)

// fakeFollower is another process's timers: next is its earliest, reached what the clock said.
type fakeFollower struct {
	next      float64 // NaN: none
	reached   []float64
	positions []Position
}

func (f *fakeFollower) Publish(p Position) { f.positions = append(f.positions, p) }
func (f *fakeFollower) Next() (float64, bool) {
	return f.next, !math.IsNaN(f.next)
}
func (f *fakeFollower) Reached(t float64) { f.reached = append(f.reached, t) }

func (f *fakeFollower) last() Position { return f.positions[len(f.positions)-1] }

func TestFollowerTimersStopTheClock(t *testing.T) {
	for _, tc := range []struct {
		name string
		rate float64
	}{{"jumps", 0}, {"capped rate", 10}} {
		t.Run(tc.name, func(t *testing.T) {
			c, fc := newTest(Options{Settle: -1, MaxRate: tc.rate})
			f := &fakeFollower{next: 40}
			c.Follow(f)
			a := c.NewAlarm("submission", OrderSubmission)
			a.Set(100)
			// The follower's timer at 40 comes before the alarm at 100: the clock stops there and
			// says so, however it moves.
			for i := 0; i < 10 && len(f.reached) == 0; i++ {
				if d := c.stepNow(fc); d > 0 {
					fc.Step(d)
				}
			}
			if len(f.reached) != 1 || f.reached[0] != 40 || c.Now() != 40 {
				t.Fatalf("reached %v at %g, want [40] at 40", f.reached, c.Now())
			}
			if p := f.last(); p.At(fc.Now()) != 40 || p.At(fc.Now().Add(time.Hour)) != 40 {
				t.Fatalf("published %+v: the follower must see the clock still at 40", p)
			}
			// Until the follower is done, the clock stays even though its timer is gone.
			f.next = math.NaN()
			c.stepNow(fc)
			fc.Step(time.Second)
			c.stepNow(fc)
			if c.Now() != 40 || fired(a) {
				t.Fatalf("the clock moved on (now %g) before the follower was done", c.Now())
			}
			c.FollowerDone()
			for i := 0; i < 10 && !fired(a); i++ {
				if d := c.stepNow(fc); d > 0 {
					fc.Step(d)
				}
			}
			if c.Now() != 100 || !fired(a) {
				t.Fatalf("now %g, alarm fired %v: want the alarm at 100", c.Now(), fired(a))
			}
			if p := f.last(); p.At(fc.Now()) != 100 {
				t.Fatalf("published %+v, the follower would read %g, want 100", p, p.At(fc.Now()))
			}
		})
	}
}

// A timer the follower sets while the clock stands still, at the instant itself (a zero
// RequeueAfter), is reached before the clock moves.
func TestFollowerTimerAtNow(t *testing.T) {
	c, fc := newTest(Options{Settle: -1})
	f := &fakeFollower{next: math.NaN()}
	c.Follow(f)
	a := c.NewAlarm("submission", OrderSubmission)
	a.Set(10)
	c.stepNow(fc)
	a.Set(20)
	f.next = 10
	c.stepNow(fc)
	if c.Now() != 10 || len(f.reached) != 1 || f.reached[0] != 10 {
		t.Fatalf("now %g, reached %v: want the follower's timer at 10 reached at 10", c.Now(), f.reached)
	}
	f.next = math.NaN()
	c.FollowerDone()
	c.stepNow(fc)
	if c.Now() != 20 {
		t.Fatalf("now %g, want 20", c.Now())
	}
	c.Follow(nil)
	if n := len(f.positions); n == 0 {
		t.Fatal("no position published")
	}
}
