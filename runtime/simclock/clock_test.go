package simclock

import (
	"context"
	"math"
	"testing"
	"time"
)

type fakeWall struct{ t time.Time }

func (f *fakeWall) now() time.Time           { return f.t }
func (f *fakeWall) step(d time.Duration)     { f.t = f.t.Add(d) }
func newFake() (*fakeWall, func() time.Time) { f := &fakeWall{t: time.Unix(1000, 0)}; return f, f.now }

func TestClockRates(t *testing.T) {
	type op struct {
		step    time.Duration
		hold    string
		limit   time.Duration
		release string
		want    float64 // trace seconds after the op
	}
	tests := []struct {
		name     string
		disabled bool
		ops      []op
		held     time.Duration
		expired  int
	}{
		{name: "no holds run at speedup", ops: []op{{step: time.Second, want: 100}, {step: 500 * time.Millisecond, want: 150}}},
		{name: "a hold runs at real time", ops: []op{
			{step: time.Second, want: 100},
			{hold: "a", want: 100},
			{step: 2 * time.Second, want: 102},
			{release: "a", want: 102},
			{step: time.Second, want: 202},
		}, held: 2 * time.Second},
		{name: "overlapping holds count once", ops: []op{
			{hold: "a"}, {step: time.Second, want: 1},
			{hold: "b", want: 1}, {step: time.Second, want: 2},
			{release: "a", want: 2}, {step: time.Second, want: 3},
			{release: "b", want: 3}, {step: time.Second, want: 103},
		}, held: 3 * time.Second},
		{name: "holding a held key keeps the first limit", ops: []op{
			{hold: "a", limit: 2 * time.Second}, {step: time.Second, want: 1},
			{hold: "a", limit: 2 * time.Second, want: 1}, {step: 2 * time.Second, want: 2 + 100},
		}, held: 2 * time.Second, expired: 1},
		{name: "an expired hold stops counting until released and held again", ops: []op{
			{hold: "a", limit: time.Second}, {step: 3 * time.Second, want: 1 + 200},
			{hold: "a", want: 201}, {step: time.Second, want: 301},
			{release: "a", want: 301}, {hold: "a", limit: time.Second, want: 301}, {step: time.Second, want: 302},
		}, held: 2 * time.Second, expired: 2},
		{name: "the clock's limit bounds every hold", ops: []op{
			{hold: "a", limit: time.Hour}, {step: 6 * time.Second, want: 5 + 100},
		}, held: 5 * time.Second, expired: 1},
		{name: "disabled ignores holds", disabled: true, ops: []op{
			{hold: "a"}, {step: time.Second, want: 100},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, now := newFake()
			c := New(100, Options{Now: now, Disabled: tt.disabled})
			if got := c.Now(); got != 0 {
				t.Fatalf("before Start: Now = %g, want 0", got)
			}
			c.Start()
			for i, o := range tt.ops {
				w.step(o.step)
				if o.hold != "" {
					c.HoldFor(o.hold, o.limit)
				}
				if o.release != "" {
					c.Release(o.release)
				}
				if got := c.Now(); math.Abs(got-o.want) > 1e-9 {
					t.Fatalf("op %d: Now = %g, want %g", i, got, o.want)
				}
			}
			st := c.Stats()
			if st.Held != tt.held || st.ExpiredTotal() != tt.expired || st.Expired["a"] != tt.expired {
				t.Errorf("Stats: held %s expired %v, want %s and %d of kind a", st.Held, st.Expired, tt.held, tt.expired)
			}
			if st.ByKind["a"] > st.Held || (st.Held > 0 && st.ByKind["a"]+st.ByKind["b"] < st.Held) {
				t.Errorf("Stats: held by kind %v does not cover held %s", st.ByKind, st.Held)
			}
		})
	}
}

func TestHeldByKind(t *testing.T) {
	w, now := newFake()
	c := New(100, Options{Now: now})
	c.Start()
	c.Hold("run/x")
	w.step(time.Second)
	c.Hold("submit/y")
	c.Hold("run/z")
	w.step(2 * time.Second)
	c.Release("run/x")
	c.Release("run/z")
	w.step(time.Second)
	c.Release("submit/y")
	st := c.Stats()
	want := map[string]time.Duration{"run": 3 * time.Second, "submit": 3 * time.Second}
	if st.Held != 4*time.Second || st.ByKind["run"] != want["run"] || st.ByKind["submit"] != want["submit"] {
		t.Errorf("held %s by kind %v, want 4s and %v", st.Held, st.ByKind, want)
	}
}

func TestWaitReturnsWhenReleased(t *testing.T) {
	c := New(1e6, Options{MaxHold: time.Hour})
	c.Start()
	c.Hold("a")
	done := make(chan error, 1)
	go func() { done <- c.Wait(context.Background(), 3600) }() // an hour of trace: 1 h at real time, 3.6 ms unheld
	select {
	case err := <-done:
		t.Fatalf("Wait returned %v while held", err)
	case <-time.After(50 * time.Millisecond):
	}
	c.Release("a")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return after the hold was released")
	}
	if got := c.Now(); got < 3600 {
		t.Fatalf("Now = %g after Wait(3600)", got)
	}
}

func TestWaitHonoursContext(t *testing.T) {
	c := New(1, Options{})
	c.Start()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Wait(ctx, 1e9); err != context.Canceled {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	if err := c.Wait(ctx, 0); err != context.Canceled {
		t.Fatalf("Wait for a time already past = %v, want context.Canceled: a caller catching up must stop", err)
	}
}
