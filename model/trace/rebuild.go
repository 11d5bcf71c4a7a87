package trace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/kueuelab/kueuelab/model/work"
)

// Trace is a whole trace in memory: its logical workloads and their job records.
type Trace struct {
	// Workloads are sorted by submit time, ties by id.
	Workloads []*Workload
	// Jobs holds each workload's job records in file order.
	Jobs map[string][]*Job
	// Rebuilt says the trace had no workload records and Workloads were rebuilt from the jobs.
	Rebuilt bool
	// Skipped lists what lenient mode skipped (at most 1000; SkippedCount counts all).
	Skipped      []*Error
	SkippedCount int
	// Dropped counts the logical workloads lenient mode dropped because a line of theirs was bad.
	Dropped int
}

// LoadWorkloads reads a whole trace into logical workloads. A trace of job records only has its
// workloads rebuilt (see Rebuild). In lenient mode a workload any bad line belongs to is left out
// whole; the lines are listed in Skipped.
func LoadWorkloads(ctx context.Context, path string, opts Options) (*Trace, error) {
	if _, err := checkRates(opts.Rates); err != nil {
		return nil, fmt.Errorf("read trace %s: %w", path, err)
	}
	r, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	t := &Trace{Jobs: map[string][]*Job{}}
	var order []string            // workload ids in first-seen order, for a deterministic rebuild
	firstLine := map[string]int{} // for errors about a rebuilt workload
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("read trace %s: %w", r.Name(), ctx.Err())
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if rec.Workload != nil {
			t.Workloads = append(t.Workloads, rec.Workload)
			continue
		}
		id := rec.Job.WorkloadID
		if _, seen := t.Jobs[id]; !seen {
			order = append(order, id)
			firstLine[id] = rec.Line
		}
		t.Jobs[id] = append(t.Jobs[id], rec.Job)
	}
	t.Skipped, t.SkippedCount, t.Dropped = r.Skipped(), r.SkippedCount(), r.DroppedCount()
	t.Workloads = slices.DeleteFunc(t.Workloads, func(w *Workload) bool { return r.Dropped(w.WorkloadID) })
	for id := range t.Jobs {
		if r.Dropped(id) {
			delete(t.Jobs, id)
		}
	}
	if nw, _ := r.Counts(); nw == 0 && len(t.Jobs) > 0 {
		t.Rebuilt = true
		for _, id := range order {
			jobs, ok := t.Jobs[id]
			if !ok {
				continue
			}
			w, err := rebuildAt(r.Name(), firstLine[id], jobs, opts.Rates)
			if err != nil && !opts.Lenient {
				return nil, err
			}
			if err != nil {
				t.skip(err)
				delete(t.Jobs, id)
				continue
			}
			t.Workloads = append(t.Workloads, w)
		}
	}
	SortWorkloads(t.Workloads)
	return t, nil
}

func (t *Trace) skip(e *Error) {
	t.SkippedCount++
	t.Dropped++
	if len(t.Skipped) < maxListed {
		t.Skipped = append(t.Skipped, e)
	}
}

// rebuildAt rebuilds a workload and, when that fails, says where: the line of its first job.
func rebuildAt(file string, line int, jobs []*Job, rates work.Rates) (*Workload, *Error) {
	w, err := Rebuild(jobs, rates)
	if err == nil {
		return w, nil
	}
	e := &Error{File: file, Line: line, ID: jobs[0].WorkloadID, Err: err}
	var fe *fieldError
	if errors.As(err, &fe) {
		e.Field, e.Err = fe.field, fmt.Errorf("workload rebuilt from its job records: %w", fe.err)
	}
	return w, e
}

// ByID indexes the trace's workloads by workload id.
func (t *Trace) ByID() map[string]*Workload {
	m := make(map[string]*Workload, len(t.Workloads))
	for _, w := range t.Workloads {
		m[w.WorkloadID] = w
	}
	return m
}

// SortWorkloads orders workloads by submit time, ties by id.
func SortWorkloads(ws []*Workload) {
	slices.SortStableFunc(ws, func(a, b *Workload) int {
		return cmp.Or(cmp.Compare(a.SubmitTimeOffsetSec, b.SubmitTimeOffsetSec), cmp.Compare(a.WorkloadID, b.WorkloadID))
	})
}

// Rebuild rebuilds the logical workload of a group of job records with one workloadId (as a
// Reader has checked them: same type and namespace). Pods are counted per role and requests (equal
// quantities) in the order they first appear, so a role whose jobs ask for different requests (HPO
// trials) gets one pod group per set of requests; the workload is gang when any job is; class, profile, intent class and tags come from the first job;
// the submit time is the earliest; durationSec is the longest JobDuration. Zero rates mean
// work.DefaultRates().
func Rebuild(jobs []*Job, rates work.Rates) (*Workload, error) {
	if len(jobs) == 0 {
		return nil, errors.New("rebuild: no job records")
	}
	rates, err := checkRates(rates)
	if err != nil {
		return nil, err
	}
	first := jobs[0]
	w := &Workload{
		SchemaVersion:          SchemaVersion,
		WorkloadID:             first.WorkloadID,
		SubmitTimeOffsetSec:    first.SubmitTimeOffsetSec,
		Namespace:              first.Namespace,
		WorkloadType:           first.WorkloadType,
		WorkloadClass:          first.WorkloadClass,
		SharedIntensityProfile: first.WorkloadProfile,
		IntentClass:            first.IntentClass,
		Tags:                   first.Tags,
	}
	for _, j := range jobs {
		if j.WorkloadID != w.WorkloadID {
			return nil, fmt.Errorf("rebuild %s: job %s belongs to workload %s", w.WorkloadID, j.JobID, j.WorkloadID)
		}
		w.SubmitTimeOffsetSec = min(w.SubmitTimeOffsetSec, j.SubmitTimeOffsetSec)
		w.Gang = w.Gang || j.Gang
		w.DurationSec = max(w.DurationSec, JobDuration(j, rates))
		i := slices.IndexFunc(w.Pods, func(p PodGroup) bool { return p.Role == j.PodRole && SameRequests(p.Requests, j.PodTemplate.Requests) })
		if i < 0 {
			w.Pods = append(w.Pods, PodGroup{Role: j.PodRole, Requests: j.PodTemplate.Requests})
			i = len(w.Pods) - 1
		}
		w.Pods[i].Replicas++
		w.Pods[i].Gang = w.Pods[i].Gang || j.Gang
	}
	// Units were computed from a duration in floating point: drop the noise below a millisecond.
	w.DurationSec = math.Round(w.DurationSec*1000) / 1000
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}

// checkRates defaults zero rates and refuses unusable ones.
func checkRates(r work.Rates) (work.Rates, error) {
	if r == (work.Rates{}) {
		return work.DefaultRates(), nil
	}
	if !(r.CPUPerCore > 0) || !(r.GPUPerGPU > 0) || math.IsInf(r.CPUPerCore, 0) || math.IsInf(r.GPUPerGPU, 0) {
		return r, fmt.Errorf("work rates must be finite and > 0, got %+v", r)
	}
	return r, nil
}

// JobDuration is the time a job needs at its natural speed: the longer of its CPU and GPU work,
// each converted back to seconds by work.Duration with the job's requests and profile. GPU work
// is counted per device (Requests.GPUWork), as render counts it.
func JobDuration(j *Job, rates work.Rates) float64 {
	p := &j.WorkloadProfile
	req := j.PodTemplate.Requests
	gpus, share := req.GPUWork()
	cpu := work.Duration(j.Work.CPUUnits, req.Value(ResourceCPU), p.CPUUtilization, rates.CPUPerCore, j.PodRole)
	gpu := work.Duration(j.Work.GPUUnits, gpus, share*p.GPUUtilization, rates.GPUPerGPU, j.PodRole)
	return max(cpu, gpu)
}
