package engine

import "math"

// NextFinish returns the trace time at which the first running pod will finish (or fail) if
// nothing changes before then: no pod starts or stops and no cap changes. A caller that jumps
// from event to event (the sim engine) ticks exactly to it instead of in small steps; Tick to that
// time reports the pod with its exact finish time. ok is false when no running pod progresses
// (none runs, or every one waits for its gang).
//
// It computes every pod's speed for the current state as the next Tick will, so NodePower and
// PodPower then describe the current state rather than the last tick's. Stats are unchanged.
func (e *Engine) NextFinish() (at float64, ok bool) {
	if e.ev != nil {
		return e.nextFinishEvents()
	}
	saved := e.stats
	e.updateGangs()
	for ni := range e.nodes {
		e.tickNode(&e.nodes[ni], 0)
	}
	e.syncGangSpeeds()
	e.stats = saved
	best, need, speed := math.Inf(1), 0.0, 0.0
	for i := range e.pods {
		p := &e.pods[i]
		if !p.inUse || !p.running || p.done || p.speed <= 0 {
			continue
		}
		if t := (p.remaining - p.failRemaining) / p.speed; t < best {
			best, need, speed = t, p.remaining-p.failRemaining, p.speed
		}
	}
	if math.IsInf(best, 1) {
		return 0, false
	}
	// Round up to a time whose tick from now covers the work left, as Tick computes it:
	// now + best can fall an ulp short, and a tick that short would finish nothing.
	at = e.now + math.Max(best, 0)
	for (at-e.now)*speed < need {
		at = math.Nextafter(at, math.Inf(1))
	}
	return at, true
}
