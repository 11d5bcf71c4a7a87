package agent

import (
	corev1 "k8s.io/api/core/v1"
)

// What a fault does to the pods the agent simulates, and what faults and checkpoints cost:
//
//   - A pod that fails (its phase Failed, written by someone else than the agent), is deleted
//     before it finished, or whose container restarts in place (restartCount grows: restart
//     policy OnFailure) lost the work since its workload's last checkpoint. So did the other
//     members of its gang: distributed training cannot go on with a member missing, so every
//     member still running rolls back to the checkpoint at once (Engine.Rewind) and pauses for the
//     workload's restart overhead (Engine.Pause) once the gang is whole again, as under torchrun's
//     elastic agent or a restarted MPI job. A replacement pod resumes from the checkpoint and pays
//     the restart overhead too.
//   - A NotReady node's pods stop where they are (their gang with them) until they are evicted.
//   - Per workload the agent counts the restarts (the distinct trace times its running work was
//     interrupted), the GPU-seconds of work thrown away, and the GPU-seconds paused for
//     checkpoints and for restarts (Snapshot.Faults).

// WorkloadFaults is what faults and checkpoints cost one workload so far.
type WorkloadFaults struct {
	// Restarts counts the trace times at which the workload's running work was interrupted (a
	// pod failed, was evicted or preempted, or restarted in place) and had to restart from its
	// last checkpoint, or from zero.
	Restarts int
	// LostGPUSec is Σ GPUs × progress thrown away: the work redone.
	LostGPUSec float64
	// CheckpointGPUSec and RestartGPUSec are Σ GPUs × trace seconds paused for checkpoints and
	// for restarts, over the pods that have left the simulation.
	CheckpointGPUSec float64
	RestartGPUSec    float64
	// Checkpoints counts the checkpoints its pods took (each member of a gang counts its own).
	Checkpoints int

	lastAt float64 // trace time of the last restart counted
}

// containerRestarts is the sum of the pod's containers' restart counts.
func containerRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// nodeReady reports whether the node's Ready condition is True (a node without one counts as
// ready: KWOK sets it as the node starts).
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

// interrupt records that st's running work is lost at the engine's time and rolls its gang back
// to the last checkpoint. inPlace: the pod stays and restarts (its container restarted), so it
// pauses for the restart overhead itself; otherwise its replacement will (restartsOwed). A pod
// (and gang) that had not started working yet (a gang never complete, a replacement evicted
// before its turn) loses nothing: no restart is counted, and a restart it owed passes on.
func (a *Agent) interrupt(st *podState, inPlace bool) {
	if st.completing || st.terminal {
		return
	}
	var peers []*podState
	worked := a.worked(st)
	if st.gang != "" {
		for k := range a.gangs[st.gang] {
			if m := a.podState[k]; m != nil && m != st && !m.completing && !m.terminal {
				peers = append(peers, m)
				worked = worked || a.worked(m)
			}
		}
	}
	if !worked {
		if st.owed && !inPlace {
			a.restartsOwed[st.ckptKey]++
		}
		st.owed = false
		return
	}
	st.owed = false
	now := a.eng.Now()
	a.costs.updateFaults(st.ns+"/"+st.workload, func(f *WorkloadFaults) {
		f.LostGPUSec += float64(st.gpus) * a.eng.Rewind(st.id)
		if inPlace {
			a.eng.Pause(st.id, st.restartSec)
		} else {
			a.restartsOwed[st.ckptKey]++
		}
		for _, m := range peers {
			f.LostGPUSec += float64(m.gpus) * a.eng.Rewind(m.id)
			a.eng.Pause(m.id, m.restartSec)
			m.owed = false
		}
		if f.lastAt != now {
			f.Restarts++
			f.lastAt = now
		}
	})
}

// worked reports whether the pod has made progress or paused (for a checkpoint, or through its
// restart) since it was added: whether an interruption costs it anything.
func (a *Agent) worked(st *podState) bool {
	s := a.eng.Snapshot(st.id)
	return s.SinceCheckpointSec > 0 || s.LostSec > 0 || s.Checkpoints > 0 || s.CheckpointPauseSec > 0 || s.RestartPauseSec > 0
}

// resume starts a new pod of a workload role whose earlier pod was interrupted: it pays the
// restart overhead (its checkpoint is restored by track).
func (a *Agent) resume(st *podState) {
	if a.restartsOwed[st.ckptKey] == 0 {
		return
	}
	a.restartsOwed[st.ckptKey]--
	st.owed = true
	a.eng.Pause(st.id, st.restartSec)
}

// retire books what checkpoints and restarts cost a pod leaving the simulation; it must run
// before the engine removes the pod.
func (a *Agent) retire(st *podState) {
	s := a.eng.Snapshot(st.id)
	if s.Checkpoints == 0 && s.CheckpointPauseSec == 0 && s.RestartPauseSec == 0 {
		return
	}
	g := float64(st.gpus)
	a.costs.updateFaults(st.ns+"/"+st.workload, func(f *WorkloadFaults) {
		f.CheckpointGPUSec += g * s.CheckpointPauseSec
		f.RestartGPUSec += g * s.RestartPauseSec
		f.Checkpoints += s.Checkpoints
	})
}

// remove drops a pod from the engine and the agent's state, booking its costs first.
func (a *Agent) remove(key string, st *podState) {
	a.retire(st)
	a.eng.Remove(st.id)
	delete(a.podState, key)
}

// Faults returns, per "namespace/workload id", what faults and checkpoints cost the workload so
// far. Safe from any goroutine; the map is a copy.
func (a *Agent) Faults() map[string]WorkloadFaults {
	return a.costs.faultsCopy()
}
