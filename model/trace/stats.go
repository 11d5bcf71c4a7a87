package trace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// Stats summarises the logical workloads of a trace (what `kueuelab trace inspect` prints).
type Stats struct {
	File            string `json:"file"`
	WorkloadRecords int    `json:"workloadRecords"`
	JobRecords      int    `json:"jobRecords"`
	// RebuiltFromJobs: the trace had no workload records; workloads were rebuilt from the jobs.
	RebuiltFromJobs bool `json:"rebuiltFromJobs"`
	Workloads       int  `json:"workloads"`
	Pods            int  `json:"pods"`
	// GPUHours counts a share of a GPU as that share. FractionalGPUPods is how many pods ask for a
	// share (kueuelab.io/gpu-fraction); GPUHoursRounded counts each such share as a whole GPU, as
	// a cluster without MIG slices must run it.
	GPUHours          float64       `json:"gpuHours"`
	FractionalGPUPods int           `json:"fractionalGpuPods"`
	GPUHoursRounded   float64       `json:"gpuHoursRounded"`
	Families          []FamilyStats `json:"families"`
	// GPUCounts is the histogram of the GPUs a workload requests in total.
	GPUCounts []GPUCount `json:"gpuCounts"`
	// ArrivalsByHour counts submissions per hour of the day (submitTimeOffsetSec mod 86400).
	ArrivalsByHour [24]int       `json:"arrivalsByHour"`
	IntentClasses  []IntentCount `json:"intentClasses"`
	// SkippedCount counts what lenient mode skipped; Skipped lists the first 1000.
	SkippedCount     int      `json:"skippedCount"`
	Skipped          []string `json:"skipped"`
	DroppedWorkloads int      `json:"droppedWorkloads"`
}

// FamilyStats are the statistics of one workload family.
type FamilyStats struct {
	Family    Family  `json:"family"`
	Workloads int     `json:"workloads"`
	Pods      int     `json:"pods"`
	GPUHours  float64 `json:"gpuHours"`
	// DurationSec are nearest-rank quantiles of durationSec.
	DurationSec Quantiles `json:"durationSec"`
}

// Quantiles of a distribution.
type Quantiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// GPUCount is one bin of the GPU-count histogram.
type GPUCount struct {
	GPUs      int64 `json:"gpus"`
	Workloads int   `json:"workloads"`
}

// IntentCount is the number of workloads of one intent class.
type IntentCount struct {
	Class     string `json:"class"`
	Workloads int    `json:"workloads"`
}

// summary is what the statistics need of one logical workload: a few words instead of the record.
type summary struct {
	id     string
	family Family
	intent string
	line   int
	pods   int
	gpus   int64
	// share is the GPUs asked for as shares of a GPU, by fracPods pods.
	share    float64
	fracPods int
	dur      float64
	submit   float64
}

// Inspect reads and validates a trace and computes its statistics. It keeps a summary of a few words
// per logical workload, never the records.
func Inspect(ctx context.Context, path string, opts Options) (*Stats, error) {
	rates, err := checkRates(opts.Rates)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", path, err)
	}
	r, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var fromRecords []summary
	fromJobs := map[string]*summary{}
	var jobOrder []string
	for n := 0; ; n++ {
		if n%4096 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("inspect %s: %w", r.Name(), ctx.Err())
		}
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if w := rec.Workload; w != nil {
			fromRecords = append(fromRecords, summary{id: w.WorkloadID, family: w.WorkloadType, intent: w.Intent(), line: rec.Line,
				pods: w.PodCount(), gpus: w.TotalGPUs(), share: w.GPUShare() - float64(w.TotalGPUs()), fracPods: w.GPUFractionPods(),
				dur: w.DurationSec, submit: w.SubmitTimeOffsetSec})
			continue
		}
		if r.led.nWorkloads > 0 {
			continue // workloads come from their records; jobs were only checked
		}
		j := rec.Job
		s := fromJobs[j.WorkloadID]
		if s == nil {
			s = &summary{id: j.WorkloadID, family: j.WorkloadType, intent: intentOf(j.IntentClass), line: rec.Line, submit: j.SubmitTimeOffsetSec}
			fromJobs[j.WorkloadID] = s
			jobOrder = append(jobOrder, j.WorkloadID)
		}
		s.pods++
		s.gpus += j.PodTemplate.Requests.GPUs()
		if f := j.PodTemplate.Requests.GPUFraction(); f > 0 {
			s.share += f
			s.fracPods++
		}
		s.dur = max(s.dur, JobDuration(j, rates))
		s.submit = min(s.submit, j.SubmitTimeOffsetSec)
	}
	// Empty lists rather than nil, so that JSON shows [] rather than null.
	st := &Stats{File: r.Name(), SkippedCount: r.SkippedCount(), DroppedWorkloads: r.DroppedCount(),
		Families: []FamilyStats{}, GPUCounts: []GPUCount{}, IntentClasses: []IntentCount{}, Skipped: []string{}}
	st.WorkloadRecords, st.JobRecords = r.Counts()
	for _, e := range r.Skipped() {
		st.Skipped = append(st.Skipped, e.Error())
	}
	sums := fromRecords
	if st.WorkloadRecords == 0 {
		st.RebuiltFromJobs = st.JobRecords > 0
		for _, id := range jobOrder {
			s := fromJobs[id]
			s.dur = math.Round(s.dur*1000) / 1000 // as Rebuild does
			if s.dur <= 0 && !r.Dropped(id) {
				e := &Error{File: r.Name(), Line: s.line, Field: "durationSec", ID: id,
					Err: errors.New("workload rebuilt from its job records: must be > 0 (its jobs have no work)")}
				if !opts.Lenient {
					return nil, e
				}
				st.SkippedCount++
				st.DroppedWorkloads++
				st.Skipped = append(st.Skipped, e.Error())
				continue
			}
			sums = append(sums, *s)
		}
	}
	sums = slices.DeleteFunc(sums, func(s summary) bool { return r.Dropped(s.id) })
	st.add(sums)
	return st, nil
}

func (st *Stats) add(sums []summary) {
	durs := map[Family][]float64{}
	fams := map[Family]*FamilyStats{}
	gpus := map[int64]int{}
	intents := map[string]int{}
	for _, s := range sums {
		f := fams[s.family]
		if f == nil {
			f = &FamilyStats{Family: s.family}
			fams[s.family] = f
		}
		gh := (float64(s.gpus) + s.share) * s.dur / 3600
		st.GPUHoursRounded += float64(s.gpus+int64(s.fracPods)) * s.dur / 3600
		st.FractionalGPUPods += s.fracPods
		f.Workloads++
		f.Pods += s.pods
		f.GPUHours += gh
		durs[s.family] = append(durs[s.family], s.dur)
		st.Workloads++
		st.Pods += s.pods
		st.GPUHours += gh
		gpus[s.gpus]++
		intents[s.intent]++
		hour := int(math.Mod(s.submit, 86400) / 3600)
		st.ArrivalsByHour[min(hour, 23)]++
	}
	for _, fam := range Families {
		if f := fams[fam]; f != nil {
			f.DurationSec = quantiles(durs[fam])
			st.Families = append(st.Families, *f)
		}
	}
	for n, c := range gpus {
		st.GPUCounts = append(st.GPUCounts, GPUCount{GPUs: n, Workloads: c})
	}
	slices.SortFunc(st.GPUCounts, func(a, b GPUCount) int { return cmp.Compare(a.GPUs, b.GPUs) })
	for _, c := range []string{IntentPerformance, IntentStandard, IntentEco} {
		if intents[c] > 0 {
			st.IntentClasses = append(st.IntentClasses, IntentCount{Class: c, Workloads: intents[c]})
		}
	}
}

// quantiles returns nearest-rank quantiles (the smallest value with at least q of the data at or
// below it); it sorts v.
func quantiles(v []float64) Quantiles {
	if len(v) == 0 {
		return Quantiles{}
	}
	slices.Sort(v)
	rank := func(q float64) float64 {
		return v[max(0, int(math.Ceil(q*float64(len(v))))-1)]
	}
	return Quantiles{P50: rank(0.50), P90: rank(0.90), P99: rank(0.99), Max: v[len(v)-1]}
}

// WriteTable prints the statistics as aligned tables.
func (st *Stats) WriteTable(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	source := "workload records"
	if st.RebuiltFromJobs {
		source = "rebuilt from job records"
	}
	p("trace\t%s\t\n", st.File)
	p("records\t%d workload, %d job\t\n", st.WorkloadRecords, st.JobRecords)
	p("workloads\t%d (%s)\t\n", st.Workloads, source)
	p("pods\t%d\t\n", st.Pods)
	if st.FractionalGPUPods > 0 {
		p("GPU-hours\t%.1f (%.1f with the %d pods' shares of a GPU rounded up to whole GPUs)\t\n", st.GPUHours, st.GPUHoursRounded, st.FractionalGPUPods)
	} else {
		p("GPU-hours\t%.1f\t\n", st.GPUHours)
	}
	p("skipped lines\t%d\t\n", st.SkippedCount)
	p("dropped workloads\t%d\t\n", st.DroppedWorkloads)

	p("\nfamily\tworkloads\tpods\tGPU-hours\tp50 s\tp90 s\tp99 s\tmax s\t\n")
	for _, f := range st.Families {
		d := f.DurationSec
		p("%s\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t\n", f.Family, f.Workloads, f.Pods, f.GPUHours, d.P50, d.P90, d.P99, d.Max)
	}

	p("\nGPUs per workload\tworkloads\tshare\t\n")
	for _, g := range st.GPUCounts {
		p("%d\t%d\t%s\t\n", g.GPUs, g.Workloads, share(g.Workloads, st.Workloads))
	}

	p("\nintent class\tworkloads\tshare\t\n")
	for _, c := range st.IntentClasses {
		p("%s\t%d\t%s\t\n", c.Class, c.Workloads, share(c.Workloads, st.Workloads))
	}

	peak := slices.Max(st.ArrivalsByHour[:])
	p("\nhour of day\tarrivals\t\t\n")
	for h, n := range st.ArrivalsByHour {
		bar := ""
		if peak > 0 {
			bar = strings.Repeat("#", int(math.Round(30*float64(n)/float64(peak))))
		}
		p("%02d:00\t%d\t%-30s\t\n", h, n, bar)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range st.Skipped {
		fmt.Fprintf(out, "skipped: %s\n", s)
	}
	if n := st.SkippedCount - len(st.Skipped); n > 0 {
		fmt.Fprintf(out, "skipped: ... and %d more\n", n)
	}
	return nil
}

func share(n, total int) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
}
