package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// scenario is a random workload on a few nodes: pods (some in gangs, some over-subscribing a
// node, some failing part way, some checkpointing) started at random times, some evicted or
// removed later, and a cap change. A faulty scenario's checkpoints also cost a pause, and some
// running pods crash (Rewind to the last checkpoint, then Pause for the restart), as the agent
// does on a fault.
type scenario struct {
	nodes []NodeSpec
	pods  []PodSpec
	acts  []action
}

type action struct {
	at   float64
	kind string // start, evict, remove, cap, crash
	pod  int
	node int
	capW float64
}

func randomScenario(seed uint64, faulty bool) scenario {
	r := rand.New(rand.NewPCG(seed, 7))
	var fr *rand.Rand // a separate stream: the faulty draws leave the others as they were
	if faulty {
		fr = rand.New(rand.NewPCG(seed, 15))
	}
	var sc scenario
	for i := range 4 {
		capW := 0.0
		if i == 3 {
			capW = 450
		}
		sc.nodes = append(sc.nodes, NodeSpec{Name: fmt.Sprintf("n%d", i), GPUFamily: "H100-SXM", GPUs: 8, CPUModel: "2xEPYC-9654", GPUCapW: capW})
	}
	gang := 0
	for i := 0; i < 24; {
		d := 50 + r.Float64()*500
		start := float64(r.IntN(400))
		size := 1
		if r.IntN(3) == 0 {
			size = 2 + r.IntN(3)
			gang++
		}
		for k := range size {
			s := PodSpec{Key: fmt.Sprintf("ns/p%d", i), WorkloadID: fmt.Sprintf("w%d", i-k), DurationSec: d,
				CPURequest: float64(4 + r.IntN(40)), GPURequest: 1 + r.IntN(4), Profile: training,
				Sensitivity: Sensitivity{CPU: r.Float64(), GPU: r.Float64()}}
			s.CPUUnits, s.GPUUnits = s.CPURequest*0.3*d, float64(s.GPURequest)*0.95*d
			if size > 1 {
				s.GangID, s.GangSize = fmt.Sprintf("ns/g%d", gang), size
			}
			if r.IntN(8) == 0 {
				s.FailAtFraction = 0.2 + 0.6*r.Float64()
			}
			if r.IntN(4) == 0 {
				s.CheckpointIntervalSec = 30
				if faulty {
					s.CheckpointCostSec = 1 + 10*fr.Float64()
				}
			}
			if faulty && fr.IntN(3) == 0 {
				s.CheckpointIntervalSec, s.CheckpointCostSec = 20+40*fr.Float64(), 1+10*fr.Float64()
			}
			sc.pods = append(sc.pods, s)
			// Gang members start up to 60 s apart: the gang waits for the last.
			sc.acts = append(sc.acts, action{at: start + float64(r.IntN(60)*k), kind: "start", pod: i, node: r.IntN(4)})
			i++
		}
	}
	for range 3 {
		p := r.IntN(len(sc.pods))
		sc.acts = append(sc.acts, action{at: float64(100 + r.IntN(500)), kind: "evict", pod: p})
	}
	sc.acts = append(sc.acts, action{at: float64(200 + r.IntN(100)), kind: "remove", pod: r.IntN(len(sc.pods))})
	sc.acts = append(sc.acts, action{at: 300, kind: "cap", node: 0, capW: 500})
	if faulty {
		for range 6 {
			sc.acts = append(sc.acts, action{at: float64(50 + fr.IntN(600)), kind: "crash", pod: fr.IntN(len(sc.pods)), capW: 5 + 20*fr.Float64()})
		}
	}
	sort.SliceStable(sc.acts, func(i, j int) bool { return sc.acts[i].at < sc.acts[j].at })
	return sc
}

type outcome struct {
	finished map[string]Finished
	nodeJ    []float64
	lost     float64
}

// play runs a scenario on an engine. A ticked engine jumps exactly to every action and every
// predicted finish (NextFinish), which makes ticks exact; an event-driven one advances to every
// action only.
func play(t *testing.T, e *Engine, sc scenario, event bool) outcome {
	t.Helper()
	out := outcome{finished: map[string]Finished{}}
	var nids []NodeID
	for _, n := range sc.nodes {
		id, err := e.AddNode(n)
		if err != nil {
			t.Fatal(err)
		}
		nids = append(nids, id)
	}
	ids := map[int]PodID{}
	removed := map[int]bool{}
	record := func(fs []Finished) {
		for _, f := range fs {
			if _, dup := out.finished[f.Key]; dup {
				t.Fatalf("%s finished twice", f.Key)
			}
			out.finished[f.Key] = f
		}
	}
	advance := func(to float64) {
		if event {
			record(e.AdvanceTo(to))
			return
		}
		for e.Now() < to {
			step := to - e.Now()
			e.Tick(0) // speeds of the current state, which NextFinish reads
			if at, ok := e.NextFinish(); ok && at < to {
				step = at - e.Now()
			}
			if at := nextPause(e); at < e.Now()+step {
				step = at - e.Now()
			}
			record(e.Tick(step))
		}
	}
	for _, a := range sc.acts {
		advance(a.at)
		switch a.kind {
		case "start":
			id, err := e.AddPod(sc.pods[a.pod])
			if err != nil {
				t.Fatal(err)
			}
			ids[a.pod] = id
			if err := e.Start(id, nids[a.node]); err != nil {
				t.Fatal(err)
			}
		case "evict":
			if id, ok := ids[a.pod]; ok && !removed[a.pod] {
				if _, done := out.finished[sc.pods[a.pod].Key]; !done {
					e.Evict(id)
				}
			}
		case "remove":
			if id, ok := ids[a.pod]; ok && !removed[a.pod] {
				e.Remove(id)
				removed[a.pod] = true
			}
		case "cap":
			e.SetGPUCap(nids[a.node], a.capW)
		case "crash":
			// What the agent does when a pod of a running workload fails: the pod rolls back
			// and pays the restart overhead (capW holds the overhead here).
			if id, ok := ids[a.pod]; ok && !removed[a.pod] {
				if _, done := out.finished[sc.pods[a.pod].Key]; !done {
					out.lost += e.Rewind(id)
					e.Pause(id, a.capW)
				}
			}
		}
	}
	advance(5000)
	for _, id := range nids {
		out.nodeJ = append(out.nodeJ, e.NodeEnergy(id))
	}
	return out
}

// nextPause is when a pause of a ticked engine's running pod begins or ends, as of the last Tick:
// a tick ends there to be exact (within a tick a gang shares only the pauses it had at the start).
func nextPause(e *Engine) float64 {
	t := math.Inf(1)
	for i := range e.pods {
		p := &e.pods[i]
		if !p.inUse || !p.running || p.done || !(p.speed > 0) {
			continue
		}
		switch {
		case p.pause > 0:
			t = math.Min(t, e.now+p.pause)
		case p.costly():
			t = math.Min(t, e.now+math.Max(p.ckptEvery-p.sinceCkpt, 0))
		}
	}
	return t
}

// TestEventDrivenMatchesExactTicks: the event-driven engine reproduces a ticked engine whose ticks
// end at every change and every finish — same pods finished, same times, same energies.
// A faulty scenario adds checkpoints that cost a pause and crashes (rewind and restart pause).
func TestEventDrivenMatchesExactTicks(t *testing.T) {
	for _, faulty := range []bool{false, true} {
		t.Run(fmt.Sprintf("faulty=%v", faulty), func(t *testing.T) { eventMatchesTicks(t, faulty) })
	}
}

func eventMatchesTicks(t *testing.T, faulty bool) {
	for seed := range uint64(20) {
		sc := randomScenario(seed, faulty)
		ticked := play(t, New(catalog(t)), sc, false)
		event := play(t, NewEventDriven(catalog(t)), sc, true)
		if len(ticked.finished) != len(event.finished) || len(event.finished) == 0 {
			t.Fatalf("seed %d: %d finished ticked, %d event-driven", seed, len(ticked.finished), len(event.finished))
		}
		for k, f := range ticked.finished {
			g, ok := event.finished[k]
			if !ok {
				t.Fatalf("seed %d: %s finished ticked only", seed, k)
			}
			if math.Abs(f.AtSec-g.AtSec) > 1e-6 || f.Failed != g.Failed || math.Abs(f.EnergyJ-g.EnergyJ) > 1e-6*math.Max(1, f.EnergyJ) {
				t.Errorf("seed %d %s: ticked at %.9f (%.3f J, failed %v), event-driven at %.9f (%.3f J, failed %v)",
					seed, k, f.AtSec, f.EnergyJ, f.Failed, g.AtSec, g.EnergyJ, g.Failed)
			}
		}
		if math.Abs(ticked.lost-event.lost) > 1e-6*math.Max(1, ticked.lost) {
			t.Errorf("seed %d: rewinds lost %.9f s ticked, %.9f s event-driven", seed, ticked.lost, event.lost)
		}
		for i := range ticked.nodeJ {
			if math.Abs(ticked.nodeJ[i]-event.nodeJ[i]) > 1e-6*ticked.nodeJ[i] {
				t.Errorf("seed %d node %d: %.3f J ticked, %.3f J event-driven", seed, i, ticked.nodeJ[i], event.nodeJ[i])
			}
		}
	}
}

// TestEventDrivenNextFinishAndStats covers the reads of an event-driven engine.
func TestEventDrivenNextFinishAndStats(t *testing.T) {
	e := NewEventDriven(catalog(t))
	n, _ := e.AddNode(h100Node("a", 0))
	if _, ok := e.NextFinish(); ok {
		t.Fatal("NextFinish on an idle engine")
	}
	s := halfPod("ns/g-0", 100)
	s.GangID, s.GangSize = "ns/g", 2
	g0, _ := e.AddPod(s)
	if err := e.Start(g0, n); err != nil {
		t.Fatal(err)
	}
	if at, ok := e.NextFinish(); ok {
		t.Fatalf("NextFinish %g with the gang's second member missing", at)
	}
	e.AdvanceTo(50)
	if st := e.Stats(); st.Running != 1 || st.GangBlocked != 1 {
		t.Errorf("stats %+v, want 1 running, 1 gang-blocked", st)
	}
	if b := e.BlockedGangs(nil, 10); len(b) != 1 || b[0].BlockedSince != 0 {
		t.Errorf("blocked gangs %+v", b)
	}
	s.Key = "ns/g-1"
	g1, _ := e.AddPod(s)
	if err := e.Start(g1, n); err != nil {
		t.Fatal(err)
	}
	at, ok := e.NextFinish()
	if !ok || math.Abs(at-150) > 1e-9 {
		t.Fatalf("NextFinish %g %v, want 150", at, ok)
	}
	if got := e.AdvanceTo(149); len(got) != 0 {
		t.Fatalf("finished before 150: %v", got)
	}
	got := e.AdvanceTo(1000)
	if len(got) != 2 || math.Abs(got[0].AtSec-150) > 1e-9 || e.Now() != 1000 {
		t.Fatalf("finished %v, now %g", got, e.Now())
	}
}
