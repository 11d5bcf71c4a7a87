package engine

import "math"

// Time-sliced GPUs. NVIDIA's device plugin, configured with sharing.timeSlicing replicas R,
// advertises R devices per GPU and hands a pod's replicas out spread over the GPUs, the least
// used first (its distributed allocation policy for replicated resources). The GPU then runs its
// tenants' contexts in turn: nothing isolates their compute or memory.
//
// The model is processor sharing: a pod that keeps a whole GPU busy a share u of the time alone
// (its profile's utilisation) asks u of each GPU its replicas are on; while the demand D on a GPU
// is at most 1 its tenants run as fast as alone, above 1 each gets 1/D of its speed there. A pod
// with replicas on several GPUs runs at its slowest GPU's pace, and uses its demand on each GPU at
// that pace (the compute results count, Engine.BusyGPUSec). The GPU draws the power of one
// GPU running at utilisation min(1, D) with its tenants' demand-weighted memory intensity (under
// the node's cap), shared among its tenants by demand; a GPU no running pod holds draws idle
// power. Context-switch overhead and memory over-subscription are not modelled. Gang members
// waiting for their gang, and pods pausing for a checkpoint or a restart, still count as tenants
// (they hold their replicas) but ask no compute and draw nothing of a GPU others keep busy.

// sliceGPU is one physical GPU of a time-sliced node, as the last tick computed it.
type sliceGPU struct {
	replicas int     // replicas of running pods on it (the device plugin's balance)
	tenants  int     // running pods with a replica on it
	demand   float64 // Σ utilisation its progressing tenants ask
	memory   float64 // Σ demand × memory intensity
	powerW   float64 // what it draws
	tput     float64 // relative speed under the node's cap at its utilisation
}

// demand is what the pod asks of each time-sliced GPU its replicas are on: its profile's GPU
// utilisation while it progresses, nothing while it pauses or waits for its gang.
func (p *pod) demand() float64 {
	if p.blocked || p.pause > 0 {
		return 0
	}
	return p.prof.GPUUtilization
}

// giveReplicas hands the pod its replicas on node n, each on the GPU with the fewest replicas of
// running pods (the lowest index among equals), as the device plugin spreads them.
func (e *Engine) giveReplicas(id PodID, n *node) {
	for i := range n.ts {
		n.ts[i].replicas = 0
	}
	for _, pid := range n.pods {
		if q := &e.pods[pid]; pid != id && q.running && !q.done {
			for _, g := range q.tsGPUs {
				n.ts[g].replicas++
			}
		}
	}
	p := &e.pods[id]
	p.tsGPUs = p.tsGPUs[:0]
	for range p.gpuReq {
		best := 0
		for g := range n.ts {
			if n.ts[g].replicas < n.ts[best].replicas {
				best = g
			}
		}
		p.tsGPUs = append(p.tsGPUs, int32(best))
		n.ts[best].replicas++
	}
	// What the pod holds of the node's GPUs: its share of each GPU's replicas.
	p.gpus = float64(p.gpuReq) / float64(n.replicas)
}

// timeSlice computes, at the tick's start, each time-sliced GPU's demand, power and speed, and
// sets the running GPU pods' draw and the speed factor their GPUs allow; it returns the GPUs that
// have a tenant (the rest draw idle power).
func (e *Engine) timeSlice(n *node) (busyGPUs float64) {
	for i := range n.ts {
		n.ts[i] = sliceGPU{}
	}
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if !p.running || p.done || len(p.tsGPUs) == 0 {
			continue
		}
		u, m := p.demand(), p.prof.MemoryIntensity
		for _, g := range p.tsGPUs {
			t := &n.ts[g]
			t.tenants++
			t.demand += u
			t.memory += u * m
		}
	}
	for i := range n.ts {
		t := &n.ts[i]
		if t.tenants == 0 {
			continue
		}
		busyGPUs++
		m := 0.0
		if t.demand > 0 {
			m = t.memory / t.demand
		}
		t.powerW, t.tput = n.gpu.Operating(math.Min(1, t.demand), m, n.capW)
	}
	idleW := n.gpu.IdleW
	for _, pid := range n.pods {
		p := &e.pods[pid]
		if !p.running || p.done || len(p.tsGPUs) == 0 {
			continue
		}
		u := p.demand()
		p.podGPURunW, p.podGPUIdleW, p.tput = 0, 0, 1
		pace := 1.0 // the share of its demand its most loaded GPU gives it
		for _, g := range p.tsGPUs {
			t := &n.ts[g]
			// Its share of the GPU's draw, by demand; a GPU whose tenants ask nothing draws idle
			// power, split evenly among them.
			if t.demand > 0 {
				p.podGPURunW += u / t.demand * t.powerW
			} else {
				p.podGPURunW += t.powerW / float64(t.tenants)
			}
			// Asking nothing (pausing, waiting for its gang), it draws nothing of a GPU the others
			// keep busy: their shares cover the GPU's whole draw.
			if !(t.demand-u > 0) {
				p.podGPUIdleW += idleW / float64(t.tenants)
			}
			slow := math.Min(1, 1/math.Max(t.demand, 1))
			pace = math.Min(pace, slow)
			p.tput = math.Min(p.tput, t.tput*slow)
		}
		// What it uses of its GPUs while it progresses: its demand on each, at its pace.
		p.tsBusy = u * float64(len(p.tsGPUs)) * pace
	}
	return busyGPUs
}
