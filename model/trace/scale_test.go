package trace

import "testing"

func TestWithDuration(t *testing.T) {
	w := &Workload{WorkloadID: "w", DurationSec: 600}
	jobs := []*Job{{JobID: "j0", Work: Work{CPUUnits: 30, GPUUnits: 120}}, {JobID: "j1", Work: Work{GPUUnits: 60}}}
	got, gotJobs := WithDuration(w, jobs, 150) // a quarter of the work
	if got == w || got.DurationSec != 150 || w.DurationSec != 600 {
		t.Fatalf("workload %+v (original %+v): want a copy taking 150 s, the original untouched", got, w)
	}
	for i, want := range []Work{{CPUUnits: 7.5, GPUUnits: 30}, {GPUUnits: 15}} {
		if gotJobs[i] == jobs[i] || gotJobs[i].Work != want {
			t.Errorf("job %d: %+v, want a copy with work %+v", i, gotJobs[i], want)
		}
	}
	if jobs[0].Work.GPUUnits != 120 {
		t.Errorf("the original job's work changed: %+v", jobs[0].Work)
	}
	// No duration to scale by: the workload and its jobs as they are.
	z := &Workload{WorkloadID: "z"}
	if got, gotJobs := WithDuration(z, jobs, 10); got != z || &gotJobs[0] != &jobs[0] {
		t.Errorf("a workload without a duration was changed: %+v", got)
	}
}
