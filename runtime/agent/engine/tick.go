package engine

import (
	"math"

	"github.com/kueuelab/kueuelab/model/hw"
)

// Tick advances trace time by dt seconds and returns the pods that finished during it, with their
// exact finish times. The returned slice is reused by the next Tick.
//
// Within a tick every pod's speed and power are those of the state at its start (caps, who runs
// where), with one exception: a pod that finishes mid-tick stops at its exact finish time, and
// its GPUs fall back to idle for the rest of the tick. Speed = GPU factor × CPU factor, each
// 1 − s·(1 − x) for the pod's sensitivity s: x is the GPU throughput under the node's cap (times
// capacity/requested GPUs when over-subscribed) or the CPU's capacity/requested cores times the
// frequency under the CPU cap. A gang progresses only while all its members are running (or
// done), at the speed of its slowest running member, because synchronous training waits for it.
//
// Tick(0) advances nothing but brings every pod's speed and power up to date with the current state
// (pods started or stopped, caps changed), which NextFinish and NodePower read.
func (e *Engine) Tick(dt float64) []Finished {
	if e.ev != nil {
		return e.AdvanceTo(e.now + dt)
	}
	e.finished = e.finished[:0]
	if !(dt >= 0) {
		return e.finished
	}
	e.stats = Stats{}
	e.updateGangs()
	for ni := range e.nodes {
		e.tickNode(&e.nodes[ni], dt)
	}
	e.syncGangSpeeds()
	for i := range e.pods {
		p := &e.pods[i]
		if !p.inUse || !p.running || p.done {
			continue
		}
		e.advance(PodID(i), p, e.now, dt)
	}
	e.now += dt
	return e.finished
}

func (e *Engine) updateGangs() {
	for gi := range e.gangs {
		if e.gangs[gi].inUse {
			e.updateGang(int32(gi))
		}
	}
}

// updateGang sets whether the gang has every member present (running or done) and whether it
// is blocked (some member running, not all present); it reports whether readiness changed.
func (e *Engine) updateGang(gi int32) bool {
	g := &e.gangs[gi]
	present, active := 0, false
	for _, pid := range g.members {
		p := &e.pods[pid]
		if p.running || p.done {
			present++
		}
		if p.running && !p.done {
			active = true
		}
	}
	was := g.ready
	g.ready = present >= g.size
	switch {
	case !g.ready && active:
		if !g.blocked {
			g.blocked, g.blockedSince = true, e.now
		}
	default:
		g.blocked = false
	}
	return was != g.ready
}

func (e *Engine) tickNode(n *node, dt float64) {
	var cpuReq, gpuReq, busyCores float64
	running := 0
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if !p.running || p.done {
			continue
		}
		p.blocked = p.gang >= 0 && !e.gangs[p.gang].ready
		running++
		cpuReq += p.cpuReq
		gpuReq += p.gpus
		if !p.blocked {
			busyCores += p.cpuReq * p.prof.CPUUtilization
		}
		if p.dirty && n.gpu != nil {
			p.gpuW, p.tput = n.gpu.Operating(p.prof.GPUUtilization, p.prof.MemoryIntensity, n.capW)
			p.dirty = false
		}
	}
	cpuShare := 1.0
	if cpuReq > n.cores {
		cpuShare = n.cores / cpuReq
	}
	gpuShare := 1.0
	if gpuReq > n.gpus && gpuReq > 0 {
		gpuShare = n.gpus / gpuReq
	}
	load := busyCores * cpuShare / n.cores
	cpuW, freq := n.cpu.Capped(load, n.cpuCap)
	cpuPlatW := cpuW + n.cpu.PlatformW
	var idleW float64
	if n.gpu != nil {
		idleW = n.gpu.IdleW
	}
	gpuW := 0.0
	usedGPUs := 0.0
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if !p.running || p.done {
			continue
		}
		e.stats.Running++
		g := p.gpus * gpuShare
		usedGPUs += g
		p.podGPUIdleW = g * idleW
		if p.blocked {
			e.stats.GangBlocked++
			p.podGPUW = p.podGPUIdleW
			p.speed = 0
		} else {
			p.podGPUW = g * p.gpuW
			gf := 1.0
			if p.gpus > 0 {
				gf = 1 - p.sens.GPU*(1-p.tput*gpuShare)
			}
			p.speed = gf * (1 - p.sens.CPU*(1-cpuShare*freq))
		}
		p.nat = p.speed
		gpuW += p.podGPUW
	}
	if free := n.gpus - usedGPUs; free > 0 {
		gpuW += free * idleW
	}
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if p.running && !p.done {
			p.power = hw.PodShare(p.podGPUW, p.cpuReq, cpuReq, running, cpuPlatW)
		}
	}
	n.power = cpuPlatW + gpuW
	n.energy += n.power * dt
}

func (e *Engine) syncGangSpeeds() {
	for gi := range e.gangs {
		if e.gangs[gi].inUse {
			e.syncGangSpeed(int32(gi))
		}
	}
}

// syncGangSpeed runs a ready gang's running members at the slowest one's own speed (as tickNode
// last computed it for each).
func (e *Engine) syncGangSpeed(gi int32) {
	g := &e.gangs[gi]
	if !g.ready {
		return
	}
	slowest := -1.0
	for _, pid := range g.members {
		p := &e.pods[pid]
		if p.running && !p.done && (slowest < 0 || p.nat < slowest) {
			slowest = p.nat
		}
	}
	for _, pid := range g.members {
		if p := &e.pods[pid]; p.running && !p.done {
			p.speed = slowest
		}
	}
}

// AdvanceTo ticks to trace time t exactly (no rounding drift from summing ticks); a t in the
// past advances nothing. An event-driven engine (NewEventDriven) advances only what changes.
func (e *Engine) AdvanceTo(t float64) []Finished {
	if e.ev != nil {
		return e.advanceEvents(t)
	}
	if !(t > e.now) {
		return e.Tick(0)
	}
	f := e.Tick(t - e.now)
	e.now = t
	return f
}

// NextFinish is the trace time at which the next running pod will finish (or fail) if nothing
// changes, as of the last Tick (an event-driven engine: as of now); ok is false when no pod is
// progressing.
func (e *Engine) NextFinish() (t float64, ok bool) {
	if e.ev != nil {
		return e.nextFinishEvents()
	}
	t = math.Inf(1)
	for i := range e.pods {
		p := &e.pods[i]
		if !p.inUse || !p.running || p.done || !(p.speed > 0) {
			continue
		}
		if at := e.now + (p.remaining-p.failRemaining)/p.speed; at < t {
			t = at
		}
	}
	return t, !math.IsInf(t, 1)
}

// finishTolerance is the work (natural seconds, relative to the pod's duration) below which a
// pod counts as done: a tick to a predicted finish time can leave a rounding residue.
const finishTolerance = 1e-9

// advance moves a running pod dt seconds of progress from time t0 at its current speed and power;
// a pod that finishes on the way stops at its exact finish time.
func (e *Engine) advance(id PodID, p *pod, t0, dt float64) {
	if p.speed <= 0 {
		p.energy += p.power * dt
		return
	}
	e.stats.Progressing++
	start := p.remaining
	if start-p.speed*dt > p.failRemaining+finishTolerance*math.Max(1, p.duration) {
		p.remaining = start - p.speed*dt
		p.energy += p.power * dt
		p.checkpoint(start, dt)
		return
	}
	tf := (start - p.failRemaining) / p.speed
	tf = math.Min(math.Max(tf, 0), dt)
	p.energy += p.power * tf
	p.checkpoint(start, tf)
	p.remaining = p.failRemaining
	p.done, p.failed, p.running = true, p.failRemaining > 0, false
	// The node kept drawing this pod's GPU power for the whole tick; after tf those GPUs idle.
	e.nodes[p.node].energy -= (p.podGPUW - p.podGPUIdleW) * (dt - tf)
	e.finished = append(e.finished, Finished{Pod: id, Key: p.key, WorkloadID: p.workload, AtSec: t0 + tf, Failed: p.failed, EnergyJ: p.energy})
}

// checkpoint records the workload's checkpoints during t seconds of progress from remaining start.
func (p *pod) checkpoint(start, t float64) {
	if p.ckptEvery <= 0 {
		return
	}
	s := p.sinceCkpt + t
	if s < p.ckptEvery {
		p.sinceCkpt = s
		return
	}
	n := float64(int64(s / p.ckptEvery))
	p.ckptRemaining = start - p.speed*(n*p.ckptEvery-p.sinceCkpt)
	p.sinceCkpt = s - n*p.ckptEvery
}
