package report

import (
	"testing"

	"github.com/kueuelab/kueuelab/runtime/results"
)

func TestFaultTables(t *testing.T) {
	run := func(lost float64) Run {
		return Run{Dir: &results.Dir{Summary: results.Summary{Groups: []results.Group{{Scope: "all",
			FaultTotals: results.FaultTotals{Restarts: 2, LostGPUHours: lost, CheckpointGPUHours: 1, RestartGPUHours: 0.5}}}}}}
	}
	in := &Input{Name: "sweep", Baseline: "a", Variants: []*Variant{{Name: "a", Runs: []Run{run(4)}}, {Name: "b", Runs: []Run{run(2)}}}}
	r := Compute(in)
	for _, tb := range r.Tables {
		if tb.Metric == "GPU-hours lost to faults and checkpoints" {
			if *tb.Rows[0].Mean != 5.5 || *tb.Rows[1].Mean != 3.5 || *tb.Rows[1].Delta != -2 {
				t.Errorf("overhead rows %+v %+v", *tb.Rows[0].Mean, *tb.Rows[1].Mean)
			}
			return
		}
	}
	t.Fatal("no fault overhead table")
}
