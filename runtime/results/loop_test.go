package results

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Events for the guard's tests: Object is "ns/" + the workload's name.
func lev(t float64, typ EventType, wl string) Event {
	return Event{T: t, Workload: wl, Type: typ, Object: "ns/" + wl}
}

func reserve(t float64, wls ...string) []Event {
	var out []Event
	for _, wl := range wls {
		out = append(out, lev(t, EvQuotaReserved, wl))
	}
	return out
}

// preempt is what both engines report of a victim: Evicted, then Preempted.
func preempt(t float64, wl string) []Event {
	return []Event{lev(t, EvEvicted, wl), lev(t, EvPreempted, wl)}
}

// requeue is the victim's quota released (Requeued), as after its pods stopped.
func requeue(t float64, wl string) []Event { return []Event{lev(t, EvRequeued, wl)} }

// round is one round of the storm case's loop (runtime/sim/storm_test.go), starting with a0 and e1 holding
// quota: p preempts e1, q (older, also borrowing) takes the freed quota, e1 reclaims it from q.
func round(t float64) []Event {
	return join(preempt(t, "e1"), requeue(t, "e1"), reserve(t+0.01, "q"),
		preempt(t+0.02, "q"), requeue(t+0.02, "q"), reserve(t+0.03, "e1"))
}

func join(parts ...[]Event) []Event {
	var out []Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// rounds repeats round n times from t, every dt seconds, with between(i) after round i.
func rounds(t, dt float64, n int, between func(i int, t float64) []Event) []Event {
	var out []Event
	for i := range n {
		out = append(out, round(t+float64(i)*dt)...)
		if between != nil {
			out = append(out, between(i, t+float64(i)*dt+dt/2)...)
		}
	}
	return out
}

func TestLoopGuard(t *testing.T) {
	start := reserve(0, "a0", "e1")
	// Horizons: the next change from outside Kueue an engine knows is coming, as of trace time now.
	far := func(float64) (float64, bool) { return 20000, true }
	at := func(h float64) func(float64) (float64, bool) { return func(float64) (float64, bool) { return h, true } }
	receding := func(now float64) (float64, bool) { return now + 1, true } // a loop member's own pod, restarted each round
	succeeded := func(t float64) []Event {
		return []Event{{T: t, Workload: "a0", Type: EvPodFinished, Object: "ns/a0-pod", Reason: "Succeeded"}}
	}
	cases := []struct {
		name    string
		horizon func(now float64) (float64, bool) // nil: the engine knows of none (the cluster's)
		events  []Event
		// loopOn is the preemption (1 for the first preempted event) that reports the loop, 0
		// for none; what is part of the error's text.
		loopOn int
		what   string
	}{
		{"A → B → A: the second round repeats the first", nil, join(start, rounds(20, 0.1, 2, nil)), 3,
			"workload e1 (Workload ns/e1) preempted from the same state at trace 20.000s and again at 20.100s"},
		{"one round is no loop", nil, join(start, round(20)), 0, ""},
		{"A → B → A with the next change from outside hours away", far, join(start, rounds(20, 0.1, 2, nil)), 3,
			"would come round 199799 times before the next change from outside Kueue, at trace 20000.000s"},
		{"A → B → A with trace time standing still", at(21), join(start, rounds(20, 0, 2, nil)), 3,
			"trace time stands still"},
		{"a burst of 430 rounds, 154 preemptions of e1 in 60 s, ended by a pod done when due", at(100 + 430*0.39),
			join(start, rounds(100, 0.39, 430, nil), succeeded(100+430*0.39), rounds(300, 0.39, 1, nil)), 0, ""},
		{"a loop whose due change keeps receding is ended after LoopMaxRounds", receding,
			join(start, rounds(100, 0.1, LoopMaxRounds+10, nil)), 2*LoopMaxRounds + 1,
			fmt.Sprintf("it came round %d times", LoopMaxRounds)},
		{"a storm of 200 preemptions of e1 in 20 s with progress every round (a workload created)", nil,
			join(start, rounds(100, 0.1, 200, func(i int, t float64) []Event {
				return []Event{lev(t, EvWorkloadCreated, fmt.Sprintf("n%d", i))}
			})), 0, ""},
		{"a storm with a pod done every round", nil,
			join(start, rounds(100, 0.1, 200, func(_ int, t float64) []Event { return succeeded(t) })), 0, ""},
		{"a preemptor evicted by waitForPodsReady and requeued after its backoff each round (the storm on Kueue v0.19)", nil,
			join(start, rounds(100, 0.1, 3, func(_ int, t float64) []Event {
				return []Event{{T: t, Workload: "p", Type: EvEvicted, Object: "ns/p", Reason: "PodsReadyTimeout"},
					{T: t, Workload: "p", Type: EvRequeued, Object: "ns/p", Reason: "BackoffFinished"}}
			})), 0, ""},
		{"pods stopped by the eviction are no progress", nil,
			join(start, rounds(100, 0.1, 2, func(_ int, t float64) []Event {
				return []Event{{T: t, Workload: "e1", Type: EvPodFinished, Object: "ns/e1-pod", Reason: "Evicted"},
					{T: t, Workload: "e1", Type: EvPodRunning, Object: "ns/e1-pod"}}
			})), 3, "workload e1 "},
		{"a storm of 200 preemptions of e1 in 20 s that never repeats a state (one more holder each round)", nil,
			join(start, rounds(100, 0.1, 200, func(i int, t float64) []Event {
				return reserve(t, fmt.Sprintf("x%d", i))
			})), 0, ""},
		{"the same victim from different holder sets", nil,
			join(start, preempt(1, "e1"), reserve(2, "e1", "b"), preempt(3, "e1"), reserve(4, "e1"), requeue(4, "b"),
				reserve(4, "c"), preempt(5, "e1")), 0, ""},
		{"different victims from the same holder set", nil,
			join(start, reserve(0, "e2"), preempt(1, "e1"), reserve(2, "e1"), preempt(3, "e2")), 0, ""},
		{"the same set reached in another order is the same state", nil,
			join(start, reserve(0, "e2"), preempt(1, "e1"), preempt(1, "e2"), reserve(2, "q"), preempt(3, "q"),
				reserve(4, "e2"), reserve(4, "e1"), preempt(5, "e1")),
			4, "workload e1 (Workload ns/e1) preempted from the same state at trace 1.000s and again at 5.000s"},
		{"a holder that let go and came back is the same state", nil, join(start, reserve(0, "f"), preempt(1, "e1"),
			reserve(2, "e1"), requeue(3, "f"), reserve(3, "f"), preempt(4, "e1")), 2, "workload e1 "},
		{"a holder gone is another state", nil, join(start, reserve(0, "f"), preempt(1, "e1"),
			reserve(2, "e1"), requeue(3, "f"), preempt(4, "e1")), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var g LoopGuard
			now := 0.0
			if tc.horizon != nil {
				g.Horizon = func() (float64, bool) { return tc.horizon(now) }
			}
			n, on := 0, 0
			var err error
			for i := range tc.events {
				now = tc.events[i].T
				if tc.events[i].Type == EvPreempted {
					n++
				}
				if err = g.Observe(&tc.events[i]); err != nil {
					on = n
					break
				}
			}
			if on != tc.loopOn {
				t.Fatalf("loop reported on preemption %d (%v), want %d", on, err, tc.loopOn)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrPreemptionLoop) || !strings.Contains(err.Error(), tc.what) {
				t.Errorf("error %q, want a %v naming %q", err, ErrPreemptionLoop, tc.what)
			}
		})
	}
}

// TestLoopGuardProgressClears: every kind of progress makes the next round a new one; the round
// after that, with nothing in between, is the loop again.
func TestLoopGuardProgressClears(t *testing.T) {
	progress := map[string]func(*LoopGuard){}
	for _, typ := range []EventType{EvSubmitted, EvSubmitFailed, EvWorkloadCreated, EvTrialCreated, EvFault,
		EvComponentRestarted, EvControlPlaneDown, EvControlPlaneReady} {
		progress[string(typ)] = func(g *LoopGuard) { _ = g.Observe(&Event{T: 50, Workload: "n", Type: typ}) }
	}
	progress["finished"] = func(g *LoopGuard) { _ = g.Observe(&Event{T: 50, Workload: "n", Type: EvFinished, Reason: "Succeeded"}) }
	progress["Finished"] = func(g *LoopGuard) { g.Finished("ns/n") }
	progress["Progress"] = func(g *LoopGuard) { g.Progress() }
	for name, p := range progress {
		t.Run(name, func(t *testing.T) {
			var g LoopGuard
			for _, e := range join(reserve(0, "a0", "e1"), round(20)) {
				if err := g.Observe(&e); err != nil {
					t.Fatal(err)
				}
			}
			p(&g)
			for _, e := range round(30) {
				if err := g.Observe(&e); err != nil {
					t.Fatalf("after %s: %v", name, err)
				}
			}
			var err error
			for _, e := range round(40) {
				if err = g.Observe(&e); err != nil {
					break
				}
			}
			if !strings.Contains(fmt.Sprint(err), "at trace 30.000s and again at 40.000s") {
				t.Fatalf("round after the next: %v, want the loop from 30 s", err)
			}
		})
	}
}

// TestLoopGuardMemory: a long run without progress that never repeats a state keeps at most
// loopMaxStates fingerprints, and holders that let go of quota are forgotten.
func TestLoopGuardMemory(t *testing.T) {
	var g LoopGuard
	for i := range 3 * loopMaxStates {
		wl := fmt.Sprintf("w%d", i)
		for _, e := range join(reserve(float64(i), wl), preempt(float64(i), wl)) {
			if err := g.Observe(&e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(g.seen) > loopMaxStates || len(g.holders) != 0 || g.sum != 0 {
		t.Fatalf("%d states, %d holders (sum %x) remembered", len(g.seen), len(g.holders), g.sum)
	}
}

// TestLoopGuardStall: preemptions that never return to one state (each victim new) end the run
// once StallSec of trace time has passed since the span without progress began (the first event
// after the last progress event: each victim's reservation, 1 s before its preemption), and not
// before; progress in between starts the span again.
func TestLoopGuardStall(t *testing.T) {
	// victims rotate through fresh names every 10 s from start: no fingerprint repeats.
	victims := func(start, end float64) []Event {
		var out []Event
		for tt := start; tt <= end; tt += 10 {
			v := fmt.Sprintf("v%.0f", tt)
			out = append(out, join(reserve(tt-1, v), preempt(tt, v), requeue(tt, v))...)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		events []Event
		want   string // "" none
	}{
		{"within the span", join(victims(10, 100)), ""},
		{"past it", join(victims(10, 130)), "in 101s of trace time, since trace 9.000s"},
		{"progress resets it", join(victims(10, 50), []Event{{T: 55, Type: EvPodFinished, Object: "ns/p", Reason: "Succeeded"}}, victims(60, 150)), ""},
		{"past it after progress", join(victims(10, 50), []Event{{T: 55, Type: EvSubmitted, Workload: "n"}}, victims(60, 170)), "in 101s of trace time, since trace 59.000s"},
		// Kueue's waitForPodsReady timers do no work: the span goes on.
		{"pods-ready timeout", join(victims(10, 50), []Event{{T: 55, Type: EvRequeued, Object: "ns/p", Reason: "PodsReadyTimeout"}}, victims(60, 130)), "in 101s of trace time, since trace 9.000s"},
		// A run resumed at 1,000 s counts from its first event (a reservation at 1,009 s).
		{"resumed", victims(1010, 1100), ""},
		{"resumed, past it", victims(1010, 1130), "in 101s of trace time, since trace 1009.000s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := LoopGuard{StallSec: 100}
			if !strings.HasPrefix(tc.name, "resumed") {
				_ = g.Observe(&Event{T: 0, Type: EvSubmitted, Workload: "first"})
			}
			var err error
			for _, e := range tc.events {
				if err = g.Observe(&e); err != nil {
					break
				}
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("ended: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrPreemptionLoop) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want a preemption loop %q", err, tc.want)
			}
		})
	}
	var g LoopGuard
	if g.Stall([]*Record{{IdealSec: 100}, {IdealSec: 200000}}); g.StallSec != 2000000 {
		t.Errorf("StallSec %g, want ten times the longest ideal run", g.StallSec)
	}
	if g.Stall([]*Record{{IdealSec: 100}}); g.StallSec != 7*24*3600 {
		t.Errorf("StallSec %g, want a week at least", g.StallSec)
	}
}

// TestLoopGuardStallKeptWork: work an engine reports kept (a checkpoint taken in a turn) starts
// the span without progress again at the next event, as Progress an engine reports does.
func TestLoopGuardStallKeptWork(t *testing.T) {
	for name, report := range map[string]func(*LoopGuard){"KeptWork": (*LoopGuard).KeptWork, "Progress": (*LoopGuard).Progress} {
		t.Run(name, func(t *testing.T) {
			g := LoopGuard{StallSec: 100}
			run := func(events ...[]Event) error {
				for _, e := range join(events...) {
					if err := g.Observe(&e); err != nil {
						return err
					}
				}
				return nil
			}
			_ = run(reserve(0, "a"), preempt(50, "a"))
			report(&g) // at 150 s, say: the next event (160 s) starts the span
			if err := run(reserve(160, "b"), preempt(170, "b"), reserve(200, "d"), preempt(250, "d")); err != nil {
				t.Fatalf("after %s: %v", name, err)
			}
			if err := run(reserve(255, "e"), preempt(261, "e")); err == nil || !strings.Contains(err.Error(), "since trace 160.000s") {
				t.Fatalf("at 261 s: %v, want the run ended, counted from 160 s", err)
			}
		})
	}
}
