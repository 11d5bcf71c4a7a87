package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kueuelab/kueuelab/model/fault"
)

func costlyPod(key string, d, every, cost float64) PodSpec {
	s := trainPod(key, d)
	s.CheckpointIntervalSec, s.CheckpointCostSec = every, cost
	return s
}

// TestCheckpointsCostAPause: an hour of work checkpointing every 10 minutes at 30 s a checkpoint
// takes the five checkpoints before its end (none at the end) and finishes at 3600 + 5·30 s,
// whatever the tick size; NextFinish predicts it from the start; the pauses are counted and draw
// idle GPU power.
func TestCheckpointsCostAPause(t *testing.T) {
	const d, every, cost = 3600.0, 600.0, 30.0
	want := d + float64(fault.Checkpoints(d, every))*cost
	if want != 3750 {
		t.Fatalf("fault.Checkpoints: want 5 checkpoints, got %g s", want)
	}
	for _, dt := range []float64{0.7, 7, 29, 30, 600, 631, 5000} {
		f := newFixture(t, h100Node("n", 0))
		id := f.pod(costlyPod("ns/p", d, every, cost), "n")
		f.e.Tick(0)
		if at, ok := f.e.NextFinish(); !ok || math.Abs(at-want) > 1e-9*want {
			t.Fatalf("dt %g: NextFinish = %g, %v; want %g", dt, at, ok, want)
		}
		done := f.runUntil(dt, 2*want)
		if len(done) != 1 || math.Abs(done[0].AtSec-want) > 1e-9*want {
			t.Fatalf("dt %g: finished %+v, want at %g", dt, done, want)
		}
		s := f.e.Snapshot(id)
		if s.Checkpoints != 5 || math.Abs(s.CheckpointPauseSec-5*cost) > 1e-9 || s.RestartPauseSec != 0 || s.LostSec != 0 {
			t.Errorf("dt %g: snapshot %+v, want 5 checkpoints, 150 s paused", dt, s)
		}
	}
	// Energy: the same work without the checkpoint cost, plus 150 s at the paused power.
	f := newFixture(t, h100Node("n", 0))
	free := f.pod(trainPod("ns/free", d), "n")
	f.e.Tick(0)
	runW, pauseW := f.e.pods[free].runW(), f.e.pods[free].pauseW()
	g := newFixture(t, h100Node("n", 0))
	g.pod(costlyPod("ns/p", d, every, cost), "n")
	done := g.runUntil(13, 2*want)
	if e := runW*d + pauseW*5*cost; math.Abs(done[0].EnergyJ-e) > 1e-9*e {
		t.Errorf("energy %g J, want %g J (running %g W, paused %g W)", done[0].EnergyJ, e, runW, pauseW)
	}
	if !(pauseW < runW) {
		t.Errorf("paused power %g W not below running power %g W", pauseW, runW)
	}
	// An event-driven engine (the sim's) predicts and reaches the same finish in one advance, with
	// the same checkpoints and energy.
	ev := NewEventDriven(catalog(t))
	n, _ := ev.AddNode(h100Node("n", 0))
	id, err := ev.AddPod(costlyPod("ns/p", d, every, cost))
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Start(id, n); err != nil {
		t.Fatal(err)
	}
	if at, ok := ev.NextFinish(); !ok || math.Abs(at-want) > 1e-9*want {
		t.Fatalf("event-driven: NextFinish = %g, %v; want %g", at, ok, want)
	}
	done = ev.AdvanceTo(2 * want)
	if len(done) != 1 || math.Abs(done[0].AtSec-want) > 1e-9*want {
		t.Fatalf("event-driven: finished %+v, want at %g", done, want)
	}
	if s := ev.Snapshot(id); s.Checkpoints != 5 || math.Abs(s.CheckpointPauseSec-5*cost) > 1e-9 {
		t.Errorf("event-driven: snapshot %+v, want 5 checkpoints, 150 s paused", s)
	}
	if e := runW*d + pauseW*5*cost; math.Abs(done[0].EnergyJ-e) > 1e-9*e {
		t.Errorf("event-driven: energy %g J, want %g J", done[0].EnergyJ, e)
	}
}

// TestRewindToLastCheckpoint: a crash throws away the work since the last checkpoint that counts
// (a checkpoint being written does not count), and the restart's pause delays the finish.
func TestRewindToLastCheckpoint(t *testing.T) {
	const d, every, cost = 3600.0, 600.0, 30.0
	tests := []struct {
		name          string
		crashAt       float64
		wantRemaining float64
		wantLost      float64
	}{
		// 600 s of work, 30 s checkpoint (valid at 630), 370 s more.
		{"after a checkpoint", 1000, 3000, 370},
		// The checkpoint started at 600 is still being written at 610: back to zero.
		{"during a checkpoint", 610, 3600, 600},
		{"before the first", 300, 3600, 300},
	}
	for _, tt := range tests {
		f := newFixture(t, h100Node("n", 0))
		id := f.pod(costlyPod("ns/p", d, every, cost), "n")
		for f.e.Now() < tt.crashAt {
			f.e.Tick(math.Min(7, tt.crashAt-f.e.Now()))
		}
		if lost := f.e.Rewind(id); math.Abs(lost-tt.wantLost) > 1e-6 {
			t.Errorf("%s: lost %g s, want %g", tt.name, lost, tt.wantLost)
		}
		f.e.Pause(id, 120)
		s := f.e.Snapshot(id)
		if math.Abs(s.RemainingSec-tt.wantRemaining) > 1e-6 || math.Abs(s.LostSec-tt.wantLost) > 1e-6 || s.PauseSec != 120 {
			t.Errorf("%s: snapshot %+v", tt.name, s)
		}
		// Restart pause, the rest of the work, its checkpoints.
		want := tt.crashAt + 120 + tt.wantRemaining + float64(fault.Checkpoints(tt.wantRemaining, every))*cost
		f.e.Tick(0)
		if at, _ := f.e.NextFinish(); math.Abs(at-want) > 1e-6 {
			t.Errorf("%s: NextFinish %g, want %g", tt.name, at, want)
		}
		done := f.runUntil(11, 3*d)
		if len(done) != 1 || math.Abs(done[0].AtSec-want) > 1e-6 {
			t.Errorf("%s: finished %+v, want at %g", tt.name, done, want)
		}
		if s := f.e.Snapshot(id); math.Abs(s.RestartPauseSec-120) > 1e-9 {
			t.Errorf("%s: restart pause %g, want 120", tt.name, s.RestartPauseSec)
		}
	}
	// Without checkpoints a rewind goes back to zero and loses everything done.
	f := newFixture(t, h100Node("n", 0))
	id := f.pod(trainPod("ns/p", 100), "n")
	f.e.Tick(40)
	if lost := f.e.Rewind(id); lost != 40 || f.e.Snapshot(id).RemainingSec != 100 {
		t.Errorf("no checkpoints: lost %g, snapshot %+v", lost, f.e.Snapshot(id))
	}
}

// TestGangRollsBackTogether: members of a gang rolled back at a crash share the restart pause,
// which elapses only once the whole gang runs again; the gang then resumes from its checkpoint.
func TestGangRollsBackTogether(t *testing.T) {
	const d, every, cost = 2000.0, 500.0, 10.0
	f := newFixture(t, h100Node("a", 0), h100Node("b", 0))
	mk := func(key string) PodSpec {
		s := costlyPod(key, d, every, cost)
		s.GangID, s.GangSize = "ns/w", 2
		return s
	}
	a, b := f.pod(mk("ns/w-0"), "a"), f.pod(mk("ns/w-1"), "b")
	for f.e.Now() < 800 {
		f.e.Tick(10)
	}
	// Checkpoint at 500 s of work (valid at 510); at 800: 290 s since.
	f.e.Stop(b) // b's node died: the gang stops
	f.e.Tick(100)
	if s := f.e.Snapshot(a); math.Abs(s.RemainingSec-(d-790)) > 1e-9 {
		t.Fatalf("a progressed without its gang: %+v", s)
	}
	// b is replaced: a rolls back to the checkpoint; the replacement restores it; both pause.
	if lost := f.e.Rewind(a); math.Abs(lost-290) > 1e-9 {
		t.Errorf("a lost %g s, want 290", lost)
	}
	f.e.Remove(b)
	b2 := f.pod(mk("ns/w-1b"), "")
	if err := f.e.Restore(b2, Snapshot{RemainingSec: d - 500, CheckpointSec: d - 500}); err != nil {
		t.Fatal(err)
	}
	f.e.Pause(a, 60)
	f.e.Pause(b2, 60)
	f.e.Tick(200) // the replacement is pending: nothing elapses
	if s := f.e.Snapshot(a); s.PauseSec != 60 || s.RemainingSec != d-500 {
		t.Fatalf("pause elapsed while the gang was incomplete: %+v", s)
	}
	if err := f.e.Start(b2, f.nodes["b"]); err != nil {
		t.Fatal(err)
	}
	at := f.e.Now() // 1100
	want := at + 60 + (d - 500) + float64(fault.Checkpoints(d-500, every))*cost
	var done []Finished
	for len(done) < 2 && f.e.Now() < 5*d {
		done = append(done, f.e.Tick(9)...)
	}
	if len(done) != 2 || math.Abs(done[0].AtSec-want) > 1e-6 || math.Abs(done[1].AtSec-want) > 1e-6 {
		t.Errorf("gang finished %+v, want both at %g", done, want)
	}
}

// TestPausesKeepEnergyIntegral: with checkpoint and restart pauses on the way, a pod alone on a
// node keeps the node's energy equal to its own (it is attributed all of the node's power and
// uses every GPU) whatever the ticks, and NextFinish stays what the ticks produce.
func TestPausesKeepEnergyIntegral(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 20 {
		f := newFixture(t, h100Node("n", 0))
		d := 500 + rng.Float64()*5000
		every, cost := 50+rng.Float64()*500, rng.Float64()*60
		id := f.pod(costlyPod("ns/p", d, every, cost), "n")
		var crash float64
		if round%2 == 1 {
			crash = rng.Float64() * d
		}
		f.e.Tick(0)
		predicted, _ := f.e.NextFinish()
		var done []Finished
		for len(done) == 0 && f.e.Now() < 10*d {
			if crash > 0 && f.e.Now() >= crash {
				f.e.Rewind(id)
				f.e.Pause(id, 90)
				crash = 0
				f.e.Tick(0)
				predicted, _ = f.e.NextFinish()
			}
			dt := rng.Float64() * 300
			if n, ok := f.e.NextFinish(); ok && f.e.Now()+dt > n {
				dt = n - f.e.Now() // land on the predicted finish, as the agent's alarm does
			}
			done = f.e.Tick(dt)
		}
		if len(done) != 1 || math.Abs(done[0].AtSec-predicted) > 1e-6*predicted {
			t.Fatalf("round %d: finished %+v, predicted %g", round, done, predicted)
		}
		if node := f.e.NodeEnergy(f.nodes["n"]); math.Abs(node-done[0].EnergyJ) > 1e-9*node {
			t.Errorf("round %d: node energy %g J, the pod's %g J", round, node, done[0].EnergyJ)
		}
	}
}
