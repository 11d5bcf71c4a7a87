package simclock

import (
	"math"
	"time"
)

// Position is where the clock is and how it moves: trace time Now at wall time Base, and, while
// Rate > 0, Rate trace seconds per wall second from there, never past Cap.
type Position struct {
	Now  float64
	Base time.Time
	Rate float64
	Cap  float64
}

// At is the trace time at wall time w.
func (p Position) At(w time.Time) float64 {
	if p.Rate <= 0 {
		return p.Now
	}
	return math.Min(p.Cap, p.Now+w.Sub(p.Base).Seconds()*p.Rate)
}

// A Follower is a process that runs on this clock with timers of its own (kueuelab's Kueue).
// The clock tells it every change of its Position, asks it for its earliest timer before every
// move (and stops there), and when it reaches that timer holds until the follower has called
// FollowerDone. All three methods are called with the clock's lock held: they must not call the
// clock.
type Follower interface {
	Publish(Position)
	// Next is the follower's earliest timer in trace seconds; ok false when it has none.
	Next() (t float64, ok bool)
	// Reached says that trace time has reached t, the follower's earliest timer.
	Reached(t float64)
}

// Follow makes f follow the clock from now on (nil: none).
func (c *Clock) Follow(f Follower) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.wall.Now()
	if c.follow != nil {
		c.follow.unfire(w)
		c.follow.stopLocked(w)
	}
	c.follower, c.follow = f, nil
	if f != nil {
		c.follow = c.NewAlarm("follower", OrderTimer)
		c.publish(w)
		c.poke()
	}
}

// FollowerDone ends the hold of the follower's timer that Reached announced.
func (c *Clock) FollowerDone() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.follow != nil {
		c.follow.unfire(c.wall.Now())
	}
}

// Position is the clock's position now.
func (c *Clock) Position() Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.position(c.wall.Now())
}

func (c *Clock) position(w time.Time) Position {
	if c.moving && !c.stopped {
		p := Position{Now: c.now, Base: c.base, Rate: c.rate, Cap: math.Inf(1)}
		if len(c.alarms) > 0 {
			p.Cap = c.alarms[0].t
		}
		return p
	}
	return Position{Now: c.current(w), Base: w}
}

// publish tells the follower the position; c.mu held.
func (c *Clock) publish(w time.Time) {
	if c.follower != nil {
		c.follower.Publish(c.position(w))
	}
}

// syncFollower arms the follower's alarm at its earliest timer; c.mu held.
func (c *Clock) syncFollower(w time.Time) {
	if c.follower == nil {
		return
	}
	if _, fired := c.fired[c.follow]; fired {
		return
	}
	t, ok := c.follower.Next()
	switch {
	case ok && (!c.follow.armed || c.follow.t != t):
		c.follow.setLocked(t, w)
	case !ok && c.follow.armed:
		c.follow.stopLocked(w)
	}
}
