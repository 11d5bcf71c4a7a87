package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/kueuelab/kueuelab/model/fielderr"
	"github.com/kueuelab/kueuelab/model/trace"
)

// timeLayout is how Philly and Helios write times (no zone: only differences matter).
const timeLayout = "2006-01-02 15:04:05"

// teamColumn picks the team column: the option when the format has it, else the default.
func (r *reader) teamColumn(format string, allowed ...string) (string, error) {
	if r.opts.TeamBy == "" {
		return allowed[0], nil
	}
	for _, a := range allowed {
		if a == r.opts.TeamBy {
			return a, nil
		}
	}
	return "", fmt.Errorf("import %s: --team-by %q: want one of %s", format, r.opts.TeamBy, strings.Join(allowed, ", "))
}

// --- Philly (github.com/msr-fiddle/philly-traces, cluster_job_log) ---

// phillyJob is one entry of cluster_job_log: a JSON array of these (one per line also works).
type phillyJob struct {
	Status    string          `json:"status"`
	VC        string          `json:"vc"`
	JobID     string          `json:"jobid"`
	Attempts  []phillyAttempt `json:"attempts"`
	Submitted jsontext.Value  `json:"submitted_time"`
	User      string          `json:"user"`
}

type phillyAttempt struct {
	Start  jsontext.Value `json:"start_time"`
	End    jsontext.Value `json:"end_time"`
	Detail []struct {
		IP   string   `json:"ip"`
		GPUs []string `json:"gpus"`
	} `json:"detail"`
}

func (r *reader) philly(files []string) ([]*Job, error) {
	teamBy, err := r.teamColumn("philly", "vc", "user")
	if err != nil {
		return nil, err
	}
	var jobs []*Job
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return nil, err
		}
		dec := jsontext.NewDecoder(bytes.NewReader(data))
		array := dec.PeekKind() == '['
		if array {
			if _, err := dec.ReadToken(); err != nil {
				return nil, jsonErr(f, data, err)
			}
		}
		for {
			if array && dec.PeekKind() == ']' {
				break
			}
			raw, err := dec.ReadValue()
			if errors.Is(err, io.EOF) && !array {
				break
			}
			if err != nil {
				return nil, jsonErr(f, data, err)
			}
			line := lineAt(data, int(dec.InputOffset())-len(raw)) // where the job's object starts
			var pj phillyJob
			if err := jsonv2.Unmarshal(raw, &pj); err != nil {
				if ok, err := r.bad(f, line, jsonField(err), "%s", jsonMsg(err)); !ok {
					return nil, err
				}
				continue
			}
			j, reason, err := r.phillyJob(f, line, &pj, teamBy)
			switch {
			case err != nil:
				if ok, err := r.bad(f, line, fieldOf(err), "%s", msgOf(err)); !ok {
					return nil, err
				}
			case reason != "":
				r.notRun(reason)
			default:
				jobs = append(jobs, j)
			}
		}
	}
	return jobs, nil
}

func (r *reader) phillyJob(file string, line int, pj *phillyJob, teamBy string) (*Job, string, error) {
	if pj.JobID == "" {
		return nil, "", fieldError("jobid", "missing")
	}
	submit, ok, err := phillyTime(pj.Submitted)
	if err != nil {
		return nil, "", fieldError("submitted_time", "%v", err)
	}
	if !ok {
		return nil, "no submit time", nil
	}
	// The attempt that ended the job: the last one with both times (earlier attempts were the
	// Philly scheduler's retries, which a replay decides afresh).
	for i := len(pj.Attempts) - 1; i >= 0; i-- {
		a := pj.Attempts[i]
		start, ok1, err1 := phillyTime(a.Start)
		end, ok2, err2 := phillyTime(a.End)
		if err := errors.Join(err1, err2); err != nil {
			return nil, "", fieldError(fmt.Sprintf("attempts[%d]", i), "%v", err)
		}
		if !ok1 || !ok2 {
			continue
		}
		if end <= start {
			return nil, "no run time", nil
		}
		j := &Job{ID: "philly-" + pj.JobID, File: file, Line: line, Submit: submit, Duration: end - start,
			Team: pj.VC, TeamPrefix: "vc", CPUUtil: math.NaN(), GPUUtil: math.NaN()}
		if teamBy == "user" {
			j.Team, j.TeamPrefix = pj.User, "user"
		}
		// One pod per machine of the attempt, with that machine's GPUs.
		byGPUs := map[int]int{}
		for _, d := range a.Detail {
			byGPUs[len(d.GPUs)]++
		}
		for _, g := range sortedKeys(byGPUs) {
			j.Tasks = append(j.Tasks, Task{Name: "worker", Pods: byGPUs[g], GPUs: g, CPU: math.NaN(), MemGi: math.NaN()})
		}
		if len(j.Tasks) == 0 {
			return nil, "no placement recorded", nil
		}
		return j, "", nil
	}
	return nil, "never started or never ended", nil
}

// phillyTime parses a Philly time; null, "None" and "" are missing.
func phillyTime(v jsontext.Value) (float64, bool, error) {
	if len(v) == 0 || v.Kind() == 'n' {
		return 0, false, nil
	}
	var s string
	if err := jsonv2.Unmarshal(v, &s); err != nil {
		return 0, false, fmt.Errorf("want a time string, got %s", v)
	}
	if missing(s) {
		return 0, false, nil
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return 0, false, fmt.Errorf("time %q is not %q", short(s), timeLayout)
	}
	return float64(t.Unix()), true, nil
}

// --- Helios (github.com/S-Lab-System-Group/HeliosData, cluster_log.csv) ---

var heliosCols = []string{"job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state", "submit_time", "start_time", "end_time", "duration", "queue"}

func (r *reader) helios(files []string) ([]*Job, error) {
	teamBy, err := r.teamColumn("helios", "vc", "user")
	if err != nil {
		return nil, err
	}
	var jobs []*Job
	for _, f := range files {
		t, err := r.openTable(f, heliosCols)
		if err != nil {
			return nil, err
		}
		for {
			row, err := t.next()
			if errors.Is(err, io.EOF) {
				break
			}
			var j *Job
			var reason string
			if err == nil {
				j, reason, err = heliosJob(row, teamBy)
			}
			switch {
			case err != nil:
				if ok, err := r.badErr(err); !ok {
					return nil, err
				}
			case reason != "":
				r.notRun(reason)
			default:
				jobs = append(jobs, j)
			}
		}
	}
	return jobs, nil
}

func heliosJob(row row, teamBy string) (*Job, string, error) {
	id := row.str("job_id")
	if missing(id) {
		return nil, "", rowErr(row, "job_id", "missing")
	}
	var nums [4]float64
	for i, c := range []string{"gpu_num", "cpu_num", "node_num", "duration"} {
		v, ok, err := row.num(c)
		if err != nil {
			return nil, "", err
		}
		if !ok || v < 0 {
			if c == "duration" {
				return nil, "no run time", nil
			}
			return nil, "", rowErr(row, c, "missing or negative")
		}
		nums[i] = v
	}
	gpus, cpus, nodes, dur := int(math.Round(nums[0])), nums[1], max(1, int(math.Round(nums[2]))), nums[3]
	if dur <= 0 {
		return nil, "no run time", nil
	}
	submit, ok, err := rowTime(row, "submit_time")
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, "no submit time", nil
	}
	j := &Job{ID: "helios-" + id, File: row.t.file, Line: row.line, Submit: submit, Duration: dur,
		Team: row.str("vc"), TeamPrefix: "vc", CPUUtil: math.NaN(), GPUUtil: math.NaN()}
	if teamBy == "user" {
		j.Team, j.TeamPrefix = row.str("user"), "user"
	}
	// node_num pods share the job's GPUs and CPUs; an uneven split makes two groups.
	q, rem := gpus/nodes, gpus%nodes
	cpu := cpus / float64(nodes)
	if rem > 0 {
		j.Tasks = append(j.Tasks, Task{Name: "worker", Pods: rem, GPUs: q + 1, CPU: cpu, MemGi: math.NaN()})
	}
	j.Tasks = append(j.Tasks, Task{Name: "worker", Pods: nodes - rem, GPUs: q, CPU: cpu, MemGi: math.NaN()})
	return j, "", nil
}

// rowTime parses a Helios time column.
func rowTime(row row, col string) (float64, bool, error) {
	s := row.str(col)
	if missing(s) {
		return 0, false, nil
	}
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return 0, false, rowErr(row, col, "time %q is not %q", short(s), timeLayout)
	}
	return float64(t.Unix()), true, nil
}

// --- Alibaba PAI v2020 (github.com/alibaba/clusterdata, cluster-trace-gpu-v2020) ---

var (
	paiJobCols    = []string{"job_name", "inst_id", "user", "status", "start_time", "end_time"}
	paiTaskCols   = []string{"job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu", "gpu_type"}
	paiSensorCols = []string{"job_name", "task_name", "worker_name", "inst_id", "machine", "gpu_name", "cpu_usage", "gpu_wrk_util", "avg_mem", "max_mem", "avg_gpu_wrk_mem", "max_gpu_wrk_mem", "read", "write", "read_count", "write_count"}
)

type paiTask struct {
	Task
	start, end float64
	planCPU    float64 // percent per instance
	planGPU    float64 // percent per instance
}

type paiUse struct{ cpuUsed, cpuPlanned, gpuUsed, gpuPlanned float64 }

func (r *reader) pai(files []string) ([]*Job, error) {
	if _, err := r.teamColumn("alibaba-pai", "user"); err != nil {
		return nil, err
	}
	type paiJob struct {
		j      *Job
		status string
		end    float64
	}
	var order []string
	jobsByName := map[string]*paiJob{}
	tasks := map[string][]paiTask{}
	use := map[string]*paiUse{}
	var sensorRows []row
	for _, f := range files {
		data, err := readFile(f)
		if err != nil {
			return nil, err
		}
		cols, err := paiKind(f, data)
		if err != nil {
			return nil, err
		}
		t, err := newTable(f, data, cols)
		if err != nil {
			return nil, err
		}
		for {
			row, err := t.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				switch len(cols) {
				case len(paiJobCols):
					var j *Job
					var end float64
					j, end, err = paiJobRow(row)
					if err == nil {
						if _, dup := jobsByName[j.ID]; dup {
							err = rowErr(row, "job_name", "%q appears twice", short(row.str("job_name")))
						} else {
							order = append(order, j.ID)
							jobsByName[j.ID] = &paiJob{j: j, status: row.str("status"), end: end}
						}
					}
				case len(paiTaskCols):
					var pt paiTask
					pt, err = paiTaskRow(row)
					if err == nil {
						tasks["pai-"+row.str("job_name")] = append(tasks["pai-"+row.str("job_name")], pt)
					}
				default:
					sensorRows = append(sensorRows, row)
				}
			}
			if err != nil {
				if ok, err := r.badErr(err); !ok {
					return nil, err
				}
			}
		}
	}
	if len(jobsByName) == 0 {
		return nil, fmt.Errorf("import alibaba-pai: no pai_job_table among %s (want pai_job_table and pai_task_table, optionally pai_sensor_table)", strings.Join(files, ", "))
	}
	// Utilisation: what the instances used over what their tasks planned, in whole GPUs.
	for _, row := range sensorRows {
		id := "pai-" + row.str("job_name")
		var plan *paiTask
		for i := range tasks[id] {
			if tasks[id][i].Name == row.str("task_name") || plan == nil {
				plan = &tasks[id][i]
			}
		}
		if plan == nil {
			continue
		}
		cpu, okc, err1 := row.num("cpu_usage")
		gpu, okg, err2 := row.num("gpu_wrk_util")
		if err := errors.Join(err1, err2); err != nil {
			if ok, err := r.badErr(err); !ok {
				return nil, err
			}
			continue
		}
		u := use[id]
		if u == nil {
			u = &paiUse{}
			use[id] = u
		}
		if okc && plan.planCPU > 0 {
			u.cpuUsed += cpu
			u.cpuPlanned += plan.planCPU
		}
		if okg && plan.gpu() > 0 {
			u.gpuUsed += gpu
			u.gpuPlanned += plan.gpu() * 100
		}
	}
	var out []*Job
	for _, id := range order {
		pj := jobsByName[id]
		j := pj.j
		switch {
		case pj.status == "Running" || pj.status == "Waiting":
			r.notRun("still running or waiting")
			continue
		case math.IsNaN(j.Submit):
			r.notRun("no submit time")
			continue
		}
		ts := tasks[id]
		if len(ts) == 0 {
			r.notRun("no tasks")
			continue
		}
		first := math.Inf(1)
		for _, t := range ts {
			if !math.IsNaN(t.start) {
				first = math.Min(first, t.start)
			}
			j.Tasks = append(j.Tasks, t.Task)
		}
		if math.IsInf(first, 1) || math.IsNaN(pj.end) || pj.end <= first {
			r.notRun("no run time")
			continue
		}
		j.Duration = pj.end - first
		// Parameter servers first, then the other tasks, as the source listed them.
		sort.SliceStable(j.Tasks, func(a, b int) bool { return j.Tasks[a].Name == trace.RolePS && j.Tasks[b].Name != trace.RolePS })
		if u := use[id]; u != nil {
			if u.cpuPlanned > 0 {
				j.CPUUtil = u.cpuUsed / u.cpuPlanned
			}
			if u.gpuPlanned > 0 {
				j.GPUUtil = u.gpuUsed / u.gpuPlanned
			}
		}
		out = append(out, j)
	}
	return out, nil
}

// paiKind tells the three tables apart by their header or, without one, by the column count.
func paiKind(file string, data []byte) ([]string, error) {
	first, _, _ := bytes.Cut(data, []byte("\n"))
	n := bytes.Count(first, []byte(",")) + 1
	for _, cols := range [][]string{paiJobCols, paiTaskCols, paiSensorCols} {
		if n == len(cols) || n == len(cols)+1 {
			return cols, nil
		}
	}
	return nil, fielderr.New(file, 1, "", "%d columns: not pai_job_table (%d), pai_task_table (%d) or pai_sensor_table (%d)", n, len(paiJobCols), len(paiTaskCols), len(paiSensorCols))
}

func paiJobRow(row row) (*Job, float64, error) {
	name := row.str("job_name")
	if missing(name) {
		return nil, 0, rowErr(row, "job_name", "missing")
	}
	submit, ok, err := row.num("start_time")
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		submit = math.NaN()
	}
	end, _, err := row.num("end_time")
	if err != nil {
		return nil, 0, err
	}
	j := &Job{ID: "pai-" + name, File: row.t.file, Line: row.line, Submit: submit, Team: row.str("user"), TeamPrefix: "user",
		CPUUtil: math.NaN(), GPUUtil: math.NaN()}
	return j, end, nil
}

func paiTaskRow(row row) (paiTask, error) {
	var v [6]float64
	for i, c := range []string{"inst_num", "start_time", "end_time", "plan_cpu", "plan_mem", "plan_gpu"} {
		x, ok, err := row.num(c)
		if err != nil {
			return paiTask{}, err
		}
		if ok && x < 0 {
			return paiTask{}, rowErr(row, c, "must be >= 0, got %v", x)
		}
		v[i] = x
	}
	pods := 1
	if !math.IsNaN(v[0]) && v[0] >= 1 {
		pods = int(math.Round(v[0]))
	}
	pt := paiTask{start: v[1], end: v[2], planCPU: v[3], planGPU: v[5]}
	pt.Name = row.str("task_name")
	pt.Pods = pods
	pt.CPU = v[3] / 100 // NaN stays NaN: sized by the profile
	pt.MemGi = v[4]
	switch g := v[5] / 100; {
	case math.IsNaN(g) || g <= 0:
	case g < 1-1e-9:
		pt.GPUFraction = g // plan_gpu 50: half a GPU, kept as the share it is
	default:
		// 150 (one and a half) has no whole-or-share form a pod can ask for: the next whole count.
		pt.GPUs = int(math.Ceil(g - 1e-9))
	}
	if math.IsNaN(pt.planCPU) {
		pt.planCPU = 0
	}
	return pt, nil
}

// --- Alibaba GPU cluster trace v2026, GFS (github.com/alibaba/clusterdata, cluster-trace-gpu-v2026) ---

var gfsCols = []string{"job_name", "organization", "gpu_model", "cpu_request", "gpu_request", "worker_num", "submit_time", "duration", "job_type"}

func (r *reader) gfs(files []string) ([]*Job, error) {
	if _, err := r.teamColumn("alibaba-gfs", "org"); err != nil {
		return nil, err
	}
	var jobs []*Job
	for _, f := range files {
		t, err := r.openTable(f, gfsCols)
		if err != nil {
			return nil, err
		}
		for {
			row, err := t.next()
			if errors.Is(err, io.EOF) {
				break
			}
			var j *Job
			var reason string
			if err == nil {
				j, reason, err = gfsJob(row)
			}
			switch {
			case err != nil:
				if ok, err := r.badErr(err); !ok {
					return nil, err
				}
			case reason != "":
				r.notRun(reason)
			default:
				jobs = append(jobs, j)
			}
		}
	}
	return jobs, nil
}

func gfsJob(row row) (*Job, string, error) {
	id := row.str("job_name")
	if missing(id) {
		return nil, "", rowErr(row, "job_name", "missing")
	}
	var v [5]float64
	for i, c := range []string{"cpu_request", "gpu_request", "worker_num", "submit_time", "duration"} {
		x, ok, err := row.num(c)
		if err != nil {
			return nil, "", err
		}
		if !ok || x < 0 {
			if c == "duration" {
				return nil, "no run time", nil
			}
			return nil, "", rowErr(row, c, "missing or negative")
		}
		v[i] = x
	}
	if v[4] <= 0 {
		return nil, "no run time", nil
	}
	j := &Job{ID: "gfs-" + id, File: row.t.file, Line: row.line, Submit: v[3], Duration: v[4],
		Team: row.str("organization"), TeamPrefix: "org", CPUUtil: math.NaN(), GPUUtil: math.NaN()}
	switch strings.ToLower(row.str("job_type")) {
	case "hp":
		j.Intent = trace.IntentPerformance
	case "spot":
		j.Intent = trace.IntentEco
	case "":
	default:
		return nil, "", rowErr(row, "job_type", "%q: want HP or Spot", short(row.str("job_type")))
	}
	// cpu_request and gpu_request are per worker (instance), as the published sample reads.
	t := Task{Name: "worker", Pods: max(1, int(math.Round(v[2]))), CPU: v[0], MemGi: math.NaN()}
	switch {
	case v[1] <= 0:
	case v[1] < 1-1e-9:
		t.GPUFraction = v[1] // 0.5: half a GPU, kept as the share it is
	default:
		t.GPUs = int(math.Ceil(v[1] - 1e-9)) // 1.5 has no whole-or-share form: the next whole count
	}
	j.Tasks = []Task{t}
	return j, "", nil
}

// --- shared helpers ---

func (r *reader) openTable(file string, cols []string) (*table, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	return newTable(file, data, cols)
}

// badErr is bad for an error that already names its file, line and field.
func (r *reader) badErr(err error) (bool, error) {
	e, ok := fielderr.As(err)
	if !ok || !r.opts.Lenient {
		return false, err
	}
	r.res.Skipped = append(r.res.Skipped, e)
	return true, nil
}

func rowErr(row row, col, format string, args ...any) error {
	return fielderr.New(row.t.file, row.line, col, format, args...)
}

// fieldErr is an error about one field, before its file and line are known.
type fieldErr struct {
	field string
	msg   string
}

func (e *fieldErr) Error() string { return e.field + ": " + e.msg }

func fieldError(field, format string, args ...any) error {
	return &fieldErr{field: field, msg: fmt.Sprintf(format, args...)}
}

func fieldOf(err error) string {
	var fe *fieldErr
	if errors.As(err, &fe) {
		return fe.field
	}
	return ""
}

func msgOf(err error) string {
	var fe *fieldErr
	if errors.As(err, &fe) {
		return fe.msg
	}
	return err.Error()
}

// jsonErr names the line of a JSON syntax error.
func jsonErr(file string, data []byte, err error) error {
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		return fielderr.New(file, lineAt(data, int(sy.ByteOffset)), fielderr.FromPointer(string(sy.JSONPointer)), "invalid JSON: %v", sy.Err)
	}
	return fielderr.New(file, 0, "", "invalid JSON: %v", err)
}

// jsonField and jsonMsg split a decoding error of one job into its field and message.
func jsonField(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		return fielderr.FromPointer(string(se.JSONPointer))
	}
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		return fielderr.FromPointer(string(sy.JSONPointer))
	}
	return ""
}

func jsonMsg(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) {
		if se.GoType != nil {
			return fmt.Sprintf("want a %s, got %s", se.GoType.Kind(), se.JSONKind)
		}
	}
	return err.Error()
}

// lineAt is the 1-based line of a byte offset.
func lineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return bytes.Count(data[:off], []byte("\n")) + 1
}

func sortedKeys(m map[int]int) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(keys)))
	return keys
}
