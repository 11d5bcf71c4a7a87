package sim

import (
	"math"

	"github.com/kueuelab/kueuelab/runtime/results"
)

// sampler writes a time series row per ClusterQueue and flavor every step trace seconds, with
// the columns the cluster engine's sampler reads from its informers: GPUs requested by the
// workloads submitted and not finished, GPUs they hold quota for, GPUs of running pods, pending
// workloads, and the flavor's node power from the physics engine.
type sampler struct {
	s    *sim
	g    *gauges
	out  *results.SeriesWriter
	step float64
	k    int
}

func newSampler(s *sim) *sampler {
	step := s.cfg.SampleStep
	if step == 0 {
		last := 0.0
		for _, it := range s.items {
			last = math.Max(last, it.offset)
		}
		step = math.Max(60, math.Ceil((last+86400)/5000/60)*60)
	}
	return &sampler{s: s, step: step, g: newGauges(s.plan.cluster.Queues, s.plan.cluster.Flavors, s.pods.nodeFlavor)}
}

func (sm *sampler) start() { sm.s.loop.At(sm.step, sm.tick) }

// sampleHook, set by tests, sees the sampler at every row.
var sampleHook func(*sampler)

func (sm *sampler) tick() {
	if sampleHook != nil {
		sampleHook(sm)
	}
	sm.k++
	t := float64(sm.k) * sm.step
	sm.s.pods.advance()
	if err := sm.out.Write(sm.rows(t)); err != nil {
		sm.s.fail(err)
		return
	}
	// Sample while anything else is still to happen; when only the sampler is left, the run is
	// over (or stuck) and the loop must be allowed to drain.
	if sm.s.loop.Pending() > 0 {
		sm.s.loop.At(float64(sm.k+1)*sm.step, sm.tick)
	}
}

func (sm *sampler) rows(t float64) []results.Sample {
	s := sm.s
	out := make([]results.Sample, 0, len(sm.g.cq)+len(sm.g.fl))
	for i, q := range s.plan.cluster.Queues {
		c := sm.g.cq[i]
		out = append(out, results.Sample{T: t, Scope: results.ScopeClusterQueue, Name: q, Requested: c.requested,
			Reserved: c.reserved, InUse: c.inUse, Pending: c.pending, NodePowerW: math.NaN()})
	}
	for i, f := range s.plan.cluster.Flavors {
		c := sm.g.fl[i]
		out = append(out, results.Sample{T: t, Scope: results.ScopeFlavor, Name: f, Reserved: c.reserved, InUse: c.inUse, NodePowerW: math.NaN()})
	}
	base := len(s.plan.cluster.Queues)
	for n, id := range s.pods.nodeIDs {
		if j := sm.g.nodeFlavor[n]; j >= 0 {
			o := &out[base+j]
			if math.IsNaN(o.NodePowerW) {
				o.NodePowerW = 0
			}
			o.NodePowerW += s.pods.eng.NodePower(id)
		}
	}
	return out
}

// gauges are the time series' counters, kept up to date by the roles as workloads and pods
// change, so that a sample costs the number of queues, flavors and nodes.
type gauges struct {
	cq, fl     []gauge
	cqIndex    map[string]int
	flIndex    map[string]int
	nodeFlavor []int // flavor index of each node, -1 when none
}

type gauge struct {
	requested, reserved, inUse int64
	pending                    int
}

func newGauges(queues, flavors, nodeFlavors []string) *gauges {
	g := &gauges{cq: make([]gauge, len(queues)), fl: make([]gauge, len(flavors)), cqIndex: map[string]int{}, flIndex: map[string]int{}}
	for i, q := range queues {
		g.cqIndex[q] = i
	}
	for i, f := range flavors {
		g.flIndex[f] = i
	}
	for _, f := range nodeFlavors {
		j, ok := g.flIndex[f]
		if !ok {
			j = -1
		}
		g.nodeFlavor = append(g.nodeFlavor, j)
	}
	return g
}

func (g *gauges) queue(name string) *gauge {
	if i, ok := g.cqIndex[name]; ok {
		return &g.cq[i]
	}
	return nil
}

// created counts a new Workload, pending on its queue.
func (g *gauges) created(w *kwl) {
	if q := g.queue(w.it.rec.Queue); q != nil {
		q.requested += w.gpus
		q.pending++
	}
}

// reserved moves a Workload from pending to holding quota.
func (g *gauges) reserved(w *kwl) {
	if q := g.queue(w.it.rec.Queue); q != nil {
		q.pending--
		q.reserved += w.gpus
	}
	for f, n := range w.reservedGPU {
		if i, ok := g.flIndex[f]; ok {
			g.fl[i].reserved += n
		}
	}
}

// unreserved moves it back to pending (quota released after an eviction).
func (g *gauges) unreserved(w *kwl) {
	if q := g.queue(w.it.rec.Queue); q != nil {
		q.pending++
		q.reserved -= w.gpus
	}
	for f, n := range w.reservedGPU {
		if i, ok := g.flIndex[f]; ok {
			g.fl[i].reserved -= n
		}
	}
}

// finished drops a finished Workload (holding quota or not).
func (g *gauges) finished(w *kwl) {
	if w.cq != "" {
		g.unreserved(w)
	}
	if q := g.queue(w.it.rec.Queue); q != nil {
		q.requested -= w.gpus
		q.pending--
	}
}

// podOn and podOff count a pod's GPUs in use while it runs on a node.
func (g *gauges) podOn(pd *pod)  { g.pod(pd, pd.gpus) }
func (g *gauges) podOff(pd *pod) { g.pod(pd, -pd.gpus) }

func (g *gauges) pod(pd *pod, n int64) {
	if n == 0 || pd.node < 0 {
		return
	}
	if q := g.queue(pd.w.it.rec.Queue); q != nil {
		q.inUse += n
	}
	if j := g.nodeFlavor[pd.node]; j >= 0 {
		g.fl[j].inUse += n
	}
}
