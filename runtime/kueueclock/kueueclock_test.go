package kueueclock

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// TestLayoutMatchesThePatch reads the word layout out of the Kueue patch that maps the same file:
// the two sides must agree word for word.
func TestLayoutMatchesThePatch(t *testing.T) {
	paths, err := filepath.Glob("../tools/patches/kueue-*-trace-clock.patch")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no trace-clock patch: %v", err)
	}
	want := []string{"Seq", "Mode", "Epoch", "Now", "Base", "Rate", "Cap", "Next", "Done", "Release", "Seen", "Busy", "Wrote"}
	if words != len(want) {
		t.Fatalf("%d words here, the test knows %d", words, len(want))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?s)\+\tWordSeq\s+= iota.*?\+\tWords\n`).Find(b)
		if m == nil {
			t.Fatalf("%s: no word list", p)
		}
		var got []string
		for _, w := range regexp.MustCompile(`\+\tWord(\w+)`).FindAllSubmatch(m, -1) {
			if string(w[1]) != "s" {
				got = append(got, string(w[1]))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s lays out %v, this package %v", p, got, want)
		}
		if !strings.Contains(string(b), `+const Env = "`+Env+`"`) {
			t.Errorf("%s: Kueue reads another variable than %s", p, Env)
		}
	}
}

// kueue plays the patched Kueue's side of the file: it reads the position as the patch does and
// writes its earliest timer and its progress.
type kueue struct{ f *File }

func (k kueue) now(w time.Time) float64 {
	p := simclock.Position{Now: float64(k.f.load(wordNow)) / 1e9, Base: time.Unix(0, k.f.load(wordBase)),
		Rate: math.Float64frombits(uint64(k.f.load(wordRate))), Cap: float64(k.f.load(wordCap)) / 1e9}
	return p.At(w)
}

// newFile is a new clock file, mapped until the test ends.
func newFile(t *testing.T) *File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clock")
	if err := Create(path); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func TestFollowerStopsAtKueueTimersAndWaitsForItsWork(t *testing.T) {
	f := newFile(t)
	k := kueue{f}
	if f.load(wordMode) != 0 || f.load(wordNext) != math.MaxInt64 {
		t.Fatalf("a new file must mean wall time and no timer: mode %d next %d", f.load(wordMode), f.load(wordNext))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := simclock.New(simclock.Options{})
	settled := make(chan struct{}, 10)
	fl := Attach(ctx, f, clk, func() { settled <- struct{}{} })
	if f.load(wordMode) != 1 || f.load(wordEpoch)%int64(time.Second) != 0 {
		t.Fatalf("mode %d epoch %d: want following, from a whole second", f.load(wordMode), f.load(wordEpoch))
	}
	f.store(wordDone, 0) // Kueue's timer loop has taken the clock up
	if err := fl.WaitFollowing(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if got := f.load(wordRelease); got != 0 {
		t.Fatalf("release %d at attach, want 0", got)
	}
	f.store(wordNext, 1860e9) // a PodsReady timeout at 1,860 s
	end := clk.NewAlarm("end", simclock.OrderSubmission)
	end.Set(3600)
	clk.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for clk.Now() < 1860 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	// Kueue has not reported its work done at 1,860: the clock cannot move on before it has.
	if got := clk.Now(); got != 1860 {
		t.Fatalf("clock at %g, want it to wait at Kueue's timer, 1860", got)
	}
	if got := k.now(time.Now()); got != 1860 {
		t.Fatalf("Kueue reads %g, want 1860", got)
	}
	if got := f.load(wordRelease); got != 1860e9 {
		t.Fatalf("Kueue may fire its timers through %d ns, want 1860e9", got)
	}
	if len(settled) != 0 {
		t.Fatal("settled before Kueue was done")
	}
	f.store(wordNext, math.MaxInt64)
	f.store(wordDone, 1860e9)
	select {
	case <-end.C():
	case <-time.After(10 * time.Second):
		t.Fatalf("the clock did not go on once Kueue was done (now %g)", clk.Now())
	}
	if len(settled) != 1 || k.now(time.Now()) != 3600 {
		t.Fatalf("settled %d times, Kueue reads %g; want 1 and 3600", len(settled), k.now(time.Now()))
	}
	if st := fl.Stats(); st.Timers != 1 || st.LateAcks != 0 {
		t.Fatalf("stats %+v, want one timer, no late ack", st)
	}
	end.Done()
	fl.Detach()
	if f.load(wordMode) != 0 {
		t.Fatal("Kueue still follows after Detach")
	}
}

func TestWaitFollowingNamesAKueueThatDoesNot(t *testing.T) {
	f := newFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fl := Attach(ctx, f, simclock.New(simclock.Options{}), nil)
	if err := fl.WaitFollowing(ctx, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not take up the trace clock") {
		t.Fatalf("err = %v, want the Kueue that does not follow named", err)
	}
}

func TestOpenRefusesAShortFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	if err := os.WriteFile(path, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("want %d", Size)) {
		t.Fatalf("err = %v, want the size named", err)
	}
}

// TestSawHoldsUntilKueueTookTheChangeIn: after a Workload change the clock holds until Kueue's
// workload controller has taken in that resource version, no reconcile is owed and the runner has
// handled every Workload Kueue wrote; a change Kueue has already taken in places no hold, and
// neither does a resource version that is not a number.
func TestSawHoldsUntilKueueTookTheChangeIn(t *testing.T) {
	f := newFile(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := simclock.New(simclock.Options{})
	fl := Attach(ctx, f, clk, nil)
	f.store(wordDone, 0)
	held := func() bool { return clk.Held(seenKey) }
	await := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 5s: %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}

	f.store(wordSeen, 100)
	fl.Saw(100)
	if held() {
		t.Fatal("held for a change Kueue has taken in")
	}
	if _, ok := Revision("not-a-number"); ok {
		t.Fatal("a resource version that is not a number taken for a revision")
	}
	if v, ok := Revision("120"); !ok || v != 120 {
		t.Fatalf("Revision(\"120\") = %d, %v", v, ok)
	}

	fl.Saw(120)
	if !held() {
		t.Fatal("no hold for a change Kueue has not taken in")
	}
	f.store(wordBusy, 1) // Kueue has queued the reconcile
	f.store(wordSeen, 120)
	time.Sleep(10 * ackPoll)
	if !held() {
		t.Fatal("released while the reconcile is owed")
	}
	fl.Saw(130) // a newer change while the first is held
	f.store(wordBusy, 0)
	time.Sleep(10 * ackPoll)
	if !held() {
		t.Fatal("released before Kueue took the newer change in")
	}
	f.store(wordSeen, 131)
	await("the hold released once Kueue caught up", func() bool { return !held() })

	// Kueue wrote a Workload (an eviction) the runner has not handled yet.
	f.store(wordWrote, 140)
	fl.Saw(135)
	if !held() {
		t.Fatal("no hold while Kueue's write is unseen")
	}
	f.store(wordSeen, 140)
	time.Sleep(10 * ackPoll)
	if !held() {
		t.Fatal("released before the runner handled Kueue's write")
	}
	fl.Observed(140)
	await("the hold released once the runner handled the write", func() bool { return !held() })
	if st := fl.Stats(); st.Seen != 2 || st.LateSeen != 0 {
		t.Errorf("stats %+v, want two waits, none late", st)
	}
}

// An informer handler may still ask the follower about a Workload while the run that mapped the
// file closes it: the read must see the last words, not fault on an unmapped page.
func TestReadsDuringCloseSeeTheLastWords(t *testing.T) {
	for range 50 {
		f := newFile(t)
		f.store(wordSeen, 7)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for range 2000 {
					if !f.caughtUp(7) {
						t.Error("a read during Close lost the words")
						return
					}
				}
			}()
		}
		close(start)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := f.Close(); err != nil {
			t.Fatalf("a second Close: %v", err)
		}
		if got := f.load(wordSeen); got != 7 {
			t.Fatalf("after Close: seen %d, want the last word 7", got)
		}
	}
}
