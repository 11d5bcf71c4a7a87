package trace

// WithDuration is a copy of w that takes d seconds, and copies of its job records with their
// work scaled alike: a pod's work is what its duration alone on an idle node is made of, so the
// two stay consistent. w and jobs themselves come back when w has no duration to scale.
func WithDuration(w *Workload, jobs []*Job, d float64) (*Workload, []*Job) {
	if w.DurationSec <= 0 {
		return w, jobs
	}
	f := d / w.DurationSec
	c := *w
	c.DurationSec = d
	out := make([]*Job, len(jobs))
	for i, j := range jobs {
		jc := *j
		jc.Work.CPUUnits *= f
		jc.Work.GPUUnits *= f
		out[i] = &jc
	}
	return &c, out
}
