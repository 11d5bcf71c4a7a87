// Package kueueclock shares a replay's trace clock with the local cluster's Kueue.
//
// kueuelab's Kueue (runtime/tools/patches/kueue-*-trace-clock.patch) reads its time from a file
// that it maps at start ($KUEUELAB_KUEUE_TRACE_CLOCK): while a replay runs, the file says where the
// trace clock is and how it moves, and Kueue's clock, its timers (the inadmissible-requeue batch,
// waitForPodsReady's timeout and backoff, every reconcile's RequeueAfter) and the times it writes
// follow it; otherwise Kueue runs on wall time. Kueue writes back its earliest timer, which the
// trace clock stops at, and the trace time through which its timers have fired and the work they
// queued has finished, which the trace clock waits for there. Kueue fires a timer only once the
// runner has released its time (wordRelease): the events of one instant happen in the trace
// clock's order (simclock.Order), Kueue's timers after the pods that end then. A Workload change
// may arm a timer (an admission, waitForPodsReady's timeout): the clock holds after each change
// the runner sees until Kueue's workload controller has taken it in and its controllers owe no
// work, and after a timer's work until the runner has seen the Workloads Kueue wrote
// (Follower.Saw, Follower.Observed). The two processes share the file's pages, so a move of the trace clock is
// in Kueue's next read of the time.
package kueueclock

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// Env names the file for Kueue.
const Env = "KUEUELAB_KUEUE_TRACE_CLOCK"

// The file's words (little-endian int64), as the patch lays them out.
const (
	wordSeq     = iota // runner: odd while the position is rewritten
	wordMode           // runner: 1 while a replay's trace clock runs
	wordEpoch          // runner: Unix ns of trace time 0
	wordNow            // runner: trace ns at wordBase
	wordBase           // runner: Unix ns at which the trace clock was at wordNow
	wordRate           // runner: float64 bits, trace ns per wall ns while moving, else 0
	wordCap            // runner: trace ns at which the moving clock stops
	wordNext           // Kueue: trace ns of its earliest timer, math.MaxInt64 when none
	wordDone           // Kueue: trace ns through which its timers have fired and their work finished
	wordRelease        // runner: trace ns through which Kueue may fire its timers
	wordSeen           // Kueue: the highest Workload resourceVersion its workload controller has taken in
	wordBusy           // Kueue: reconciles owed (queued or running) and fired timers whose work is not done
	wordWrote          // Kueue: the highest resourceVersion of a Workload it has written
	words
)

// Size is the file's size.
const Size = words * 8

// Create makes the file at path for a Kueue to start with: wall time until a replay attaches.
func Create(path string) error {
	b := make([]byte, Size)
	binary.LittleEndian.PutUint64(b[wordNext*8:], math.MaxInt64)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("kueue trace clock: %w", err)
	}
	return nil
}

// File is the runner's mapping of the file.
type File struct {
	mu sync.Mutex // one writer of the position

	// Informer handlers may still read the file while a run ends, so Close swaps the mapping for
	// a copy of its last words under mapMu instead of leaving a hole behind a reader.
	mapMu  sync.RWMutex
	mem    []byte
	mapped bool
}

// Open maps the file at path.
func Open(path string) (*File, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("kueue trace clock: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("kueue trace clock: %w", err)
	}
	if st.Size() < Size {
		return nil, fmt.Errorf("kueue trace clock %s: %d bytes, want %d", path, st.Size(), Size)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, Size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("kueue trace clock %s: mmap: %w", path, err)
	}
	return &File{mem: mem, mapped: true}, nil
}

// Close unmaps the file; reads and writes after it see the words as they were at Close and
// reach no process.
func (f *File) Close() error {
	f.mapMu.Lock()
	defer f.mapMu.Unlock()
	if !f.mapped {
		return nil
	}
	last := make([]int64, words)
	for i := range last {
		last[i] = atomic.LoadInt64(f.word(i))
	}
	err := syscall.Munmap(f.mem)
	f.mem = unsafe.Slice((*byte)(unsafe.Pointer(&last[0])), Size)
	f.mapped = false
	if err != nil {
		return fmt.Errorf("kueue trace clock: munmap: %w", err)
	}
	return nil
}

func (f *File) word(i int) *int64 { return (*int64)(unsafe.Pointer(&f.mem[i*8])) }

func (f *File) load(i int) int64 {
	f.mapMu.RLock()
	defer f.mapMu.RUnlock()
	return atomic.LoadInt64(f.word(i))
}

func (f *File) store(i int, v int64) {
	f.mapMu.RLock()
	defer f.mapMu.RUnlock()
	atomic.StoreInt64(f.word(i), v)
}

func ns(sec float64) int64 {
	if math.IsInf(sec, 1) || sec*1e9 >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(sec * 1e9))
}

// attach starts a replay: trace time 0 is Kueue's time epoch.
func (f *File) attach(epoch time.Time, p simclock.Position) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store(wordDone, -1)
	f.store(wordRelease, ns(p.Now))
	f.writeLocked(func() {
		f.store(wordEpoch, epoch.UnixNano())
		f.position(p)
		f.store(wordMode, 1)
	})
}

// detach returns Kueue to wall time.
func (f *File) detach() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeLocked(func() { f.store(wordMode, 0) })
}

func (f *File) publish(p simclock.Position) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeLocked(func() { f.position(p) })
}

func (f *File) writeLocked(write func()) {
	s := f.load(wordSeq)
	f.store(wordSeq, s+1)
	write()
	f.store(wordSeq, s+2)
}

func (f *File) position(p simclock.Position) {
	f.store(wordNow, ns(p.Now))
	f.store(wordBase, p.Base.UnixNano())
	f.store(wordRate, int64(math.Float64bits(p.Rate)))
	f.store(wordCap, ns(p.Cap))
}

// next is Kueue's earliest timer in trace seconds.
func (f *File) next() (float64, bool) {
	v := f.load(wordNext)
	if v == math.MaxInt64 {
		return 0, false
	}
	return float64(v) / 1e9, true
}

// done is the trace time through which Kueue has fired its timers and finished their work.
func (f *File) done() float64 { return float64(f.load(wordDone)) / 1e9 }

// caughtUp reports whether Kueue's workload controller has taken in the Workload change at
// resourceVersion rv and its controllers owe no work.
func (f *File) caughtUp(rv int64) bool { return f.load(wordSeen) >= rv && f.load(wordBusy) <= 0 }

// wrote is the resourceVersion of the newest Workload Kueue has written.
func (f *File) wrote() int64 { return f.load(wordWrote) }

// Follower is Kueue following a replay's clock.
type Follower struct {
	f       *File
	clk     *simclock.Clock
	settled func() // called once Kueue has done a timer's work: the Kueue settler's poke
	reached chan float64
	saw     chan struct{}

	mu               sync.Mutex
	timers, lateAcks int
	longestAck       time.Duration
	want             int64        // the newest Workload change Saw was told of
	observed         atomic.Int64 // the newest Workload change the runner has handled (Observed)
	holding          bool         // Saw's hold is placed
	seen             int          // holds placed by Saw
	lateSeen         int          // of which reached AckLimit
	epoch            time.Time    // trace time 0 on Kueue's clock
}

// seenKey is Saw's hold.
var seenKey = simclock.Key{Kind: simclock.KindKueue, ID: "workload-controller"}

// AckLimit bounds how long the clock waits at one of Kueue's timers for Kueue to say it has done
// its work; a wait that reaches it is counted (Stats.LateAcks) and the clock goes on.
const AckLimit = 10 * time.Second

// ackPoll is how often the follower reads Kueue's progress while the clock waits for it.
const ackPoll = 200 * time.Microsecond

// Attach makes Kueue follow clk from trace time 0 until ctx ends or Detach; settled is called
// (it may be nil) each time Kueue has done the work of the timers due, before the clock may move.
func Attach(ctx context.Context, f *File, clk *simclock.Clock, settled func()) *Follower {
	fl := &Follower{f: f, clk: clk, settled: settled, reached: make(chan float64, 1), saw: make(chan struct{}, 1)}
	// What Kueue wrote before the replay is not owed to it.
	fl.observed.Store(f.wrote())
	epoch := time.Now().Truncate(time.Second)
	fl.epoch = epoch
	f.attach(epoch, clk.Position())
	clk.Follow(fl)
	go fl.run(ctx)
	go fl.runSeen(ctx)
	return fl
}

// Epoch is trace time 0 on Kueue's clock: while Kueue follows, the times it writes are Epoch plus
// trace time.
func (fl *Follower) Epoch() time.Time { return fl.epoch }

// Revision is a resourceVersion as the etcd revision it is; ok is false for one that is not a
// number (an API server that is not etcd's), which the follower cannot order.
func Revision(rv string) (v int64, ok bool) {
	v, err := strconv.ParseInt(rv, 10, 64)
	return v, err == nil
}

// Saw holds the clock until Kueue's workload controller has taken in the Workload change at
// revision v (see Revision) and Kueue's controllers owe no work: an admission arms
// waitForPodsReady's timeout in that reconcile, and the clock must stop at it.
func (fl *Follower) Saw(v int64) {
	fl.mu.Lock()
	if v <= fl.want {
		fl.mu.Unlock()
		return
	}
	fl.want = v
	if fl.settledOn(v) {
		fl.mu.Unlock()
		return
	}
	if !fl.holding {
		fl.holding = true
		fl.seen++
		fl.clk.Hold(seenKey)
	}
	fl.mu.Unlock()
	select {
	case fl.saw <- struct{}{}:
	default:
	}
}

// Observed tells the follower that the runner has handled the Workload change at revision
// v (recorded its events, placed its holds): Kueue's writes up to v have been seen.
func (fl *Follower) Observed(v int64) {
	for {
		old := fl.observed.Load()
		if v <= old || fl.observed.CompareAndSwap(old, v) {
			return
		}
	}
}

// writesSeen reports whether the runner has handled every Workload Kueue has written.
func (fl *Follower) writesSeen() bool { return fl.f.wrote() <= fl.observed.Load() }

// settledOn reports whether Kueue has taken in the Workload change at rv, owes no work, and the
// runner has seen what Kueue wrote.
func (fl *Follower) settledOn(rv int64) bool { return fl.f.caughtUp(rv) && fl.writesSeen() }

// runSeen releases Saw's hold once Kueue has caught up, or after AckLimit.
func (fl *Follower) runSeen(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-fl.saw:
		}
		start := time.Now()
		for {
			fl.mu.Lock()
			want := fl.want
			fl.mu.Unlock()
			late := time.Since(start) > AckLimit
			if late || fl.settledOn(want) {
				fl.mu.Lock()
				if fl.want == want {
					if fl.holding && late {
						fl.lateSeen++
					}
					fl.holding = false
					fl.clk.Release(seenKey)
					fl.mu.Unlock()
					break
				}
				fl.mu.Unlock()
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(ackPoll):
			}
		}
	}
}

// Detach returns Kueue to wall time.
func (fl *Follower) Detach() {
	fl.clk.Follow(nil)
	fl.f.detach()
}

// Freeze stops following and leaves Kueue on the trace clock, standing still where it stopped:
// a replay that ends at a trace time leaves the cluster in the state there, and a Kueue back on
// wall time would fire the timers due by then (a waitForPodsReady timeout of pods the stopped
// agent no longer drives). The next replay's Attach takes Kueue up again.
func (fl *Follower) Freeze() {
	p := fl.clk.Position()
	fl.clk.Follow(nil)
	fl.f.publish(simclock.Position{Now: p.At(time.Now()), Base: time.Now(), Cap: math.Inf(1)})
}

// Publish implements simclock.Follower.
func (fl *Follower) Publish(p simclock.Position) { fl.f.publish(p) }

// Next implements simclock.Follower.
func (fl *Follower) Next() (float64, bool) { return fl.f.next() }

// Reached implements simclock.Follower: Kueue may fire its timers due by t.
func (fl *Follower) Reached(t float64) {
	fl.f.store(wordRelease, ns(t))
	select {
	case <-fl.reached:
	default:
	}
	fl.reached <- t
}

func (fl *Follower) run(ctx context.Context) {
	for {
		var t float64
		select {
		case <-ctx.Done():
			return
		case t = <-fl.reached:
		}
		start := time.Now()
		late := false
		for fl.f.done() < t-1e-9 || !fl.writesSeen() {
			if time.Since(start) > AckLimit {
				late = true
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(ackPoll):
			}
		}
		fl.mu.Lock()
		fl.timers++
		if late {
			fl.lateAcks++
		}
		fl.longestAck = max(fl.longestAck, time.Since(start))
		fl.mu.Unlock()
		if fl.settled != nil {
			fl.settled()
		}
		fl.clk.FollowerDone()
	}
}

// Stats is what following cost.
type Stats struct {
	// Timers counts the stops of the trace clock at Kueue's timers.
	Timers int
	// LateAcks counts the stops at which Kueue did not report its work done within AckLimit.
	LateAcks   int
	LongestAck time.Duration
	// Seen counts Saw's holds; LateSeen those that reached AckLimit before Kueue caught up.
	Seen, LateSeen int
}

// Stats reports the follower's stops.
func (fl *Follower) Stats() Stats {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return Stats{Timers: fl.timers, LateAcks: fl.lateAcks, LongestAck: fl.longestAck, Seen: fl.seen, LateSeen: fl.lateSeen}
}

// WaitFollowing waits until Kueue has taken up the trace clock (its timer loop reports progress
// on it every millisecond), at most timeout.
func (fl *Follower) WaitFollowing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for fl.f.load(wordDone) < 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("the local Kueue did not take up the trace clock within %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
