// Package forecast answers "when will my job start?": it runs the sim engine forward from a
// cluster's state (model/state: a snapshot directory), several times, each time with the work
// nobody knows drawn from the cluster's finished history, and reports for every pending workload
// the chance that Kueue admits it within 15 minutes, an hour, four hours and a day, and the
// quantiles of its time to admission. Each run is Kueue's own scheduler resumed from the state
// (runtime/sim, Config.Resume), so the answer accounts for quota, cohorts, borrowing,
// preemption, priorities and Kueue's own throughput (with a control-plane model), not a moving
// average.
package forecast

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim"
)

// Options configure a forecast.
type Options struct {
	// Dir is the snapshot directory (state.yaml, the trace and cluster spec it names).
	Dir string
	// Repeats is the number of runs (default 20); Parallel how many run at once (default the
	// number of CPUs).
	Repeats, Parallel int
	// Seed drives the draws and the sim's ties.
	Seed uint64
	// HorizonSec is how far past the state's instant each run goes (default a week): a workload
	// not admitted by then counts as not admitted.
	HorizonSec float64
	// Arrivals: "" (what the state holds), state.ArrivalsNone (only the live workloads),
	// state.ArrivalsRecorded (the trace's workloads after the instant too) or ArrivalsHistory
	// (arrivals drawn from a process fitted to the history: ArrivalFit).
	Arrivals string
	// DrawKnown draws the work left of every workload from the history, even where the state
	// knows it (a replay's state knows all of it): to measure how good the draws are.
	DrawKnown bool
	// ControlPlane is the control-plane model of the runs (nil: none) and Kueue Kueue's
	// configuration the sim models.
	ControlPlane *controlplane.Model
	Kueue        sim.KueueConfig
	// Progress receives a line per finished run (nil: none).
	Progress io.Writer
	// Jobs (ReadJobs) are forecast as if submitted at the state's instant, beside its pending
	// workloads.
	Jobs []*Job
	// AltGPUs forecasts each of Jobs again at each of these total GPU counts (resize), each size
	// in runs of its own.
	AltGPUs []int
}

// Thresholds are the horizons the report gives admission chances for.
var Thresholds = []struct {
	Name string
	Sec  float64
}{{"15m", 900}, {"1h", 3600}, {"4h", 4 * 3600}, {"24h", 24 * 3600}}

// Report is a forecast.
type Report struct {
	State      string  `json:"state"`
	Source     string  `json:"source,omitempty"`
	NowSec     float64 `json:"nowSec"`
	Repeats    int     `json:"repeats"`
	HorizonSec float64 `json:"horizonSec"`
	Arrivals   string  `json:"arrivals"`
	// ArrivalFit is the fitted arrival process (Arrivals "history").
	ArrivalFit *ArrivalFit `json:"arrivalFit,omitempty"`
	// KueueVersion is the Kueue release whose scheduler ran the forecast.
	KueueVersion string `json:"kueueVersion"`
	// KueueConfig is the state's Kueue configuration file the runs replayed ("": the release's
	// defaults, or the configuration the caller gave).
	KueueConfig string `json:"kueueConfig,omitempty"`
	// Known, Drawn and FromTrace count the live workloads whose work left the state knows, that
	// each run draws from History finished workloads, and that take the trace's duration (no
	// history to draw from).
	Known     int        `json:"known"`
	Drawn     int        `json:"drawn"`
	FromTrace int        `json:"fromTrace"`
	History   int        `json:"history"`
	WallSec   float64    `json:"wallSec"`
	Workloads []Workload `json:"workloads"`
}

// Workload is the forecast of one pending workload. Times are seconds from the state's instant.
type Workload struct {
	ID        string  `json:"id"`
	Namespace string  `json:"namespace"`
	Queue     string  `json:"queue,omitempty"`
	WaitedSec float64 `json:"waitedSec"`
	// Within maps each threshold's name to the share of runs that admitted it within it.
	Within map[string]float64 `json:"within"`
	// P10, P50 and P90 are the quantiles of the time to admission over the runs; nil when that
	// share of runs did not admit it within the horizon.
	P10 *float64 `json:"p10Sec"`
	P50 *float64 `json:"p50Sec"`
	P90 *float64 `json:"p90Sec"`
	// Manifest, for a job of a -f manifest forecast as if submitted at the state's instant, is
	// its file and name (Job.Label).
	Manifest string `json:"manifest,omitempty"`
	// NotAdmitted is the share of runs that did not admit it within the horizon.
	NotAdmitted float64 `json:"notAdmitted"`
	// ETAs are the runs' times to admission, sorted; -1 for a run that did not admit it.
	ETAs []float64 `json:"etasSec"`
	// AltGPUs, for an alternative size of a -f job (Options.AltGPUs), is its total GPUs, and
	// Resized says what changed to get there.
	AltGPUs int    `json:"altGPUs,omitempty"`
	Resized string `json:"resized,omitempty"`
	// WaitsFor is what it waited for, by the share of runs: Kueue's last QuotaReserved=False
	// message before its admission (or the horizon), numbers written N so that runs short of
	// different amounts of one resource count together; most frequent first.
	WaitsFor []Wait `json:"waitsFor,omitempty"`
}

// Wait is one reason a pending workload waited, and the share of runs it was the last one.
type Wait struct {
	Reason string  `json:"reason"`
	Share  float64 `json:"share"`
}

// NoWait is the reason of a run in which the workload was admitted at its first attempt: Kueue
// gave no reason because it did not have to wait.
const NoWait = "nothing: admitted at its first attempt"

// input is a snapshot directory read once.
type input struct {
	st      *state.State
	spec    *rcluster.Spec
	tr      *trace.Trace
	history *durations
	// byID finds a workload of tr.
	byID map[string]*trace.Workload
	// finished and running are the history's observations, which each run resamples.
	finished []*trace.Workload
	running  map[*trace.Workload]float64
	// kueue is the state's Kueue configuration (nil: none).
	kueue *sim.KueueConfig
	// arrivals, with Arrivals "history", is what each run draws its arrivals from.
	arrivals *arrivalModel
}

func load(ctx context.Context, dir string) (*input, error) {
	st, err := state.Load(filepath.Join(dir, state.StateFile))
	if err != nil {
		return nil, err
	}
	in := &input{st: st}
	if in.spec, err = rcluster.Load(filepath.Join(dir, st.Cluster)); err != nil {
		return nil, err
	}
	if in.tr, err = trace.LoadWorkloads(ctx, filepath.Join(dir, st.Trace), trace.Options{}); err != nil {
		return nil, err
	}
	var finished []*trace.Workload
	if st.History != "" {
		h, err := trace.LoadWorkloads(ctx, filepath.Join(dir, st.History), trace.Options{})
		if err != nil {
			return nil, err
		}
		finished = h.Workloads
	}
	in.byID = in.tr.ByID()
	running := map[*trace.Workload]float64{}
	for _, w := range st.Workloads {
		if tw := in.byID[w.ID]; tw != nil && w.Phase == state.Admitted {
			running[tw] = st.NowSec - *w.AdmittedSec
		}
	}
	in.history = newDurations(finished, running)
	in.finished, in.running = finished, running
	if st.KueueConfig != "" {
		k, err := loadKueueConfig(filepath.Join(dir, st.KueueConfig))
		if err != nil {
			return nil, err
		}
		in.kueue = &k
	}
	return in, nil
}

// loadKueueConfig reads a state's Kueue Configuration document as the sim's Kueue configuration.
func loadKueueConfig(path string) (sim.KueueConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return sim.KueueConfig{}, fmt.Errorf("kueue configuration: %w", err)
	}
	var fields map[string]any
	if err := yaml.Unmarshal(b, &fields); err != nil {
		return sim.KueueConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	if fields["apiVersion"] != "config.kueue.x-k8s.io/v1beta2" || fields["kind"] != "Configuration" {
		return sim.KueueConfig{}, fmt.Errorf("%s: apiVersion %v kind %v: want config.kueue.x-k8s.io/v1beta2 Configuration", path, fields["apiVersion"], fields["kind"])
	}
	if _, ok := fields["priorityBooster"]; ok {
		return sim.KueueConfig{}, fmt.Errorf("%s: priorityBooster: not a field of Kueue's Configuration", path)
	}
	delete(fields, "apiVersion")
	delete(fields, "kind")
	k, err := sim.KueueConfigFromFields(fields)
	if err != nil {
		return k, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Run makes the forecast.
func Run(ctx context.Context, o Options) (*Report, error) {
	t0 := time.Now()
	if o.Repeats <= 0 {
		o.Repeats = 20
	}
	if o.Parallel <= 0 {
		o.Parallel = runtime.GOMAXPROCS(0)
	}
	if o.HorizonSec <= 0 {
		o.HorizonSec = 7 * 24 * 3600
	}
	in, err := load(ctx, o.Dir)
	if err != nil {
		return nil, fmt.Errorf("forecast: %w", err)
	}
	if len(o.AltGPUs) > 0 && len(o.Jobs) == 0 {
		return nil, errors.New("forecast: --alt-gpus resizes the jobs of -f manifests: give one")
	}
	st := in.st
	arrivals := o.Arrivals
	switch arrivals {
	case "":
		arrivals = st.Arrivals
	case state.ArrivalsNone:
	case ArrivalsHistory:
		// Fitted before the -f jobs join the state: they are not the history's.
		if in.arrivals, err = in.fitArrivals(); err != nil {
			return nil, err
		}
	case state.ArrivalsRecorded:
		if st.Arrivals != state.ArrivalsRecorded {
			return nil, fmt.Errorf("forecast: arrivals %s: the state %s holds no arrivals after its instant", arrivals, o.Dir)
		}
	default:
		return nil, fmt.Errorf("forecast: arrivals %q: want %s, %s or %s", arrivals, state.ArrivalsNone, state.ArrivalsRecorded, ArrivalsHistory)
	}
	sub, _, err := in.submit(o.Jobs, 0)
	if err != nil {
		return nil, err
	}
	rep := &Report{State: o.Dir, Source: st.Source, NowSec: st.NowSec, Repeats: o.Repeats, HorizonSec: o.HorizonSec, Arrivals: arrivals, History: in.history.n(),
		KueueVersion: sim.KueueVersion}
	if in.arrivals != nil {
		rep.ArrivalFit = &in.arrivals.fit
	}
	if in.kueue != nil && reflect.ValueOf(o.Kueue).IsZero() {
		o.Kueue, rep.KueueConfig = *in.kueue, st.KueueConfig
	}
	for i := range st.Workloads {
		w := &st.Workloads[i]
		switch {
		case known(w) && !o.DrawKnown:
			rep.Known++
		case in.history.n() > 0:
			rep.Drawn++
		default:
			rep.FromTrace++
		}
		if w.Phase == state.Pending {
			tw := in.byID[w.ID]
			if tw == nil {
				return nil, fmt.Errorf("forecast: state workload %s is not in the trace %s", w.ID, st.Trace)
			}
			rep.Workloads = append(rep.Workloads, Workload{ID: w.ID, Namespace: tw.Namespace, WaitedSec: st.NowSec - w.CreatedSec, Manifest: sub[w.ID]})
		}
	}
	if len(rep.Workloads) == 0 {
		return rep, nil
	}
	scratch, err := os.MkdirTemp("", "kueuelab-forecast-")
	if err != nil {
		return nil, fmt.Errorf("forecast: %w", err)
	}
	defer os.RemoveAll(scratch)
	if err := in.runAll(ctx, o, arrivals, rep.Workloads, filepath.Join(scratch, "base")); err != nil {
		return nil, err
	}
	// Each alternative size of the -f jobs in runs of its own: the alternatives do not compete.
	for _, gpus := range o.AltGPUs {
		alt, err := load(ctx, o.Dir)
		if err != nil {
			return nil, fmt.Errorf("forecast: %w", err)
		}
		alt.arrivals = in.arrivals
		sub, how, err := alt.submit(o.Jobs, gpus)
		if err != nil {
			return nil, err
		}
		var rows []Workload
		for _, id := range slices.Sorted(maps.Keys(sub)) {
			rows = append(rows, Workload{ID: id, Namespace: alt.byID[id].Namespace, Manifest: sub[id], AltGPUs: gpus, Resized: how[id]})
		}
		if err := alt.runAll(ctx, o, arrivals, rows, filepath.Join(scratch, fmt.Sprint("alt-", gpus))); err != nil {
			return nil, err
		}
		rep.Workloads = append(rep.Workloads, rows...)
	}
	rep.WallSec = time.Since(t0).Seconds()
	return rep, nil
}

// runAll runs the forecast's runs for the pending workloads rows (N in parallel, each in a
// directory under scratch) and fills in their statistics.
func (in *input) runAll(ctx context.Context, o Options, arrivals string, rows []Workload, scratch string) error {
	etas := make([][]float64, o.Repeats) // per run, per pending workload
	waits := make([][]string, o.Repeats) // per run, per pending workload
	queues := map[string]string{}
	var mu sync.Mutex
	var firstErr error
	work := make(chan int)
	var wg sync.WaitGroup
	done := 0
	for range min(o.Parallel, o.Repeats) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				got, why, q, err := in.run(ctx, o, r, arrivals, rows, filepath.Join(scratch, fmt.Sprint(r)))
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				etas[r], waits[r] = got, why
				for k, v := range q {
					queues[k] = v
				}
				done++
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "forecast: run %d of %d done\n", done, o.Repeats)
				}
				mu.Unlock()
			}
		}()
	}
	for r := range o.Repeats {
		if ctx.Err() != nil {
			break
		}
		work <- r
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("forecast: %w", err)
	}
	for i := range rows {
		w := &rows[i]
		w.Queue = queues[w.ID]
		var xs []float64
		never := 0
		for r := range o.Repeats {
			if x := etas[r][i]; x >= 0 {
				xs = append(xs, x)
			} else {
				never++
			}
		}
		sort.Float64s(xs)
		w.ETAs = append(slices.Clone(xs), slices.Repeat([]float64{-1}, never)...)
		w.NotAdmitted = float64(never) / float64(o.Repeats)
		w.Within = map[string]float64{}
		for _, th := range Thresholds {
			n := sort.SearchFloat64s(xs, math.Nextafter(th.Sec, math.Inf(1)))
			w.Within[th.Name] = float64(n) / float64(o.Repeats)
		}
		w.P10, w.P50, w.P90 = quantile(xs, o.Repeats, 0.1), quantile(xs, o.Repeats, 0.5), quantile(xs, o.Repeats, 0.9)
		w.WaitsFor = shares(waits, i, o.Repeats)
	}
	return nil
}

// quantile is the q-quantile of n runs of which the sorted xs admitted (the rest never): nil when
// it falls among the runs that did not admit.
func quantile(xs []float64, n int, q float64) *float64 {
	k := int(math.Ceil(q*float64(n))) - 1
	k = max(k, 0)
	if k >= len(xs) {
		return nil
	}
	v := xs[k]
	return &v
}

// known says whether the state knows the work w has left.
func known(w *state.Workload) bool { return w.RemainingSec != nil || len(w.Progress) > 0 }

// run is one run: the state with this run's draws, resumed in the sim until the horizon. It
// returns, per pending workload of pending, its time to admission (-1: none within the horizon),
// and the ClusterQueue of each.
func (in *input) run(ctx context.Context, o Options, r int, arrivals string, pending []Workload, out string) ([]float64, []string, map[string]string, error) {
	st := *in.st
	st.Workloads = slices.Clone(in.st.Workloads)
	rng := rand.New(rand.NewPCG(o.Seed, uint64(r)))
	// Each run draws from its own resample of the history (a bootstrap), so that the runs spread
	// as much as a history of that size leaves the durations uncertain, not only as much as the
	// durations vary.
	hist := in.history
	if hist.n() > 0 {
		hist = newDurations(resample(in.finished, rng), resampleRunning(in.running, rng))
	}
	for i := range st.Workloads {
		w := &st.Workloads[i]
		elapsed := 0.0
		if w.Phase == state.Admitted {
			elapsed = st.NowSec - *w.AdmittedSec
		}
		if (!known(w) || o.DrawKnown) && hist.n() > 0 { // else the state's work left or the trace's duration
			left := hist.remaining(in.byID[w.ID], elapsed, rng)
			w.RemainingSec, w.Progress = &left, nil
		}
		traceLeft := 0.0
		if tw := in.byID[w.ID]; tw != nil {
			traceLeft = tw.DurationSec - elapsed
		}
		truncateToMaxExec(w, elapsed, traceLeft)
	}
	tr := &trace.Trace{Jobs: in.tr.Jobs}
	live := st.Index()
	for _, w := range in.tr.Workloads {
		if live[w.WorkloadID] != nil || arrivals == state.ArrivalsRecorded {
			tr.Workloads = append(tr.Workloads, w)
		}
	}
	if in.arrivals != nil {
		ws, jobs := in.arrivals.draw(st.NowSec+o.HorizonSec, hist, rng)
		tr.Workloads = append(tr.Workloads, ws...)
		trace.SortWorkloads(tr.Workloads)
		tr.Jobs = maps.Clone(tr.Jobs)
		maps.Copy(tr.Jobs, jobs)
	}
	cfg := sim.Config{Trace: tr, TraceName: in.st.Trace, Spec: in.spec, Seed: o.Seed, Timing: sim.DefaultTiming, Kueue: o.Kueue,
		ControlPlane: o.ControlPlane, Resume: &st, MaxTraceSec: st.NowSec + o.HorizonSec, StopWhenAdmitted: ids(pending), OutDir: out,
		WallClock: func() time.Time { return time.Time{} }, RecordWaits: true}
	if _, err := sim.Run(ctx, cfg); err != nil && !errors.Is(err, replay.ErrIncomplete) {
		return nil, nil, nil, fmt.Errorf("forecast run %d: %w", r, err)
	}
	d, err := results.Load(out)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("forecast run %d: %w", r, err)
	}
	defer os.RemoveAll(out)
	admitted := map[string]float64{}
	waited := map[string]string{} // the last reason before the first admission
	for _, e := range d.Events {
		_, done := admitted[e.Workload]
		switch {
		case done:
		case e.Type == results.EvAdmitted:
			admitted[e.Workload] = e.T - st.NowSec
		case e.Type == results.EvWaiting:
			waited[e.Workload] = e.Message
		}
	}
	queues := map[string]string{}
	for _, rec := range d.Workloads {
		queues[rec.ID] = rec.Queue
	}
	etas, why := make([]float64, len(pending)), make([]string, len(pending))
	for i, p := range pending {
		etas[i] = -1
		if t, ok := admitted[p.ID]; ok {
			etas[i] = t
		}
		why[i] = cmp.Or(waited[p.ID], NoWait)
	}
	return etas, why, queues, nil
}

// numbers are the quantities in Kueue's messages ("4 more needed", "(16) > maximum capacity (8)",
// "500m"), not digits inside names (h100-sxm): shares count reasons with them written N.
var numbers = regexp.MustCompile(`\b\d+(\.\d+)?[a-zA-Z]*\b`)

// shares counts pending workload i's reasons over the runs, most frequent first (ties by text).
func shares(waits [][]string, i, runs int) []Wait {
	n := map[string]int{}
	for r := range waits {
		if i < len(waits[r]) {
			n[numbers.ReplaceAllString(waits[r][i], "N")]++
		}
	}
	out := make([]Wait, 0, len(n))
	for reason, k := range n {
		out = append(out, Wait{Reason: reason, Share: float64(k) / float64(runs)})
	}
	slices.SortFunc(out, func(a, b Wait) int { return cmp.Or(cmp.Compare(b.Share, a.Share), strings.Compare(a.Reason, b.Reason)) })
	return out
}

// truncateToMaxExec ends w's work where Kueue would deactivate it (its maxExecutionSec, elapsed
// of it used by the current admission), when what it has left (drawn or known, or else
// traceLeft, the trace's duration less elapsed) goes past that: the limit bounds the run, it is
// not its length. Kueue then evicts and deactivates it; the forecast lets it finish there, which
// frees its quota at the same instant. The bound is close, not exact: Kueue counts admitted wall
// time (pod start-up and slow-downs included) from the Admitted condition, the forecast work
// seconds from the quota reservation.
func truncateToMaxExec(w *state.Workload, elapsed, traceLeft float64) {
	if w.MaxExecutionSec == nil {
		return
	}
	left := traceLeft
	switch {
	case w.RemainingSec != nil:
		left = *w.RemainingSec
	case len(w.Progress) > 0:
		left = 0
		for _, p := range w.Progress {
			left = math.Max(left, p.RemainingSec)
		}
	}
	// A second at least: Kueue deactivates an overdue workload on its next reconcile.
	if budget := math.Max(*w.MaxExecutionSec-elapsed, 1); left > budget {
		w.RemainingSec, w.Progress = &budget, nil
	}
}

func ids(ws []Workload) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}

// resample draws len(ws) of ws with replacement.
func resample(ws []*trace.Workload, rng *rand.Rand) []*trace.Workload {
	out := make([]*trace.Workload, len(ws))
	for i := range out {
		out[i] = ws[rng.IntN(len(ws))]
	}
	return out
}

// resampleRunning draws as many running workloads as there are, with replacement, in a fixed
// order (a map's own order would make the draws differ from run to run of the same seed).
func resampleRunning(m map[*trace.Workload]float64, rng *rand.Rand) map[*trace.Workload]float64 {
	ws := slices.SortedFunc(maps.Keys(m), func(a, b *trace.Workload) int { return strings.Compare(a.WorkloadID, b.WorkloadID) })
	out := map[*trace.Workload]float64{}
	for range ws {
		w := ws[rng.IntN(len(ws))]
		// A workload drawn twice counts twice: a copy keeps it apart in the map.
		c := *w
		out[&c] = m[w]
	}
	return out
}
