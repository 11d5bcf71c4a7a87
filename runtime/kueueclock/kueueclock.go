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
// clock's order (simclock.Order), Kueue's timers after the pods that end then. The two processes
// share the file's pages, so a move of the trace clock is in Kueue's next read of the time.
package kueueclock

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
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
	mem []byte
	mu  sync.Mutex // one writer of the position
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
	return &File{mem: mem}, nil
}

// Close unmaps the file.
func (f *File) Close() error { return syscall.Munmap(f.mem) }

func (f *File) word(i int) *int64    { return (*int64)(unsafe.Pointer(&f.mem[i*8])) }
func (f *File) load(i int) int64     { return atomic.LoadInt64(f.word(i)) }
func (f *File) store(i int, v int64) { atomic.StoreInt64(f.word(i), v) }

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

// Follower is Kueue following a replay's clock.
type Follower struct {
	f       *File
	clk     *simclock.Clock
	settled func() // called once Kueue has done a timer's work: the Kueue settler's poke
	reached chan float64

	mu               sync.Mutex
	timers, lateAcks int
	longestAck       time.Duration
}

// AckLimit bounds how long the clock waits at one of Kueue's timers for Kueue to say it has done
// its work; a wait that reaches it is counted (Stats.LateAcks) and the clock goes on.
const AckLimit = 10 * time.Second

// ackPoll is how often the follower reads Kueue's progress while the clock waits for it.
const ackPoll = 200 * time.Microsecond

// Attach makes Kueue follow clk from trace time 0 until ctx ends or Detach; settled is called
// (it may be nil) each time Kueue has done the work of the timers due, before the clock may move.
func Attach(ctx context.Context, f *File, clk *simclock.Clock, settled func()) *Follower {
	fl := &Follower{f: f, clk: clk, settled: settled, reached: make(chan float64, 1)}
	epoch := time.Now().Truncate(time.Second)
	f.attach(epoch, clk.Position())
	clk.Follow(fl)
	go fl.run(ctx)
	return fl
}

// Detach returns Kueue to wall time.
func (fl *Follower) Detach() {
	fl.clk.Follow(nil)
	fl.f.detach()
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
		for fl.f.done() < t-1e-9 {
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
}

// Stats reports the follower's stops.
func (fl *Follower) Stats() Stats {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return Stats{Timers: fl.timers, LateAcks: fl.lateAcks, LongestAck: fl.longestAck}
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
