package des

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"
)

func TestOrderByTimeThenScheduling(t *testing.T) {
	l := New(0)
	var got []string
	add := func(at float64, name string) *Event { return l.At(at, func() { got = append(got, name) }) }
	add(2, "b1")
	add(1, "a")
	add(2, "b2")
	c := add(1.5, "cancelled")
	add(3, "c")
	if !c.Cancel() || c.Cancel() {
		t.Fatal("Cancel: want true once, then false")
	}
	// An event scheduled while running, for a time already passed, runs now, after those queued
	// for now.
	l.At(2, func() {
		got = append(got, "b3")
		l.At(0, func() { got = append(got, "late") })
	})
	if err := l.Run(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b1", "b2", "b3", "late", "c"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if l.Now() != 3 || l.Events() != 6 || l.Pending() != 0 {
		t.Errorf("now %g, events %d, pending %d", l.Now(), l.Events(), l.Pending())
	}
}

// TestReservedPlacesRunAsIfQueuedFirst: a series queued one at a time in reserved places runs
// exactly as if it had all been queued when the places were reserved.
func TestReservedPlacesRunAsIfQueuedFirst(t *testing.T) {
	times := []float64{1, 1, 2, 3}
	run := func(lazy bool) []string {
		l := New(0)
		var got []string
		var queue func(i int, seq uint64)
		queue = func(i int, seq uint64) {
			if i < len(times) {
				l.AtReserved(times[i], seq, func() {
					queue(i+1, seq+1)
					got = append(got, "s"+strconv.Itoa(i))
				})
			}
		}
		if lazy {
			queue(0, l.Reserve(len(times)))
		} else {
			for i, at := range times {
				l.At(at, func() { got = append(got, "s"+strconv.Itoa(i)) })
			}
		}
		// Events of others at the same times, queued later, and one queued by the series.
		for _, at := range []float64{1, 2, 3} {
			l.At(at, func() {
				got = append(got, "o"+strconv.FormatFloat(at, 'g', -1, 64))
				if at == 1 {
					l.At(2, func() { got = append(got, "late2") })
				}
			})
		}
		for l.Step() {
		}
		return got
	}
	want := []string{"s0", "s1", "o1", "s2", "o2", "late2", "s3", "o3"}
	if got := run(false); !reflect.DeepEqual(got, want) {
		t.Fatalf("all queued first: %v, want %v", got, want)
	}
	if got := run(true); !reflect.DeepEqual(got, want) {
		t.Errorf("queued one at a time in reserved places: %v, want %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("AtReserved in a place never reserved: no panic")
		}
	}()
	New(0).AtReserved(1, 1, func() {})
}

func TestRunStopsWhenDoneOrCancelled(t *testing.T) {
	l := New(0)
	n := 0
	var tick func()
	tick = func() { n++; l.After(1, tick) }
	l.At(0, tick)
	if err := l.Run(context.Background(), func() bool { return n == 5 }); err != nil {
		t.Fatal(err)
	}
	if n != 5 || l.Now() != 4 {
		t.Fatalf("ran %d events to %g, want 5 to 4", n, l.Now())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Run(ctx, nil); err == nil {
		t.Fatal("Run with a cancelled context returned nil")
	}
}

func TestClockTimers(t *testing.T) {
	l := New(100)
	c := l.Clock()
	if !c.Now().Equal(Epoch.Add(100 * time.Second)) {
		t.Fatalf("Now %v", c.Now())
	}
	var fired []float64
	c.AfterFunc(2*time.Second, func() { fired = append(fired, l.Now()) })
	stopped := c.AfterFunc(time.Second, func() { fired = append(fired, -1) })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending AfterFunc timer: want true")
	}
	reset := c.AfterFunc(time.Hour, func() { fired = append(fired, l.Now()) })
	reset.Reset(3 * time.Second)
	tm := c.NewTimer(500 * time.Millisecond)
	tk := c.NewTicker(time.Second)
	for l.Now() < 103.5 {
		l.Step()
	}
	tk.Stop()
	if want := []float64{102, 103}; !reflect.DeepEqual(fired, want) {
		t.Errorf("AfterFunc fired at %v, want %v", fired, want)
	}
	select {
	case at := <-tm.C():
		if Seconds(at) != 100.5 {
			t.Errorf("timer fired at %g, want 100.5", Seconds(at))
		}
	default:
		t.Error("timer did not fire")
	}
	if got := Seconds(<-tk.C()); got != 101 {
		t.Errorf("ticker's first tick %g, want 101 (later ticks are dropped until read)", got)
	}
	if d := c.Since(Epoch); d != Duration(l.Now()) {
		t.Errorf("Since(epoch) %v at %g", d, l.Now())
	}
}

func TestSleepRefuses(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Sleep on the virtual clock returned")
		}
	}()
	New(0).Clock().Sleep(time.Second)
}

func TestEpochIsPast(t *testing.T) {
	// Kueue v0.15.0 compares some virtual times against the real clock (kueuelib's package
	// comment); a year of trace time must still lie in the past.
	if Time(365 * 86400 * 10).After(time.Now()) {
		t.Fatal("ten years of trace time reach past the wall clock's now")
	}
}
