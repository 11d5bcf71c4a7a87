package report

import "github.com/kueuelab/kueuelab/runtime/results"

// Fault metrics: a report of runs with faults, restarts or checkpoints that cost a pause adds what
// they cost. The overhead is their sum: the GPU time a checkpoint-interval sweep
// minimises (its optimum is compared with Young/Daly's √(2·C·MTBF)).
var (
	restarts     = metric{"restarts", "", field(func(g *results.Group) float64 { return float64(g.Restarts) })}
	lostGPUh     = metric{"GPU-hours lost (work redone)", "GPU-h", field(func(g *results.Group) float64 { return g.LostGPUHours })}
	ckptGPUh     = metric{"GPU-hours checkpointing", "GPU-h", field(func(g *results.Group) float64 { return g.CheckpointGPUHours })}
	restartGPUh  = metric{"GPU-hours restarting", "GPU-h", field(func(g *results.Group) float64 { return g.RestartGPUHours })}
	faultOverGPU = metric{"GPU-hours lost to faults and checkpoints", "GPU-h", field(func(g *results.Group) float64 {
		return g.LostGPUHours + g.CheckpointGPUHours + g.RestartGPUHours
	})}
)

// addFaultTables adds the fault metrics when any run has any.
func (r *Report) addFaultTables(in *Input) {
	any := false
	for _, v := range in.Variants {
		for _, run := range v.Runs {
			for _, g := range run.Summary.Groups {
				any = any || g.Faults > 0 || g.Restarts > 0 || g.LostGPUHours > 0 || g.CheckpointGPUHours > 0 || g.RestartGPUHours > 0
			}
		}
	}
	if !any {
		return
	}
	for _, m := range []metric{restarts, lostGPUh, ckptGPUh, restartGPUh, faultOverGPU} {
		r.add(in, m, "all", "")
	}
}
