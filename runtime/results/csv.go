package results

import (
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/model/trace"
)

// workloadColumns is the header of workloads.csv. Times are trace seconds, empty when the step
// never happened.
var workloadColumns = []string{
	"id", "namespace", "family", "intent", "local_queue", "queue", "pods", "gpus", "ideal_sec", "gpu_util",
	"submit_offset_sec", "submitted_sec", "workload_created_sec", "quota_reserved_sec", "admitted_sec", "flavors",
	"first_pod_running_sec", "all_pods_running_sec", "finished_sec", "state",
	"time_to_admission_sec", "jct_sec", "slowdown",
	"evictions", "preemptions", "requeues", "energy_j", "lost_energy_j", "gpu_seconds", "error",
	"faults", "restarts", "lost_gpu_seconds", "checkpoint_gpu_seconds", "restart_gpu_seconds",
	"mig_profile", "slice_share", "time_sliced_gpu_seconds", "busy_gpu_seconds",
}

// workloadColumnsAdded are the columns of workloadColumns that files written before them lack;
// such files still read, with the column empty, so older results directories stay loadable.
var workloadColumnsAdded = append([]string{"lost_energy_j", "mig_profile", "slice_share", "time_sliced_gpu_seconds", "busy_gpu_seconds"}, faultColumns...)

// WriteWorkloadsCSV writes one row per record, in the order given.
func WriteWorkloadsCSV(w io.Writer, recs []Record) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(workloadColumns); err != nil {
		return err
	}
	row := make([]string, len(workloadColumns))
	for i := range recs {
		r := &recs[i]
		tta, ttaOK := r.TimeToAdmission()
		jct, jctOK := r.JCT()
		sd, sdOK := r.Slowdown()
		row = append(row[:0],
			r.ID, r.Namespace, string(r.Family), r.Intent, r.LocalQueue, r.Queue,
			strconv.Itoa(r.Pods), strconv.FormatInt(r.GPUs, 10), num(r.IdealSec), num(r.GPUUtil),
			num(r.SubmitOffsetSec), opt(r.Submitted), opt(r.WorkloadCreated), opt(r.QuotaReserved), opt(r.Admitted), flavorString(r.Flavors),
			opt(r.FirstPodRunning), opt(r.AllPodsRunning), opt(r.Finished), r.State,
			optOK(tta, ttaOK), optOK(jct, jctOK), optOK(sd, sdOK),
			incidentString(r.Evictions), incidentString(r.Preemptions), strconv.Itoa(r.Requeues), num(r.EnergyJ), num(r.LostEnergyJ), num(r.GPUSeconds), r.Error,
		)
		row = r.FaultTolerance.appendColumns(row)
		share := ""
		if r.SliceShare > 0 {
			share = num(r.SliceShare)
		}
		row = append(row, r.MIGProfile, share, num(r.TimeSlicedGPUSeconds), num(r.BusyGPUSeconds))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func opt(p *float64) string {
	if p == nil {
		return ""
	}
	return strconv.FormatFloat(*p, 'f', 3, 64)
}

func optOK(v float64, ok bool) string {
	if !ok {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// ReadWorkloadsCSV parses workloads.csv; errors name the line and column.
func ReadWorkloadsCSV(r io.Reader, name string) ([]Record, error) {
	return readCSVAdded(r, name, workloadColumns, workloadColumnsAdded, parseRow)
}

// readCSV reads a results CSV whose header must be cols, parsing every row with parse; errors
// name the file and the row's line.
func readCSV[T any](r io.Reader, name string, cols []string, parse func(row []string) (T, error)) ([]T, error) {
	return readCSVAdded(r, name, cols, nil, parse)
}

// readCSVAdded is readCSV that also accepts the header of an older file: cols without the
// columns in added. Rows of such a file reach parse laid out as cols, the missing columns empty.
func readCSVAdded[T any](r io.Reader, name string, cols, added []string, parse func(row []string) (T, error)) ([]T, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = 0 // the header's width, checked against cols below, binds every row
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	var from []int // for an older file: where each column of cols is in its rows, -1 when absent
	if !slices.Equal(head, cols) {
		// An older file lacks some of the added columns: the others are cols' in its order.
		older := slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return slices.Contains(added, c) && !slices.Contains(head, c) })
		if len(added) == 0 || !slices.Equal(head, older) {
			return nil, fmt.Errorf("%s:1: header %v, want %v", name, head, cols)
		}
		from = make([]int, len(cols))
		for i, c := range cols {
			from[i] = slices.Index(head, c)
		}
	}
	var out []T
	for {
		row, err := cr.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if from != nil {
			full := make([]string, len(cols))
			for i, j := range from {
				if j >= 0 {
					full[i] = row[j]
				}
			}
			row = full
		}
		v, err := parse(row)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, v)
	}
}

func parseRow(row []string) (Record, error) {
	col := func(name string) string { return row[slices.Index(workloadColumns, name)] }
	var err error
	f := func(name string) float64 {
		if err != nil {
			return 0
		}
		v, perr := strconv.ParseFloat(col(name), 64)
		if perr != nil {
			err = fmt.Errorf("column %s: %q is not a number", name, col(name))
		}
		return v
	}
	o := func(name string) *float64 {
		if err != nil || col(name) == "" {
			return nil
		}
		v := f(name)
		return &v
	}
	i := func(name string) int64 {
		if err != nil {
			return 0
		}
		v, perr := strconv.ParseInt(col(name), 10, 64)
		if perr != nil {
			err = fmt.Errorf("column %s: %q is not an integer", name, col(name))
		}
		return v
	}
	r := Record{
		ID: col("id"), Namespace: col("namespace"), Family: trace.Family(col("family")), Intent: col("intent"),
		LocalQueue: col("local_queue"), Queue: col("queue"), Pods: int(i("pods")), GPUs: i("gpus"),
		IdealSec: f("ideal_sec"), GPUUtil: f("gpu_util"), SubmitOffsetSec: f("submit_offset_sec"),
		Submitted: o("submitted_sec"), WorkloadCreated: o("workload_created_sec"), QuotaReserved: o("quota_reserved_sec"),
		Admitted: o("admitted_sec"), FirstPodRunning: o("first_pod_running_sec"), AllPodsRunning: o("all_pods_running_sec"),
		Finished: o("finished_sec"), State: col("state"), Requeues: int(i("requeues")),
		EnergyJ: f("energy_j"), GPUSeconds: f("gpu_seconds"), Error: col("error"),
	}
	if lost := o("lost_energy_j"); lost != nil { // empty in files written before the column
		r.LostEnergyJ = *lost
	}
	r.MIGProfile = col("mig_profile")
	if share := o("slice_share"); share != nil {
		r.SliceShare = *share
	}
	if v := o("time_sliced_gpu_seconds"); v != nil {
		r.TimeSlicedGPUSeconds = *v
	}
	if v := o("busy_gpu_seconds"); v != nil {
		r.BusyGPUSeconds = *v
	}
	for _, c := range faultColumns {
		if v := o(c); v != nil { // empty in files written before the columns
			r.FaultTolerance.set(c, *v)
		}
	}
	if err != nil {
		return Record{}, err
	}
	if r.State != StateUnfinished && !slices.Contains(States, r.State) {
		return Record{}, fmt.Errorf("column state: %q is not one of %s", r.State, strings.Join(States, ", "))
	}
	if r.Flavors, err = parseFlavors(col("flavors")); err != nil {
		return Record{}, fmt.Errorf("column flavors: %w", err)
	}
	if r.Evictions, err = parseIncidents(col("evictions")); err != nil {
		return Record{}, fmt.Errorf("column evictions: %w", err)
	}
	if r.Preemptions, err = parseIncidents(col("preemptions")); err != nil {
		return Record{}, fmt.Errorf("column preemptions: %w", err)
	}
	return r, nil
}
