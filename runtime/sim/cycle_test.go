package sim

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kueuelab/kueuelab/runtime/sim/des"
)

// Kueue's two speed signals (pkg/util/wait), as kueuelib's Cycle returns them.
const keepGoing, slowDown = true, false

// fakeKueue has heads while heads > 0 and answers cycles from a script of signals, recording when
// each cycle ran.
type fakeKueue struct {
	loop    *des.Loop
	heads   int
	signals []bool
	at      []float64
	err     error
}

func (f *fakeKueue) HasHeads() bool { return f.heads > 0 }

func (f *fakeKueue) Cycle() (bool, error) {
	f.at = append(f.at, f.loop.Now())
	f.heads--
	s := slowDown
	if len(f.signals) > 0 {
		s, f.signals = f.signals[0], f.signals[1:]
	}
	return s, f.err
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// TestCyclerBackoff follows Kueue's loop: cycles back to back while they admit; after a cycle
// that admits nothing, the next iteration starts at once (its timer was armed before), then the
// waits are 1, 2, 4 … ms, each counted from its iteration's start, so a cycle longer than the
// wait hides it.
func TestCyclerBackoff(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cycle   float64
		signals []bool
		writes  float64   // how long after each cycle its writes are answered
		want    []float64 // cycle end times
	}{
		{"keep going", 0.01, []bool{keepGoing, keepGoing, keepGoing}, 0, []float64{0.01, 0.02, 0.03}},
		{"writes hold the next cycle", 0.01, []bool{keepGoing, keepGoing, keepGoing}, 0.02, []float64{0.01, 0.04, 0.07}},
		// The 1, 2 and 4 ms backoff timers run out while the writes are answered.
		{"writes hide the backoff", 0.01, []bool{slowDown, slowDown, slowDown, slowDown}, 0.005, []float64{0.01, 0.025, 0.04, 0.055}},
		{"slow down", 0, []bool{slowDown, slowDown, slowDown, slowDown, keepGoing, keepGoing, keepGoing}, 0,
			// The second iteration's timer was armed from no signal yet: 0. Then the waits are 1, 2
			// and 4 ms; the fifth cycle admits, but its iteration's 8 ms timer was armed before it
			// ran; then no wait.
			[]float64{0, 0, 0.001, 0.003, 0.007, 0.015, 0.015}},
		{"long cycles hide the backoff", 0.05, []bool{slowDown, slowDown, slowDown}, 0, []float64{0.05, 0.10, 0.15}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := des.New(0)
			f := &fakeKueue{loop: l, heads: len(tt.want), signals: tt.signals}
			c := newCycler(l, f, func() float64 { return tt.cycle }, func() float64 { return l.Now() + tt.writes }, func(err error) { t.Fatal(err) })
			c.wake()
			for l.Step() {
			}
			if !near(f.at, tt.want) {
				t.Errorf("cycles at %v, want %v", f.at, tt.want)
			}
		})
	}
}

// TestCyclerBlocksAndWakes: with no head the loop waits in Heads; a head arriving later starts a
// cycle at once.
func TestCyclerBlocksAndWakes(t *testing.T) {
	l := des.New(0)
	f := &fakeKueue{loop: l}
	c := newCycler(l, f, func() float64 { return 0.5 }, l.Now, func(err error) { t.Fatal(err) })
	c.wake()
	if l.Pending() != 0 {
		t.Fatal("a cycle was scheduled without heads")
	}
	l.At(10, func() { f.heads = 1; c.wake() })
	for l.Step() {
	}
	if !near(f.at, []float64{10.5}) || !c.blocked {
		t.Fatalf("cycles at %v, blocked %v", f.at, c.blocked)
	}
	f.err = errors.New("boom")
	f.heads = 1
	failed := false
	c.fail = func(error) { failed = true }
	c.wake()
	for l.Step() {
	}
	if !failed {
		t.Error("a failing cycle was not reported")
	}
}

// TestCyclerSkipsRepeats: cycles that admit and write nothing, with nothing else happening, are
// skipped, and the loop is where it would have been: the same cycles at the same times around
// what happens next, and the same count of cycles in all.
func TestCyclerSkipsRepeats(t *testing.T) {
	type run struct {
		at      []float64 // times of the cycles run
		cycles  int64     // cycles run and skipped
		skipped int64
		end     float64
	}
	replay := func(skip bool, limit float64) run {
		l := des.New(0)
		f := &fakeKueue{loop: l, heads: 1 << 40}
		c := newCycler(l, f, func() float64 { return 0.0003 }, l.Now, func(err error) { t.Fatal(err) })
		if skip {
			c.unchanged, c.queued, c.heads = func() bool { return true }, func() int { return 1 }, func() string { return "" }
		}
		c.limit = limit
		c.wake()
		// Something happens at 2.5 (a cycle of its own at once), and the heads are gone at 7.
		l.At(2.5, func() { f.signals = []bool{keepGoing}; c.wake() })
		l.At(7, func() { f.heads = 0 })
		for {
			if next, ok := l.Next(); !ok || (limit > 0 && next > limit) {
				break
			}
			l.Step()
		}
		return run{at: f.at, cycles: int64(len(f.at)) + c.skipped, skipped: c.skipped, end: l.Now()}
	}
	for _, limit := range []float64{0, 5.55} {
		all, skipped := replay(false, limit), replay(true, limit)
		if skipped.skipped == 0 || skipped.cycles != all.cycles || skipped.end != all.end {
			t.Errorf("limit %g: %d cycles run and %d skipped, ending at %g; without skipping %d, ending at %g",
				limit, len(skipped.at), skipped.skipped, skipped.end, all.cycles, all.end)
		}
		// Every cycle run is one the loop without skips runs at that very time.
		i := 0
		for _, at := range skipped.at {
			for i < len(all.at) && all.at[i] != at {
				i++
			}
			if i == len(all.at) {
				t.Fatalf("limit %g: a cycle at %v that the loop without skips does not run", limit, at)
			}
		}
		// The cycle that sees what happened at 2.5 is run.
		if !slices.ContainsFunc(skipped.at, func(at float64) bool { return at >= 2.5 && at < 2.511 }) {
			t.Errorf("limit %g: no cycle run just after 2.5: %v", limit, skipped.at)
		}
	}
}
