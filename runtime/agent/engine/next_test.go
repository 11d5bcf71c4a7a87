package engine

import (
	"math"
	"testing"
)

// halfPod uses half an H100 node, so two fit without sharing GPUs.
func halfPod(key string, d float64) PodSpec {
	s := trainPod(key, d)
	s.CPURequest, s.GPURequest, s.CPUUnits, s.GPUUnits = 8, 4, 8*0.3*d, 4*0.95*d
	return s
}

// TestNextFinishJumps drives the engine the way an event loop does: tick exactly to NextFinish,
// start more work, predict again. Every pod finishes at the time it would when ticked in
// one-second steps (speeds change only at whole seconds here, so stepping is exact too), with the
// same energy.
func TestNextFinishJumps(t *testing.T) {
	run := func(jump bool) ([]Finished, float64) {
		f := newFixture(t, h100Node("a", 0), h100Node("capped", 500))
		f.pod(halfPod("ns/p1", 1000), "a")
		f.pod(halfPod("ns/p2", 400), "capped")
		g1, g2 := halfPod("ns/g-0", 300), halfPod("ns/g-1", 300)
		g1.GangID, g1.GangSize, g2.GangID, g2.GangSize = "ns/g", 2, "ns/g", 2
		f.pod(g1, "a")
		late := f.pod(g2, "")
		var done []Finished
		started := false
		for len(done) < 4 && f.e.Now() < 10000 {
			step := 1.0
			if jump {
				f.e.Tick(0) // speeds of the current state, which NextFinish reads
				at, ok := f.e.NextFinish()
				if !ok {
					t.Fatalf("no next finish at %g with %d done", f.e.Now(), len(done))
				}
				if !started {
					at = math.Min(at, 100) // the gang's second member starts at t=100
				}
				step = at - f.e.Now()
			}
			got := f.e.Tick(step)
			done = append(done, got...)
			if !started && f.e.Now() >= 100 {
				if err := f.e.Start(late, f.nodes["capped"]); err != nil {
					t.Fatal(err)
				}
				started = true
			}
		}
		return done, f.e.NodeEnergy(f.nodes["a"])
	}
	stepped, eStep := run(false)
	jumped, eJump := run(true)
	if len(stepped) != 4 || len(jumped) != 4 {
		t.Fatalf("finished %d stepping, %d jumping; want 4", len(stepped), len(jumped))
	}
	at := map[string]float64{}
	for _, f := range stepped {
		at[f.Key] = f.AtSec
	}
	for _, f := range jumped {
		if math.Abs(f.AtSec-at[f.Key]) > 1e-6 {
			t.Errorf("%s: finished at %.9f jumping, %.9f stepping", f.Key, f.AtSec, at[f.Key])
		}
	}
	// Stepping holds the node's CPU and platform power to the end of the one-second tick in which
	// a pod finishes; jumping ends that tick at the finish. Two pods finish on node a, so the
	// energies differ by less than two seconds of a busy node's CPU and platform power.
	if math.Abs(eJump-eStep) > 2000 {
		t.Errorf("node energy %.1f J jumping, %.1f J stepping", eJump, eStep)
	}
}

func TestNextFinishIdleAndBlocked(t *testing.T) {
	f := newFixture(t, h100Node("a", 0))
	if _, ok := f.e.NextFinish(); ok {
		t.Error("NextFinish on an idle engine")
	}
	s := trainPod("ns/g-0", 100)
	s.GangID, s.GangSize = "ns/g", 2
	f.pod(s, "a")
	f.e.Tick(0)
	if at, ok := f.e.NextFinish(); ok {
		t.Errorf("NextFinish %g for a gang waiting for its second member", at)
	}
	f.e.Tick(10)
	if st := f.e.Stats(); st.GangBlocked != 1 {
		t.Errorf("stats %+v after NextFinish and a tick", st)
	}
}
