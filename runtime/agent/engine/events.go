package engine

import (
	"container/heap"
	"math"

	"github.com/kueuelab/kueuelab/model/hw"
)

// Event-driven mode. The agent ticks the engine every few hundred milliseconds of wall time, and a
// tick's cost is the whole cluster. A caller that jumps from event to event (the sim engine)
// instead advances an engine made by NewEventDriven with AdvanceTo: a node is integrated only when
// something on it changes or is read (its pods' speeds and powers are constant in between), and
// the pods' finish times wait in a heap, so an advance costs the nodes that changed and the pods
// that finished. The physics are Tick's (tickNode computes every speed and power, advance moves a
// pod, gangs progress only while complete, at their slowest member's speed); the difference is
// that a change between ticks takes effect at its own time rather than at the next tick's start,
// so finish times and energies are exact where ticks round them to the tick.
//
// Every mutation (Start, Stop, Evict, Remove, AddPod, Restore, caps) first integrates the nodes it
// touches up to Now, then marks them, and the gangs whose members it touches, for recomputation,
// which happens once before the next advance or read.

type eventState struct {
	// heap holds each running pod's next change: its finish, or (checkpoints that cost a pause,
	// restarts) the start or end of a pause, where its power changes. fin holds its finish time.
	heap finishHeap
	fin  finishHeap
	// gen invalidates a pod slot's older predictions (bumped when its speed may change or the
	// slot is reused).
	gen []uint32
	// staleNode and staleGang mark what must be recomputed; the lists hold each once.
	staleNode  []bool
	staleGang  []bool
	nodeList   []NodeID
	gangList   []int32
	nodeBuf    []NodeID
	gangBuf    []int32
	fresh      int // e.finished[fresh:] happened after the last AdvanceTo returned
	refreshing bool
}

// NewEventDriven returns an empty engine for event-driven use: advance it with AdvanceTo (Tick is
// AdvanceTo(Now()+dt)) and ask NextFinish for the time of the next completion.
func NewEventDriven(cat *hw.Catalog) *Engine {
	e := New(cat)
	e.ev = &eventState{}
	return e
}

type prediction struct {
	at  float64
	pod PodID
	gen uint32
}

type finishHeap []prediction

func (h finishHeap) Len() int { return len(h) }
func (h finishHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].pod < h[j].pod
}
func (h finishHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *finishHeap) Push(x any)   { *h = append(*h, x.(prediction)) }
func (h *finishHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// newPodSlot invalidates predictions left by a previous pod in slot id.
func (e *Engine) newPodSlot(id PodID) {
	if e.ev == nil {
		return
	}
	for int(id) >= len(e.ev.gen) {
		e.ev.gen = append(e.ev.gen, 0)
	}
	e.ev.gen[id]++
}

// syncNode integrates node id (its energy, its pods' progress and energy) up to Now. A node
// marked for recomputation is integrated already: marks happen at Now, and Now moves only after
// a refresh.
func (e *Engine) syncNode(id NodeID) {
	if e.ev == nil {
		return
	}
	e.integrate(id, e.now)
}

// syncPod integrates the node the pod is bound to, if any.
func (e *Engine) syncPod(id PodID) {
	if e.ev == nil {
		return
	}
	if n := e.pods[id].node; n >= 0 {
		e.syncNode(n)
	}
}

// integrate moves node id from its last integration to t at the speeds and powers computed then.
func (e *Engine) integrate(id NodeID, t float64) {
	n := &e.nodes[id]
	dt := t - n.last
	if !(dt > 0) {
		return
	}
	n.energy += n.power * dt
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if p.running && !p.done {
			paused := p.pause > 0
			if e.advance(pid, p, n.last, dt); p.done || (p.pause > 0) != paused {
				// Its power changes (a pause began or ended exactly at t): recompute.
				e.changedPod(pid)
			}
		}
	}
	n.last = t
}

// changedNode marks a node for recomputation.
func (e *Engine) changedNode(id NodeID) {
	ev := e.ev
	if ev == nil {
		return
	}
	for int(id) >= len(ev.staleNode) {
		ev.staleNode = append(ev.staleNode, false)
	}
	if !ev.staleNode[id] {
		ev.staleNode[id] = true
		ev.nodeList = append(ev.nodeList, id)
	}
}

// changedGang marks a gang for recomputation.
func (e *Engine) changedGang(gi int32) {
	ev := e.ev
	if ev == nil || gi < 0 {
		return
	}
	for int(gi) >= len(ev.staleGang) {
		ev.staleGang = append(ev.staleGang, false)
	}
	if !ev.staleGang[gi] {
		ev.staleGang[gi] = true
		ev.gangList = append(ev.gangList, gi)
	}
}

// changedPod marks a pod's node and gang for recomputation.
func (e *Engine) changedPod(id PodID) {
	if e.ev == nil {
		return
	}
	p := &e.pods[id]
	if p.node >= 0 {
		e.changedNode(p.node)
	}
	e.changedGang(p.gang)
}

// refresh recomputes what changed, in batches until nothing is left. A changed node's pods' gangs
// may change speed, so their members' nodes are integrated to Now; a gang whose readiness changes
// changes its members' power too, so their nodes join the batch. Then the batch's nodes get their
// speeds and powers recomputed, the gangs their common speed (from each member's own speed, kept
// from its node's last computation), and every pod whose speed may have changed a new finish
// prediction. Only readiness changes spread the work to other nodes.
func (e *Engine) refresh() {
	ev := e.ev
	if ev == nil || ev.refreshing {
		return
	}
	ev.refreshing = true
	defer func() { ev.refreshing = false }()
	for len(ev.nodeList)+len(ev.gangList) > 0 {
		for i, j := 0, 0; i < len(ev.nodeList) || j < len(ev.gangList); {
			for ; i < len(ev.nodeList); i++ {
				for _, pid := range e.nodes[ev.nodeList[i]].pods {
					e.changedGang(e.pods[pid].gang)
				}
			}
			for ; j < len(ev.gangList); j++ {
				gi := ev.gangList[j]
				if !e.gangs[gi].inUse {
					continue
				}
				// Its members' speeds change: their nodes are integrated first. A change of
				// readiness changes their power too: their nodes are recomputed.
				for _, pid := range e.gangs[gi].members {
					if n := e.pods[pid].node; n >= 0 {
						e.integrate(n, e.now)
					}
				}
				if e.updateGang(gi) {
					for _, pid := range e.gangs[gi].members {
						if n := e.pods[pid].node; n >= 0 {
							e.changedNode(n)
						}
					}
				}
			}
		}
		nodes := append(ev.nodeBuf[:0], ev.nodeList...)
		gangs := append(ev.gangBuf[:0], ev.gangList...)
		ev.nodeList, ev.gangList = ev.nodeList[:0], ev.gangList[:0]
		for _, nid := range nodes {
			ev.staleNode[nid] = false
		}
		for _, gi := range gangs {
			ev.staleGang[gi] = false
		}
		saved := e.stats
		for _, nid := range nodes {
			e.integrate(nid, e.now)
			e.tickNode(&e.nodes[nid], 0)
		}
		e.stats = saved
		for _, gi := range gangs {
			if e.gangs[gi].inUse {
				e.syncGangSpeed(gi)
			}
		}
		for _, nid := range nodes {
			for _, pid := range e.nodes[nid].pods {
				e.predict(pid)
			}
		}
		for _, gi := range gangs {
			if e.gangs[gi].inUse {
				for _, pid := range e.gangs[gi].members {
					e.predict(pid)
				}
			}
		}
		ev.nodeBuf, ev.gangBuf = nodes, gangs
	}
	if len(ev.heap) > 64 && len(ev.heap) > 4*len(e.podIdx) {
		e.compactHeap()
	}
}

// predict queues the pod's next change at its current speed, and its finish time (replacing
// earlier predictions). The next change is its finish, unless a pause ends or a checkpoint that
// costs a pause begins first: there its power changes, so the engine stops there, recomputes the
// node and predicts again.
func (e *Engine) predict(id PodID) {
	ev := e.ev
	ev.gen[id]++
	p := &e.pods[id]
	if !p.inUse || !p.running || p.done || p.speed <= 0 || p.node < 0 {
		return
	}
	need := p.remaining - p.failRemaining
	t := e.nodes[p.node].last
	var at, fin float64
	toCkpt := math.Inf(1)
	if p.costly() {
		toCkpt = math.Max(p.ckptEvery-p.sinceCkpt, 0)
	}
	switch {
	case p.pause > 0:
		// Round up to a time whose integration ends the pause, as advance computes it.
		for at = t + p.pause; at <= t || at-t < p.pause; {
			at = math.Nextafter(at, math.Inf(1))
		}
		fin = t + p.untilFinish()
	case need/p.speed > toCkpt+p.tolSec():
		for at = t + toCkpt; at <= t || at-t < toCkpt; {
			at = math.Nextafter(at, math.Inf(1))
		}
		fin = t + p.untilFinish()
	default:
		at = t + math.Max(need/p.speed, 0)
		// Round up to a time whose integration covers the work left, as advance computes it.
		for at <= t || (at-t)*p.speed < need {
			at = math.Nextafter(at, math.Inf(1))
		}
		fin = at
	}
	heap.Push(&ev.heap, prediction{at: at, pod: id, gen: ev.gen[id]})
	heap.Push(&ev.fin, prediction{at: math.Max(fin, at), pod: id, gen: ev.gen[id]})
}

// valid reports whether x is the pod's latest prediction and the pod still runs.
func (e *Engine) valid(x prediction) bool {
	p := &e.pods[x.pod]
	return e.ev.gen[x.pod] == x.gen && p.inUse && p.running && !p.done && p.node >= 0
}

// compactHeap drops predictions that a later one replaced.
func (e *Engine) compactHeap() {
	for _, hp := range []*finishHeap{&e.ev.heap, &e.ev.fin} {
		h := (*hp)[:0]
		for _, x := range *hp {
			if e.valid(x) {
				h = append(h, x)
			}
		}
		*hp = h
		heap.Init(hp)
	}
}

// advanceEvents is AdvanceTo for an event-driven engine: it moves to time t (≥ Now) and returns
// the pods that finished on the way, each at its exact time, in time order. The returned slice is
// reused by the next call.
func (e *Engine) advanceEvents(t float64) []Finished {
	ev := e.ev
	e.finished = append(e.finished[:0], e.finished[ev.fresh:]...)
	e.refresh()
	for len(ev.heap) > 0 {
		x := ev.heap[0]
		if !e.valid(x) {
			heap.Pop(&ev.heap)
			continue
		}
		if x.at > t {
			break
		}
		heap.Pop(&ev.heap)
		if x.at > e.now {
			e.now = x.at
		}
		p := &e.pods[x.pod]
		e.integrate(p.node, e.now)
		if !p.done {
			// A pause began or ended (or an ulp short of the finish): predicted again.
			e.changedPod(x.pod)
		}
		e.refresh()
	}
	if t > e.now {
		e.now = t
	}
	ev.fresh = len(e.finished)
	return e.finished
}

// nextFinishEvents is NextFinish for an event-driven engine.
func (e *Engine) nextFinishEvents() (float64, bool) {
	e.refresh()
	for len(e.ev.fin) > 0 {
		x := e.ev.fin[0]
		if e.valid(x) {
			return math.Max(x.at, e.now), true
		}
		heap.Pop(&e.ev.fin)
	}
	return 0, false
}

// statsEvents counts what Stats reports for an event-driven engine.
func (e *Engine) statsEvents() Stats {
	e.refresh()
	var s Stats
	for i := range e.pods {
		p := &e.pods[i]
		if !p.inUse || !p.running || p.done {
			continue
		}
		s.Running++
		switch {
		case p.blocked:
			s.GangBlocked++
		case p.speed > 0:
			s.Progressing++
		}
	}
	return s
}
