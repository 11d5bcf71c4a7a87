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
// is blocked (some member running, not all present), and gives a complete gang's running members
// a common pause; it reports whether readiness or a member's pause changed (either changes the
// members' power).
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
	return was != g.ready || (g.ready && e.syncGangPause(g))
}

// syncGangPause pauses a complete gang's running members while any member is paused: the gang
// moves as one (members rolled back together carry the same restart pause; a late one catches
// up). It runs before the members' power is computed, which depends on the pause. It reports
// whether a member's pause changed.
func (e *Engine) syncGangPause(g *gang) bool {
	pause, restart := 0.0, false
	for _, pid := range g.members {
		if p := &e.pods[pid]; p.running && !p.done && p.pause > pause {
			pause, restart = p.pause, e.acct[pid].pauseRestart
		}
	}
	changed := false
	for _, pid := range g.members {
		if p := &e.pods[pid]; p.running && !p.done && pause > p.pause {
			p.pause, e.acct[pid].pauseRestart = pause, restart
			changed = true
		}
	}
	return changed
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
			if p.mig != nil {
				// A slice's power per GPU of compute share, so that its share times this is the
				// slice's draw; a board power cap is not applied to MIG slices.
				w, t := n.gpu.SliceOperating(p.mig, p.prof.GPUUtilization, p.prof.MemoryIntensity)
				p.gpuW, p.tput = w/n.gpu.MIG.ComputeFraction(p.mig), t
			} else {
				p.gpuW, p.tput = n.gpu.Operating(p.prof.GPUUtilization, p.prof.MemoryIntensity, n.capW)
			}
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
	if n.replicas > 1 {
		usedGPUs = e.timeSlice(n)
	}
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if !p.running || p.done {
			continue
		}
		e.stats.Running++
		g := p.gpus * gpuShare
		sliced := len(p.tsGPUs) > 0 // draw and GPU speed set by timeSlice
		if !sliced {
			usedGPUs += g
			p.podGPUIdleW = g * idleW
			p.podGPURunW = p.podGPUIdleW
		}
		if p.blocked {
			e.stats.GangBlocked++
			p.speed = 0
		} else {
			if !sliced {
				p.podGPURunW = g * p.gpuW
			}
			gf := 1.0
			if p.gpus > 0 {
				gf = 1 - p.sens.GPU*(1-p.tput*gpuShare)
			}
			p.speed = gf * (1 - p.sens.CPU*(1-cpuShare*freq))
		}
		p.nat = p.speed
		// Power as the tick starts: a pod that pauses (checkpoint, restart) draws idle GPU power.
		gpuW += p.gpuNowW()
	}
	if free := n.gpus - usedGPUs; free > 0 {
		gpuW += free * idleW
	}
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if p.running && !p.done {
			p.power = hw.PodShare(p.gpuNowW(), p.cpuReq, cpuReq, running, cpuPlatW)
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
		if at := e.now + p.untilFinish(); at < t {
			t = at
		}
	}
	return t, !math.IsInf(t, 1)
}

// finishTolerance is the work (natural seconds, relative to the pod's duration) below which a
// pod counts as done: a tick to a predicted finish time can leave a rounding residue.
const finishTolerance = 1e-9

// tolSec is finishTolerance as progress time at the pod's speed.
func (p *pod) tolSec() float64 { return finishTolerance * math.Max(1, p.duration) / p.speed }

// gpuNowW is what the pod's GPUs draw now: idle power while it pauses.
func (p *pod) gpuNowW() float64 {
	if p.pause > 0 {
		return p.podGPUIdleW
	}
	return p.podGPURunW
}

// runW and pauseW are the pod's power while it progresses and while it pauses (its GPUs idle),
// as of the tick's start; they differ from power only in the GPUs' draw.
func (p *pod) runW() float64   { return p.power - p.gpuNowW() + p.podGPURunW }
func (p *pod) pauseW() float64 { return p.power - p.gpuNowW() + p.podGPUIdleW }

// costly reports whether the pod's checkpoints pause it.
func (p *pod) costly() bool { return p.ckptEvery > 0 && p.ckptCost > 0 }

// untilFinish is the trace time the pod needs to finish at its current speed: the pause ahead,
// its work, and a pause for every checkpoint it will take before the end (none at the end).
func (p *pod) untilFinish() float64 {
	work := (p.remaining - p.failRemaining) / p.speed
	t := p.pause + work
	if p.costly() {
		first := math.Max(p.ckptEvery-p.sinceCkpt, 0) // progress time to the next checkpoint
		if w := work - p.tolSec(); w > first {
			t += (math.Floor((w-first)/p.ckptEvery) + 1) * p.ckptCost
		}
	}
	return t
}

// advance moves a running pod through dt trace seconds: its pause first, then progress at its
// speed, stopping at each checkpoint of a workload whose checkpoints cost a pause, until it
// finishes (at its exact time, counted from t0) or dt is used up. Energy follows the segments: running power
// while it progresses, idle GPU power while it pauses or after it finished.
func (e *Engine) advance(id PodID, p *pod, t0, dt float64) {
	if p.speed <= 0 {
		p.energy += p.power * dt
		return
	}
	e.stats.Progressing++
	if p.pause == 0 && !p.costly() {
		// The common case, one segment of progress that does not finish: no pause accounting.
		start := p.remaining
		if start-p.speed*dt > p.failRemaining+finishTolerance*math.Max(1, p.duration) {
			p.remaining = start - p.speed*dt
			p.sinceValid += dt
			p.energy += p.power * dt
			p.busy += p.tsBusy * dt
			if p.ckptEvery > 0 {
				p.checkpoint(&e.acct[id], start, dt)
			}
			return
		}
	}
	a := &e.acct[id]
	runW, pauseW, gpu0 := p.runW(), p.pauseW(), p.gpuNowW() // as the tick started
	var paused, ran float64
	finished := false
	for used := 0.0; ; {
		left := dt - used
		if p.pause > 0 && left > 0 {
			u := math.Min(p.pause, left)
			p.pause -= u
			if p.pause <= 1e-12*math.Max(1, p.duration) {
				p.pause = 0
			}
			if a.pauseRestart {
				a.restartPause += u
			} else {
				a.ckptPauseSec += u
			}
			paused += u
			used += u
			if p.pause == 0 {
				p.endPause(a)
			}
			continue
		}
		if p.pause > 0 {
			break // dt used up while pausing
		}
		toFinish := (p.remaining - p.failRemaining) / p.speed
		toCkpt := math.Inf(1)
		if p.costly() {
			toCkpt = math.Max(p.ckptEvery-p.sinceCkpt, 0)
		}
		if toFinish <= left+p.tolSec() && toFinish <= toCkpt+p.tolSec() {
			u := math.Min(math.Max(toFinish, 0), left)
			p.progress(a, u)
			ran += u
			used += u
			p.remaining = p.failRemaining
			p.done, p.failed, p.running = true, p.failRemaining > 0, false
			finished = true
			e.finished = append(e.finished, Finished{Pod: id, Key: p.key, WorkloadID: p.workload, AtSec: t0 + used, Failed: p.failed})
			break
		}
		if toCkpt <= left+p.tolSec() {
			// A checkpoint: written during a pause of ckptCost, counted once the pause ends. One
			// within rounding of the interval's end is taken now (an event-driven engine
			// integrates gang members on different nodes to the same time, not to the same ulp).
			u := math.Min(toCkpt, left)
			p.progress(a, u)
			ran += u
			used += u
			p.sinceCkpt, a.pending = 0, p.remaining
			p.pause, a.pauseRestart = p.ckptCost, false
			continue
		}
		if left > 0 {
			p.progress(a, left)
			ran += left
		}
		break
	}
	p.energy += pauseW*paused + runW*ran
	p.busy += p.tsBusy * ran
	if finished {
		f := &e.finished[len(e.finished)-1]
		f.EnergyJ, f.BusyGPUSec = p.energy, p.busy
	}
	// The node was charged this pod's GPU power as the tick started for all of dt; charge what
	// its GPUs drew instead: running power while it progressed, idle power otherwise.
	gpu := p.podGPURunW*ran + p.podGPUIdleW*(dt-ran)
	e.nodes[p.node].energy += gpu - gpu0*dt
}

// progress does t trace seconds of work at the pod's speed, taking the checkpoints that cost
// nothing on the way.
func (p *pod) progress(a *podAcct, t float64) {
	start := p.remaining
	p.remaining = start - p.speed*t
	p.sinceValid += t
	if p.ckptEvery > 0 && !p.costly() {
		p.checkpoint(a, start, t)
		return
	}
	if p.ckptEvery > 0 {
		p.sinceCkpt += t
	}
}

// endPause completes the checkpoint being written, if the pause was one.
func (p *pod) endPause(a *podAcct) {
	if !a.pauseRestart && a.pending >= 0 {
		p.ckptRemaining, a.pending = a.pending, -1
		p.sinceValid = 0
		a.checkpoints++
	}
	a.pauseRestart = false
}

// checkpoint records the checkpoints, which cost nothing, taken during t seconds of progress from
// remaining start.
func (p *pod) checkpoint(a *podAcct, start, t float64) {
	s := p.sinceCkpt + t
	if s < p.ckptEvery {
		p.sinceCkpt = s
		return
	}
	n := float64(int64(s / p.ckptEvery))
	p.ckptRemaining = start - p.speed*(n*p.ckptEvery-p.sinceCkpt)
	p.sinceCkpt = s - n*p.ckptEvery
	p.sinceValid = p.sinceCkpt
	a.checkpoints += int(n)
}
