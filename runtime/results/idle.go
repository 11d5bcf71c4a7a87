package results

import (
	"cmp"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
)

// Quota held idle: Kueue admits a workload on quota alone, and kube-scheduler may then find no
// node for its pods (a pod that wants a whole 8-GPU node on nodes that one-GPU pods share). From
// quota reservation until every pod runs, the quota is reserved and its GPUs do no work. This
// file measures that from the events of a run, for both engines.

// EvPodUnschedulable is a pod (Object) kube-scheduler found no node for: Message is its
// PodScheduled=False Unschedulable message ("0/14 nodes are available: ..."), reported when the
// pod becomes unschedulable.
const EvPodUnschedulable EventType = "pod_unschedulable"

// IdleFile (idle.csv) has one row per workload Kueue reserved quota for: how long its pods
// waited to run with the quota held, and why.
const IdleFile = "idle.csv"

// DefaultIdleThresholdSec is how long an admitted workload's pods may wait to run before the
// wait counts as quota held idle in Idle.OverThreshold (5 trace minutes).
const DefaultIdleThresholdSec = 300

// Idle is summary.json's reservedIdle: quota Kueue reserved for workloads whose pods were not all
// running. A wait runs from a reservation (QuotaReserved) to the moment every pod of the
// workload runs (for a Katib experiment, each trial's pod), or to the reservation's end
// (eviction, finish, end of the run); GPU-hours are the workload's GPUs (a trial's) × the wait.
type Idle struct {
	ThresholdSec float64 `json:"thresholdSec"`
	GPUHours     float64 `json:"gpuHours"`
	// OverThreshold counts workloads that waited longer than ThresholdSec with quota held, at
	// least once; Unschedulable those of them with a pod kube-scheduler rejected during the wait.
	OverThreshold int `json:"overThreshold"`
	Unschedulable int `json:"unschedulable"`
	// StillWaiting counts workloads still waiting when the run ended.
	StillWaiting int `json:"stillWaiting"`
	// Longest is the workload with the longest single wait (nil when none waited).
	Longest *Wait       `json:"longest,omitempty"`
	Queues  []IdleGroup `json:"queues"`
	Flavors []IdleGroup `json:"flavors"`
	// Reasons are the summarised scheduler reasons of the waits over the threshold, most
	// frequent first.
	Reasons []ReasonCount `json:"reasons,omitempty"`
}

// IdleGroup is Idle for the workloads of one ClusterQueue or one (GPU) flavor.
type IdleGroup struct {
	Name          string  `json:"name"`
	GPUHours      float64 `json:"gpuHours"`
	OverThreshold int     `json:"overThreshold"`
	LongestSec    float64 `json:"longestSec"`
}

// ReasonCount is how many workloads waited over the threshold for one reason.
type ReasonCount struct {
	Reason    string `json:"reason"`
	Workloads int    `json:"workloads"`
}

// Wait is one workload's quota held idle: a row of idle.csv.
type Wait struct {
	Workload string `json:"workload"`
	Queue    string `json:"queue"`
	// Flavor is the flavor of the workload's GPU pods (the CPU flavor for a CPU workload).
	Flavor string `json:"flavor"`
	GPUs   int64  `json:"gpus"`
	// Reservations counts quota reservations (a trial's count separately).
	Reservations int `json:"reservations"`
	// FirstSec is the first reservation's wait for all pods running (nil when they never all ran
	// during it); TotalSec sums every wait, LongestSec is the longest.
	FirstSec   *float64 `json:"firstSec,omitempty"`
	TotalSec   float64  `json:"totalSec"`
	LongestSec float64  `json:"longestSec"`
	GPUHours   float64  `json:"gpuHours"`
	// Waiting is true when the run ended during a wait.
	Waiting bool `json:"waiting"`
	// Unschedulable is true when kube-scheduler rejected a pod during a wait; Reason is its
	// summarised message during the longest wait ("" without a verdict then).
	Unschedulable bool   `json:"unschedulable"`
	Reason        string `json:"reason,omitempty"`
}

// noVerdict is the reason of a wait during which kube-scheduler rejected no pod: the pods did not
// exist yet or were not yet tried.
const noVerdict = "no scheduler verdict (pods not created or not yet scheduled)"

// waitUnit is one reservation in flight: the workload's, or one Katib trial's.
type waitUnit struct {
	waiting bool
	start   float64
	unsched bool
	reason  string
}

// ReservedIdle computes the quota held idle of a run from its events (in any order) and records;
// end is the trace time the run reached, thresholdSec the Idle threshold. Waits are in record
// order, one per workload that had quota reserved.
func ReservedIdle(events []Event, recs []Record, end, thresholdSec float64) (Idle, []Wait) {
	in := newIdleInput()
	for i := range events {
		in.add(&events[i])
	}
	return in.reservedIdle(recs, end, thresholdSec)
}

// idleEvent is the part of an event that quota held idle reads: a run's events.jsonl is read
// into these (idleInput.add), so a million-workload run's log is never held whole.
type idleEvent struct {
	t        float64
	workload string
	typ      EventType
	object   string
	// flavor is a reservation's GPU flavor (gpuFlavor), reason a rejection's summary
	// (SchedulingReason).
	flavor, reason string
}

// idleInput collects the events quota held idle reads, sharing repeated strings.
type idleInput struct {
	evs    []idleEvent
	intern map[string]string
}

func newIdleInput() *idleInput { return &idleInput{intern: map[string]string{}} }

func (in *idleInput) str(s string) string {
	if v, ok := in.intern[s]; ok {
		return v
	}
	in.intern[s] = s
	return s
}

// add keeps e if quota held idle reads it.
func (in *idleInput) add(e *Event) {
	ie := idleEvent{t: e.T, typ: e.Type}
	switch e.Type {
	case EvTrialCreated, EvAllPodsRunning, EvFinished:
	case EvEvicted, EvPodRunning:
		ie.object = e.Object
	case EvQuotaReserved:
		ie.object, ie.flavor = e.Object, in.str(gpuFlavor(e.Flavors))
	case EvPodUnschedulable:
		ie.object, ie.reason = e.Object, in.str(SchedulingReason(e.Message))
	default:
		return
	}
	ie.workload = in.str(e.Workload)
	in.evs = append(in.evs, ie)
}

func (in *idleInput) reservedIdle(recs []Record, end, thresholdSec float64) (Idle, []Wait) {
	evs := in.evs
	slices.SortStableFunc(evs, func(a, b idleEvent) int { return cmp.Compare(a.t, b.t) })
	trials := map[string]int{}
	for _, e := range evs {
		if e.typ == EvTrialCreated {
			trials[e.workload]++
		}
	}
	type state struct {
		w      Wait
		units  map[string]*waitUnit
		gpus   float64 // per unit
		closed int     // waits ended so far
	}
	byID := make(map[string]*state, len(recs))
	for _, r := range recs {
		g := float64(r.GPUs)
		if k := trials[r.ID]; k > 0 {
			g /= float64(k)
		}
		byID[r.ID] = &state{w: Wait{Workload: r.ID, Queue: r.Queue, GPUs: r.GPUs}, units: map[string]*waitUnit{}, gpus: g}
	}
	closeWait := func(st *state, u *waitUnit, t float64, ran bool) {
		d := math.Max(0, t-u.start)
		w := &st.w
		if ran && st.closed == 0 {
			w.FirstSec = &d
		}
		st.closed++
		w.TotalSec += d
		w.GPUHours += st.gpus * d / 3600
		if d > w.LongestSec || (w.Reason == "" && d == w.LongestSec) {
			w.LongestSec, w.Reason = d, u.reason
		}
		w.Unschedulable = w.Unschedulable || u.unsched
		*u = waitUnit{}
	}
	for _, e := range evs {
		st := byID[e.workload]
		if st == nil {
			continue
		}
		trial := trials[e.workload] > 0
		unit := func(object string, pod bool) *waitUnit {
			k := ""
			if trial {
				k = trialJob(object, pod)
			}
			u := st.units[k]
			if u == nil {
				u = &waitUnit{}
				st.units[k] = u
			}
			return u
		}
		switch e.typ {
		case EvQuotaReserved:
			if st.w.Flavor == "" {
				st.w.Flavor = e.flavor
			}
			if u := unit(e.object, false); !u.waiting {
				*u = waitUnit{waiting: true, start: e.t}
				st.w.Reservations++
			}
		case EvAllPodsRunning: // a workload's own pods (trials have no such event)
			if u := unit("", false); !trial && u.waiting {
				closeWait(st, u, e.t, true)
			}
		case EvPodRunning: // a trial runs with its one pod
			if !trial {
				break
			}
			if u := unit(e.object, true); u.waiting {
				closeWait(st, u, e.t, true)
			}
		case EvEvicted:
			if u := unit(e.object, false); u.waiting {
				closeWait(st, u, e.t, false)
			}
		case EvFinished:
			// In a fixed order: the sums and the longest wait's ties do not depend on map order.
			for _, k := range sortedUnitKeys(st.units) {
				if u := st.units[k]; u.waiting {
					closeWait(st, u, e.t, false)
				}
			}
		case EvPodUnschedulable:
			if u := unit(e.object, true); u.waiting {
				u.unsched = true
				if u.reason == "" {
					u.reason = e.reason
				}
			}
		}
	}
	idle := Idle{ThresholdSec: thresholdSec}
	var waits []Wait
	queues, flavors := map[string]*IdleGroup{}, map[string]*IdleGroup{}
	reasons := map[string]int{}
	for _, r := range recs {
		st := byID[r.ID]
		for _, k := range sortedUnitKeys(st.units) {
			if u := st.units[k]; u.waiting {
				closeWait(st, u, math.Max(end, u.start), false)
				st.w.Waiting = true
			}
		}
		w := st.w
		if w.Reservations == 0 {
			continue
		}
		waits = append(waits, w)
		idle.GPUHours += w.GPUHours
		over := w.LongestSec > thresholdSec
		if over {
			idle.OverThreshold++
			if w.Unschedulable {
				idle.Unschedulable++
			}
			reasons[cmp.Or(w.Reason, noVerdict)]++
		}
		if w.Waiting {
			idle.StillWaiting++
		}
		if w.LongestSec > 0 && (idle.Longest == nil || w.LongestSec > idle.Longest.LongestSec) {
			l := w
			idle.Longest = &l
		}
		for _, g := range []*IdleGroup{groupOf(queues, w.Queue), groupOf(flavors, w.Flavor)} {
			g.GPUHours += w.GPUHours
			g.LongestSec = math.Max(g.LongestSec, w.LongestSec)
			if over {
				g.OverThreshold++
			}
		}
	}
	idle.Queues, idle.Flavors = sortedGroups(queues), sortedGroups(flavors)
	for r, n := range reasons {
		idle.Reasons = append(idle.Reasons, ReasonCount{Reason: r, Workloads: n})
	}
	slices.SortFunc(idle.Reasons, func(a, b ReasonCount) int {
		return cmp.Or(cmp.Compare(b.Workloads, a.Workloads), strings.Compare(a.Reason, b.Reason))
	})
	return idle, waits
}

func sortedUnitKeys(m map[string]*waitUnit) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func groupOf(m map[string]*IdleGroup, name string) *IdleGroup {
	g := m[name]
	if g == nil {
		g = &IdleGroup{Name: name}
		m[name] = g
	}
	return g
}

func sortedGroups(m map[string]*IdleGroup) []IdleGroup {
	out := make([]IdleGroup, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b IdleGroup) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// gpuFlavor is the flavor of a workload's GPU pod sets: the pod sets' flavors other than the CPU
// flavor (the first by name when there are several), else the CPU flavor.
func gpuFlavor(f map[string]string) string {
	var names []string
	for _, v := range f {
		if v != rcluster.CPUFlavor {
			names = append(names, v)
		}
	}
	if len(names) == 0 {
		for _, v := range f {
			return v
		}
		return ""
	}
	slices.Sort(names)
	return names[0]
}

// trialJob is the trial Job a Katib trial's Kueue Workload ("job-<job>-<hash>", Kueue's
// jobframework naming) or pod ("<job>-<suffix>", the Job controller's) belongs to; objects are
// namespace/name.
func trialJob(object string, pod bool) string {
	ns, name, _ := strings.Cut(object, "/")
	if !pod {
		name = strings.TrimPrefix(name, "job-")
	}
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		name = name[:i]
	}
	return ns + "/" + name
}

// SchedulingReason summarises kube-scheduler's PodScheduled=False message: the reasons nodes were
// rejected, most nodes first, without node counts and without what follows the list (the
// preemption and dynamic-resource postscripts), so waits for the same reason on differently
// sized clusters read alike. Nodes outside the pod's node selector come last: they are the other
// flavors' nodes, never candidates. "0/8 nodes are available: 2 Insufficient nvidia.com/gpu, 6
// node(s) didn't match Pod's node affinity/selector. no new claims to deallocate, preemption:
// ..." becomes "Insufficient nvidia.com/gpu; node(s) didn't match Pod's node affinity/selector".
// Other messages are kept (up to 200 bytes).
func SchedulingReason(msg string) string {
	msg = strings.TrimSpace(msg)
	_, list, ok := strings.Cut(msg, "nodes are available: ")
	if !ok {
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return msg
	}
	list, _, _ = strings.Cut(list, ". ")
	type item struct {
		n    int
		text string
	}
	var items []item
	for _, part := range strings.Split(strings.TrimSuffix(list, "."), ", ") {
		num, text, ok := strings.Cut(strings.TrimSpace(part), " ")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			n, text = 0, strings.TrimSpace(part)
		}
		items = append(items, item{n, text})
	}
	outside := func(it item) bool { return strings.Contains(it.text, "didn't match Pod's node affinity/selector") }
	slices.SortStableFunc(items, func(a, b item) int {
		return cmp.Or(cmpBool(outside(a), outside(b)), cmp.Compare(b.n, a.n), strings.Compare(a.text, b.text))
	})
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.text
	}
	return strings.Join(texts, "; ")
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// AddReservedIdle reads the run's events.jsonl in dir, sets s.ReservedIdle and writes idle.csv;
// end is the trace time the run reached.
func AddReservedIdle(dir string, recs []Record, s *Summary, end float64) error {
	in := newIdleInput()
	path := filepath.Join(dir, EventsFile)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	err = ScanEvents(f, path, func(e *Event) { in.add(e) })
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	idle, waits := in.reservedIdle(recs, end, DefaultIdleThresholdSec)
	s.ReservedIdle = &idle
	out, err := os.Create(filepath.Join(dir, IdleFile))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return errors.Join(WriteIdleCSV(out, waits), out.Close())
}

var idleColumns = []string{"workload", "queue", "flavor", "gpus", "reservations", "first_wait_sec", "total_wait_sec",
	"longest_wait_sec", "idle_gpu_hours", "waiting_at_end", "unschedulable", "reason"}

// WriteIdleCSV writes idle.csv.
func WriteIdleCSV(w io.Writer, waits []Wait) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(idleColumns); err != nil {
		return err
	}
	for _, x := range waits {
		if err := cw.Write([]string{x.Workload, x.Queue, x.Flavor, strconv.FormatInt(x.GPUs, 10), strconv.Itoa(x.Reservations),
			opt(x.FirstSec), optOK(x.TotalSec, true), optOK(x.LongestSec, true), strconv.FormatFloat(x.GPUHours, 'f', 4, 64),
			strconv.FormatBool(x.Waiting), strconv.FormatBool(x.Unschedulable), x.Reason}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// ReadIdleCSV parses idle.csv; errors name the line and column.
func ReadIdleCSV(r io.Reader, name string) ([]Wait, error) {
	return readCSV(r, name, idleColumns, func(row []string) (Wait, error) {
		w := Wait{Workload: row[0], Queue: row[1], Flavor: row[2], Reason: row[11]}
		var errs []error
		num := func(i int) float64 {
			v, err := strconv.ParseFloat(row[i], 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("column %s: %q is not a number", idleColumns[i], row[i]))
			}
			return v
		}
		flag := func(i int) bool {
			v, err := strconv.ParseBool(row[i])
			if err != nil {
				errs = append(errs, fmt.Errorf("column %s: %q is not true or false", idleColumns[i], row[i]))
			}
			return v
		}
		w.GPUs = int64(num(3))
		w.Reservations = int(num(4))
		if row[5] != "" {
			v := num(5)
			w.FirstSec = &v
		}
		w.TotalSec, w.LongestSec, w.GPUHours = num(6), num(7), num(8)
		w.Waiting, w.Unschedulable = flag(9), flag(10)
		return w, errors.Join(errs...)
	})
}

// WriteText prints the quota held idle below the summary table.
func (i *Idle) WriteText(w io.Writer) error {
	groups := func(gs []IdleGroup) string {
		var parts []string
		for _, g := range gs {
			if g.GPUHours > 0 {
				parts = append(parts, fmt.Sprintf("%s %.1f", g.Name, g.GPUHours))
			}
		}
		return strings.Join(parts, ", ")
	}
	_, err := fmt.Fprintf(w, "quota held idle (reserved by Kueue, pods not all running): %.1f GPU-h", i.GPUHours)
	if err != nil {
		return err
	}
	if i.GPUHours > 0 {
		fmt.Fprintf(w, " (queues: %s; flavors: %s)", groups(i.Queues), groups(i.Flavors))
	}
	fmt.Fprintf(w, "\n%d workloads waited > %s admitted (%d with pods the scheduler rejected, %d still waiting at the end)",
		i.OverThreshold, dur(i.ThresholdSec), i.Unschedulable, i.StillWaiting)
	if l := i.Longest; l != nil {
		fmt.Fprintf(w, "; longest %s: %s (%s, %d GPUs): %s", dur(l.LongestSec), l.Workload, l.Queue, l.GPUs, cmp.Or(l.Reason, noVerdict))
	}
	_, err = fmt.Fprintln(w)
	return err
}
