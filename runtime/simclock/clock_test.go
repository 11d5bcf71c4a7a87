package simclock

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// The clock's logic is tested through step, which the driver goroutine calls: the fake wall clock
// and direct calls make every case deterministic. TestDriver checks the goroutine itself.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTest(o Options) (*Clock, *clocktesting.FakeClock) {
	fc := clocktesting.NewFakeClock(t0)
	o.Wall = fc
	c := New(o)
	c.mu.Lock()
	c.started, c.t0, c.base, c.quietAt = true, t0, t0, t0
	c.mu.Unlock()
	return c, fc
}

func (c *Clock) stepNow(fc *clocktesting.FakeClock) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.step(fc.Now())
}

func fired(a *Alarm) bool {
	select {
	case <-a.C():
		return true
	default:
		return false
	}
}

func TestJumpToNextAlarmAndWaitForItsOwner(t *testing.T) {
	c, fc := newTest(Options{Settle: -1})
	a, b := c.NewAlarm("a", OrderCompletion), c.NewAlarm("b", OrderCompletion)
	a.Set(100)
	b.Set(250)
	c.stepNow(fc)
	if got := c.Now(); got != 100 {
		t.Fatalf("now = %g, want 100", got)
	}
	if !fired(a) || fired(b) {
		t.Fatalf("fired a=%v b=%v, want only a", fired(a), fired(b))
	}
	// The fired alarm keeps the clock at 100 until its owner is done.
	c.stepNow(fc)
	if got := c.Now(); got != 100 {
		t.Fatalf("clock moved past an unacknowledged alarm: now = %g", got)
	}
	a.Set(300)
	c.stepNow(fc)
	if got := c.Now(); got != 250 || !fired(b) {
		t.Fatalf("now = %g, b fired %v; want 250 and b", got, fired(b))
	}
	b.Stop()
	c.stepNow(fc)
	if got := c.Now(); got != 300 {
		t.Fatalf("now = %g, want 300", got)
	}
	a.Stop()
	if d := c.stepNow(fc); d >= 0 || c.Now() != 300 {
		t.Fatalf("with nothing armed the clock must wait for a change: wait %v, now %g", d, c.Now())
	}
	st := c.Stats()
	if st.Jumps != 3 || st.Jumped != 300 {
		t.Fatalf("jumps %d over %g, want 3 over 300", st.Jumps, st.Jumped)
	}
}

func TestHoldsKeepTheClockStillThenSettle(t *testing.T) {
	c, fc := newTest(Options{Settle: 5 * time.Millisecond})
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(60)
	k := Key{KindPods, "w1"}
	c.Hold(k)
	fc.Step(time.Second)
	c.stepNow(fc)
	if c.Now() != 0 || fired(a) {
		t.Fatalf("held clock moved to %g", c.Now())
	}
	c.Release(k)
	if d := c.stepNow(fc); d != 5*time.Millisecond || c.Now() != 0 {
		t.Fatalf("just released: wait %v now %g, want the settle window and 0", d, c.Now())
	}
	// A hold placed during the settle window restarts it.
	fc.Step(3 * time.Millisecond)
	c.Hold(k)
	c.Release(k)
	if d := c.stepNow(fc); d != 5*time.Millisecond {
		t.Fatalf("settle not restarted: wait %v", d)
	}
	fc.Step(5 * time.Millisecond)
	c.stepNow(fc)
	if c.Now() != 60 || !fired(a) {
		t.Fatalf("now %g fired %v, want 60 and fired", c.Now(), fired(a))
	}
	st := c.Stats()
	if st.Held != time.Second || st.ByKind[KindPods] != time.Second || st.Placed != 2 {
		t.Fatalf("stats %+v: want held 1s (pods 1s), 2 placed", st)
	}
}

func TestRateCapMovesContinuouslyAndStopsAtAlarms(t *testing.T) {
	c, fc := newTest(Options{MaxRate: 10, Settle: -1})
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(100)
	if d := c.stepNow(fc); d != 10*time.Second {
		t.Fatalf("wait %v, want 10s to reach 100 at 10×", d)
	}
	fc.Step(4 * time.Second)
	if got := c.Now(); got != 40 {
		t.Fatalf("now %g, want 40", got)
	}
	// A hold freezes the moving clock.
	k := Key{KindSubmit, "x"}
	c.Hold(k)
	fc.Step(time.Hour)
	if got := c.Now(); got != 40 {
		t.Fatalf("held now %g, want 40", got)
	}
	c.Release(k)
	c.stepNow(fc)
	fc.Step(100 * time.Second) // far past the alarm in wall time: trace time stops at it
	if got := c.Now(); got != 100 {
		t.Fatalf("now %g, want the alarm's 100", got)
	}
	c.stepNow(fc)
	if !fired(a) {
		t.Fatal("alarm at 100 did not fire")
	}
}

func TestAlarmEarlierThanTheMovingClockHeadsFor(t *testing.T) {
	c, fc := newTest(Options{MaxRate: 1, Settle: -1})
	far, near := c.NewAlarm("far", OrderCompletion), c.NewAlarm("near", OrderCompletion)
	far.Set(1000)
	c.stepNow(fc)
	fc.Step(10 * time.Second)
	near.Set(15)
	fc.Step(10 * time.Second)
	if got := c.Now(); got != 15 {
		t.Fatalf("now %g, want to stop at the new alarm 15", got)
	}
	c.stepNow(fc)
	if !fired(near) || fired(far) {
		t.Fatal("want near fired, far not")
	}
}

func TestHoldLimitAndFiredAlarmLimit(t *testing.T) {
	c, fc := newTest(Options{MaxHold: time.Second, Settle: -1})
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(10)
	c.HoldFor(Key{KindFinish, "w"}, 300*time.Millisecond)
	c.Hold(Key{KindStart, "p"})
	fc.Step(300 * time.Millisecond)
	c.stepNow(fc)
	if c.Now() != 0 {
		t.Fatal("moved while the default-limit hold is active")
	}
	fc.Step(700 * time.Millisecond)
	c.stepNow(fc)
	if c.Now() != 10 || !fired(a) {
		t.Fatalf("after both limits: now %g", c.Now())
	}
	fc.Step(time.Second) // the alarm's owner never acts
	c.stepNow(fc)
	st := c.Stats()
	if st.Expired[KindFinish] != 1 || st.Expired[KindStart] != 1 || st.Expired[kindAlarm] != 1 || st.ExpiredTotal() != 3 {
		t.Fatalf("expired %v", st.Expired)
	}
	// The expired holds are named, in the order they expired, with the trace time (an alarm is not a hold).
	if want := []string{"finish/w at trace 0.000s", "start/p at trace 0.000s"}; !slices.Equal(st.FirstExpired, want) {
		t.Errorf("first expired %q, want %q", st.FirstExpired, want)
	}
	// Releasing an expired hold forgets it; holding it again is a new hold.
	c.Release(Key{KindFinish, "w"})
	if c.Held(Key{KindFinish, "w"}) {
		t.Fatal("released hold still held")
	}
}

func TestAckBeforeHold(t *testing.T) {
	c, fc := newTest(Options{Settle: -1})
	k := Key{KindStart, "ns/pod/uid"}
	c.Ack(k)
	c.Hold(k) // the other party's hold arrives late: already acknowledged
	if c.Held(k) {
		t.Fatal("an early Ack did not cancel the hold")
	}
	c.Hold(k)
	if !c.Held(k) {
		t.Fatal("the acknowledgement must be used once")
	}
	c.Ack(k)
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(5)
	c.stepNow(fc)
	if c.Now() != 5 {
		t.Fatalf("now %g", c.Now())
	}
	// Release never leaves an acknowledgement behind.
	k2 := Key{KindPods, "w"}
	c.Release(k2)
	c.Hold(k2)
	if !c.Held(k2) {
		t.Fatal("Release of an unheld key swallowed a later Hold")
	}
	if c.Stats().EarlyAcks != 1 {
		t.Fatalf("early acks %d, want 1", c.Stats().EarlyAcks)
	}
}

func TestSimultaneousAlarmsFireTogether(t *testing.T) {
	c, fc := newTest(Options{Settle: -1})
	var as []*Alarm
	for _, tt := range []float64{30, 10, 30, 20} {
		a := c.NewAlarm("x", OrderCompletion)
		a.Set(tt)
		as = append(as, a)
	}
	c.stepNow(fc)
	if c.Now() != 10 || !fired(as[1]) {
		t.Fatalf("now %g", c.Now())
	}
	as[1].Done()
	c.stepNow(fc)
	as[3].Done()
	c.stepNow(fc)
	if c.Now() != 30 || !fired(as[0]) || !fired(as[2]) {
		t.Fatalf("now %g, want both alarms at 30 fired", c.Now())
	}
	// An alarm set in the past fires at once, at the current time.
	late := c.NewAlarm("late", OrderCompletion)
	as[0].Done()
	as[2].Done()
	late.Set(1)
	c.stepNow(fc)
	if c.Now() != 30 || !fired(late) {
		t.Fatalf("past alarm: now %g fired %v", c.Now(), fired(late))
	}
}

func TestDisabledRunsOnWallTime(t *testing.T) {
	c, fc := newTest(Options{Disabled: true, MaxRate: 100})
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(50)
	c.Hold(Key{KindPods, "w"}) // no effect
	if d := c.stepNow(fc); d != 500*time.Millisecond {
		t.Fatalf("wait %v, want 500ms", d)
	}
	fc.Step(500 * time.Millisecond)
	c.stepNow(fc)
	if !fired(a) || c.Now() != 50 {
		t.Fatalf("fired %v now %g", fired(a), c.Now())
	}
	fc.Step(time.Second)
	if got := c.Now(); got != 150 {
		t.Fatalf("fired alarms must not stop a wall clock: now %g", got)
	}
	c.Stop()
	fc.Step(time.Second)
	if got := c.Now(); got != 150 {
		t.Fatalf("stopped clock moved: %g", got)
	}
}

func TestNewDefaults(t *testing.T) {
	for _, r := range []float64{0, -1, math.Inf(1), math.NaN()} {
		if c := New(Options{MaxRate: r}); !c.Jumps() {
			t.Errorf("rate %g: want a jumping clock", r)
		}
	}
	if c := New(Options{MaxRate: 1000}); c.Jumps() || c.MaxRate() != 1000 {
		t.Error("rate 1000: want a capped clock")
	}
}

// TestDriver runs the real goroutine on the real wall clock: holds, alarms and Wait together.
func TestDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := New(Options{})
	k := Key{KindSetup, "run"}
	c.Hold(k)
	c.Start(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Wait(ctx, 3600) }()
	a := c.NewAlarm("owner", OrderCompletion)
	a.Set(1800)
	c.Release(k)
	select {
	case <-a.C():
	case <-ctx.Done():
		t.Fatal("alarm at 1800 never fired")
	}
	if got := c.Now(); got != 1800 {
		t.Fatalf("now %g at the first alarm", got)
	}
	a.Stop()
	if err := <-done; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if got := c.Now(); got != 3600 {
		t.Fatalf("now %g after Wait(3600)", got)
	}
	wctx, wcancel := context.WithCancel(ctx)
	wcancel()
	if err := c.Wait(wctx, 1e9); err == nil {
		t.Fatal("Wait with a cancelled context returned nil")
	}
	cancel()
}

// TestOrderAtTheSameTime: alarms due together fire order by order, each order once the previous
// one's holds have ended.
func TestOrderAtTheSameTime(t *testing.T) {
	c, fc := newTest(Options{Settle: -1})
	sample, sub, done := c.NewAlarm("sample", OrderSample), c.NewAlarm("submit", OrderSubmission), c.NewAlarm("agent", OrderCompletion)
	for _, a := range []*Alarm{sample, sub, done} {
		a.Set(500)
	}
	c.stepNow(fc)
	if c.Now() != 500 || !fired(done) || fired(sub) || fired(sample) {
		t.Fatalf("now %g: want only the completion fired at 500", c.Now())
	}
	k := Key{KindDone, "pod"}
	c.Hold(k) // the completion's step
	done.Stop()
	c.stepNow(fc)
	if fired(sub) {
		t.Fatal("the submission fired while the completion's step was owed")
	}
	c.Release(k)
	c.stepNow(fc)
	if !fired(sub) || fired(sample) || c.Now() != 500 {
		t.Fatalf("after the completion: submission %v sample %v now %g", fired(sub), fired(sample), c.Now())
	}
	sub.Stop()
	c.stepNow(fc)
	if !fired(sample) {
		t.Fatal("the sample did not fire last")
	}
}

// TestExtendRenewsTheLimit: a hold whose owner sees its step progress lives a full limit from the
// last renewal; without renewals it expires at its limit as before.
func TestExtendRenewsTheLimit(t *testing.T) {
	c, fc := newTest(Options{MaxHold: time.Second, Settle: -1})
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(10)
	k := Key{KindKueue, "kueue"}
	c.Hold(k)
	for range 3 { // 2.4 s of progress: past the original limit
		fc.Step(800 * time.Millisecond)
		c.stepNow(fc)
		c.Extend(k, 0)
	}
	if c.Now() != 0 || c.Stats().ExpiredTotal() != 0 {
		t.Fatalf("renewed hold: now %g, expired %v", c.Now(), c.Stats().Expired)
	}
	fc.Step(time.Second) // no renewal: the limit catches it
	c.stepNow(fc)
	if c.Now() != 10 || c.Stats().Expired[KindKueue] != 1 {
		t.Fatalf("after the limit: now %g, expired %v", c.Now(), c.Stats().Expired)
	}
	c.Extend(k, 0) // an expired hold stays expired
	if c.Stats().Expired[KindKueue] != 1 {
		t.Fatalf("expired %v", c.Stats().Expired)
	}
	c.Extend(Key{KindKueue, "other"}, 0) // not held: nothing
	if c.Held(Key{KindKueue, "other"}) {
		t.Fatal("Extend placed a hold")
	}
}

// TestOutageStopsTheLimits: while a component is down, the steps the clock waits for are owed by
// it, not late: no hold's limit runs, and each resumes, once the outage ends, with what it had
// left when the outage began (a hold placed during the outage with its whole limit).
func TestOutageStopsTheLimits(t *testing.T) {
	c, fc := newTest(Options{MaxHold: time.Second, Settle: -1})
	a := c.NewAlarm("a", OrderCompletion)
	a.Set(10)
	before, during, down := Key{KindPods, "before"}, Key{KindPods, "during"}, Key{KindOutage, "kube-apiserver"}
	c.Hold(before)
	fc.Step(600 * time.Millisecond)
	c.HoldFor(down, time.Minute)
	fc.Step(200 * time.Millisecond)
	c.Hold(during)
	for range 10 { // 20 s down: ten times every limit
		fc.Step(2 * time.Second)
		if d := c.stepNow(fc); d == 0 {
			t.Fatal("the driver spins during the outage")
		}
	}
	if st := c.Stats(); st.ExpiredTotal() != 0 || c.Now() != 0 {
		t.Fatalf("during the outage: now %g, expired %v", c.Now(), st.Expired)
	}
	c.Release(down)
	fc.Step(500 * time.Millisecond) // "before" had 400 ms left, "during" its whole second
	c.stepNow(fc)
	if st := c.Stats(); st.Expired[KindPods] != 1 || !c.Held(during) || c.Now() != 0 {
		t.Fatalf("500 ms after: now %g, expired %v", c.Now(), st.Expired)
	}
	fc.Step(500 * time.Millisecond)
	c.stepNow(fc)
	if st := c.Stats(); st.Expired[KindPods] != 2 || c.Now() != 10 {
		t.Fatalf("1 s after: now %g, expired %v", c.Now(), st.Expired)
	}
}
