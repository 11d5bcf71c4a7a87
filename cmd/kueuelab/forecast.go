package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/forecast"
	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

func newForecastCmd() *cobra.Command {
	var (
		o            forecast.Options
		horizon      time.Duration
		controlPlane string
		output       string
		score        string
		kubeconfig   string
		kubeContext  string
		manifests    []string
		namespace    string
		htmlOut      string
		kueueVersion string
		backtestDir  string
		at           string
		oracle       bool
	)
	c := &cobra.Command{
		Use:   "forecast [DIR | --kubeconfig K] [-f MANIFEST]...",
		Short: "When will each pending workload start: the sim engine run forward from a cluster's state",
		Long: `forecast answers "when will my job start?" for every pending workload of a cluster's state:
a snapshot directory, written by ` + "`kueuelab snapshot`" + ` from a live cluster or by a sim replay
stopped at a trace time (run --engine sim --sim-max-trace T --state-out DIR). It resumes Kueue
v0.19.2's own scheduler from that state in the sim engine, --repeats times, and reports per
pending workload the share of runs that admitted it within 15 minutes, 1, 4 and 24 hours, and
the 10th, 50th and 90th percentiles of its time to admission ("-" when that share of runs did
not admit it within --horizon). --parallel runs go at once (one per CPU by default), each with
its own copy of Kueue's caches; the Go runtime collects garbage at GOGC=400 unless GOGC is set
(less time, about twice the memory: 400 MiB a run on a state 1,000 deep).

The work a workload has left is what the state knows (a replay's state knows all of it; a
cluster's, what a job's kueuelab.io/duration-sec says), else each run draws it from the state's
history of finished workloads: a finished duration of the same namespace and family (or family,
or any) longer than what the workload has already run, minus that. With no history, the trace's
durations stand. --draw-known draws even what the state knows, to measure the draws.

--arrivals says whether workloads submitted after the state's instant take part: none (only the
live ones), recorded (the trace's later workloads, as a replay's state holds them; the default is
what the state holds) or history (drawn in each run from a process fitted to what the state has
seen: per queue a Poisson process at its rate in the window from the first workload seen to now,
following the hour of day (the window's own hourly shape when it spans two days, else the
generator's), each arrival a copy of a workload the queue submitted, its work drawn like a pending
one's; the rate's uncertainty is in the runs, and a queue with little history leans on the
generator's rate: the table says how many workloads each queue's fit had). --control-plane
charges Kueue's own speed (default kueue, the built-in model; none for an infinitely fast Kueue).

--kubeconfig K (with --context C) snapshots that cluster first, as kueuelab snapshot does, into a
temporary directory it removes afterwards. Without DIR or --kubeconfig it snapshots the cluster
kubectl talks to ($KUBECONFIG, else ~/.kube/config), so that as a kubectl plugin (the binary on
PATH as kubectl-kueuelab) "kubectl kueuelab forecast -f job.yaml" asks the current cluster.

-f MANIFEST (repeatable) forecasts the job objects of a manifest file as if submitted now: a
batch/v1 Job, JobSet, PyTorchJob, TFJob or MPIJob (v2beta1) carrying kueue.x-k8s.io/queue-name,
turned into a Workload by Kueue's own job integration and reported beside the pending workloads
as FILE/NAME. An object without a namespace gets -n, else the kubeconfig context's, else
"default"; its LocalQueue must be one of the state's. Its work is the pod template's
kueuelab.io/duration-sec when it has one, else drawn like any unknown one.

--alt-gpus 64,32 forecasts the -f jobs again at each total GPU count, each size in runs of its
own (kubernetes-sigs/kueue#15614's "downsize 128 -> 64 GPUs?"): the GPU pod set's pods change
where the count is a multiple of a pod's GPUs, else each pod's GPUs where it is a multiple of the
pods; the job's work stays the same (its duration-sec scaled by the GPUs it had over the GPUs it
gets: linear scaling, the optimistic case; a drawn duration is not scaled). The table says which.

--html FILE also writes the forecast as a self-contained HTML page with a plot of every pending
workload's times to admission over the runs (p10-p90 box, p50 tick, a dot per run).

--score RUN_DIR compares the forecast with what happened: the results of the replay the state
was taken from, run to the end. It prints how often the actual time to admission fell inside
the p10-p90 interval (with its 95% Wilson interval) and the median absolute error of the p50.

--at T backtests on a cluster's own past (--backtest DIR names the snapshot, as DIR does): the
snapshot's finished workloads (when Kueue admitted and finished each) and live ones give the state
at T (an RFC 3339 time, a duration before the snapshot like -6h, or a time on its clock like 7200
or 2h): what was pending and running then, with the admissions Kueue had made; the workloads
finished by then are the history. The forecast runs from there, to the snapshot's instant at most,
and is scored against the admissions that happened. What a snapshot taken at T would have known is
all it knows (work left from kueuelab.io/duration-sec only; no arrivals unless --arrivals says so);
--oracle gives it every workload's actual run and the recorded arrivals, so that what is left to
check is Kueue's decisions from an API's state. A workload evicted at some time is left unscored
(the history keeps its last admission only), said so.`,
		Example: `  kueuelab run --engine sim --gen-jobs 300 --gen-span 12h --seed 1 --cluster examples/clusters/teams.yaml --out results/full
  kueuelab run --engine sim --trace results/full/trace.jsonl --cluster examples/clusters/teams.yaml --sim-max-trace 6h --state-out state6h --out results/6h
  kueuelab forecast state6h --repeats 50
  kueuelab forecast state6h --draw-known --score results/full -o json
  kueuelab forecast --kubeconfig ~/.kube/config --repeats 50
  kueuelab forecast state6h -f job.yaml -n team-a --html forecast.html
  kueuelab forecast state6h -f job.yaml -n team-a --alt-gpus 8,4
  kueuelab snapshot --kubeconfig ~/.kube/config --out snap && kueuelab forecast --backtest snap --at -6h --arrivals history
  kubectl kueuelab forecast -f job.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if backtestDir != "" {
				if len(args) == 1 {
					return errors.New("--backtest names the snapshot directory: give it or DIR, not both")
				}
				args = []string{backtestDir}
				if at == "" {
					return errors.New("--backtest needs --at T, the instant to forecast from")
				}
			}
			if oracle && at == "" {
				return errors.New("--oracle goes with --at (a backtest)")
			}
			if at != "" && (len(manifests) > 0 || score != "") {
				return errors.New("--at backtests the snapshot's own workloads: -f and --score do not go with it")
			}
			if len(args) == 1 && kubeconfig != "" {
				return errors.New("give a snapshot directory or --kubeconfig, not both")
			}
			if kubeContext != "" && len(args) == 1 {
				return errors.New("--context goes with --kubeconfig, not a snapshot directory")
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: want table or json", output)
			}
			if o.Repeats < 1 || horizon <= 0 {
				return errors.New("--repeats must be ≥ 1 and --horizon > 0")
			}
			m, err := controlplane.Resolve(controlPlane)
			if err != nil {
				return fmt.Errorf("--control-plane: %w", err)
			}
			o.ControlPlane, o.HorizonSec, o.Progress = m, horizon.Seconds(), cmd.ErrOrStderr()
			if len(manifests) > 0 {
				if namespace == "" && len(args) == 0 {
					if namespace, err = snapshot.Namespace(kubeconfig, kubeContext); err != nil {
						return err
					}
				}
				if o.Jobs, err = forecast.ReadJobs(manifests, cmp.Or(namespace, "default")); err != nil {
					return err
				}
			}
			if len(args) == 1 {
				o.Dir = args[0]
			} else {
				dir, err := os.MkdirTemp("", "kueuelab-snapshot-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if err := snapshotTo(cmd, kubeconfig, kubeContext, dir); err != nil {
					if kubeconfig == "" {
						return fmt.Errorf("no snapshot directory given, so the cluster of the default kubeconfig ($KUBECONFIG, else ~/.kube/config): %w", err)
					}
					return err
				}
				o.Dir = dir
			}
			// The state's Kueue release, or --kueue-version: another release than the one linked
			// forecasts through that release's kueuelab, from the same directory.
			st, err := state.Load(filepath.Join(o.Dir, state.StateFile))
			if err != nil {
				return err
			}
			rel, err := kueuever.ForCluster(st.KueueVersion)
			if cmd.Flags().Changed("kueue-version") {
				rel, err = kueuever.Lookup(kueueVersion)
			}
			if err != nil {
				return fmt.Errorf("%s: %w; --kueue-version forecasts on one of them", o.Dir, err)
			}
			if rel.Name != kueuelib.KueueVersion {
				return forecastThroughRelease(cmd, rel, o.Dir, namespace)
			}
			if os.Getenv("GOGC") == "" {
				// The runs are Kueue's scheduling cycles, allocation-heavy: a collection at 400 %
				// growth instead of 100 % took 14 % off a deep state's forecast, for twice the peak
				// memory (BenchmarkForecastDeepState's state, 2 repeats: 74 s vs 86 s, 800 vs 365 MiB).
				debug.SetGCPercent(400)
			}
			var bt *forecast.Backtest
			src := o.Dir
			if at != "" {
				atSec, err := forecast.ParseAt(at, st)
				if err != nil {
					return err
				}
				dir, err := os.MkdirTemp("", "kueuelab-backtest-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if bt, err = forecast.RebuildAt(cmd.Context(), o.Dir, atSec, dir, forecast.BacktestOptions{Oracle: oracle}); err != nil {
					return err
				}
				o.Dir, o.HorizonSec = dir, math.Min(o.HorizonSec, bt.NowSec-bt.AtSec)
				if o.Arrivals == "" && !oracle {
					o.Arrivals = state.ArrivalsNone
				}
				if note := forecast.ArrivalsNote(o.Arrivals, oracle); note != "" {
					fmt.Fprintln(cmd.ErrOrStderr(), note)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "backtest at %g s (%s before the snapshot): %d pending, %d admitted, %d finished before, %d created after; %d pending left unscored, %d running without one admission left out\n",
					bt.AtSec, dur(bt.NowSec-bt.AtSec), bt.Pending, bt.Admitted, bt.History, bt.Later, len(bt.Unscored), bt.Unplaced)
			}
			rep, err := forecast.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			var sc *forecast.Score
			if bt != nil {
				rep.State = fmt.Sprintf("%s at %g s", src, bt.AtSec)
				s := forecast.ScoreBacktest(rep, bt)
				sc = &s
			}
			if score != "" {
				d, err := results.Load(score)
				if err != nil {
					return fmt.Errorf("--score: %w", err)
				}
				s := forecast.ScoreAgainst(rep, d)
				sc = &s
			}
			if htmlOut != "" {
				if err := writeForecastHTML(htmlOut, rep); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					*forecast.Report
					Score    *forecast.Score    `json:"score,omitempty"`
					Backtest *forecast.Backtest `json:"backtest,omitempty"`
				}{rep, sc, bt})
			}
			printForecast(out, rep)
			if sc != nil {
				printScore(out, sc)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.IntVar(&o.Repeats, "repeats", 20, "runs, each with its own draws")
	fl.IntVar(&o.Parallel, "parallel", 0, "runs at once (default: the number of CPUs)")
	fl.Uint64Var(&o.Seed, "seed", 1, "seed of the draws")
	fl.DurationVar(&horizon, "horizon", 7*24*time.Hour, "how far past the state's instant each run goes")
	fl.StringVar(&o.Arrivals, "arrivals", "", "none, recorded or history (default: what the state holds)")
	fl.BoolVar(&o.DrawKnown, "draw-known", false, "draw the work left of every workload from the history, even where the state knows it")
	fl.StringVar(&controlPlane, "control-plane", controlplane.DefaultName, `control-plane model: "none", "kueue" or a control-plane file`)
	fl.StringVarP(&output, "output", "o", "table", "output format: table or json")
	fl.StringVar(&score, "score", "", "results directory of the full replay to score the forecast against")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "forecast this cluster's state (snapshotted first) instead of a directory")
	fl.StringVar(&kubeContext, "context", "", "kubeconfig context (default its current one)")
	fl.StringArrayVarP(&manifests, "filename", "f", nil, "manifest of job objects to forecast as if submitted now (repeatable)")
	fl.IntSliceVar(&o.AltGPUs, "alt-gpus", nil, "forecast the -f jobs again at these total GPU counts (e.g. 64,32), each in runs of its own")
	fl.StringVarP(&namespace, "namespace", "n", "", "namespace of -f objects that name none (default: the kubeconfig context's, else default)")
	fl.StringVar(&htmlOut, "html", "", "also write the forecast as an HTML page with a plot of the ETAs")
	fl.StringVar(&backtestDir, "backtest", "", "snapshot directory to backtest on (with --at)")
	fl.StringVar(&at, "at", "", "backtest: forecast from the snapshot's past state at this instant (RFC 3339, -6h before the snapshot, or 7200/2h on its clock) and score it")
	fl.BoolVar(&oracle, "oracle", false, "backtest with every workload's actual run and the recorded arrivals known")
	fl.StringVar(&kueueVersion, "kueue-version", "", "Kueue release to forecast on (default: the one of the state's Kueue minor, else "+kueuever.Default+")")
	return c
}

// forecastThroughRelease runs this forecast in the kueuelab whose sim links release rel, on the
// snapshot directory dir (taken here when the cluster was asked for): the command's flags but the
// cluster's, the directory, the namespace of -f objects as resolved here, and the release.
func forecastThroughRelease(cmd *cobra.Command, rel kueuever.Version, dir, namespace string) error {
	args := []string{"forecast", dir, "--kueue-version", rel.Name}
	if namespace != "" {
		args = append(args, "--namespace", namespace)
	}
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		switch f.Name {
		case "kubeconfig", "context", "kueue-version", "namespace", "backtest":
		case "filename":
			files, ferr := cmd.Flags().GetStringArray("filename")
			err = errors.Join(err, ferr)
			for _, m := range files {
				args = append(args, "--filename", m)
			}
		default:
			args = append(args, "--"+f.Name+"="+f.Value.String())
		}
	})
	if err != nil {
		return err
	}
	return runThroughRelease(cmd.Context(), rel, args, cmd.OutOrStdout(), cmd.ErrOrStderr())
}

func writeForecastHTML(path string, rep *forecast.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	if err := forecast.WriteHTML(f, rep); err != nil {
		_ = f.Close()
		return fmt.Errorf("--html %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--html: %w", err)
	}
	return nil
}

func printForecast(w io.Writer, r *forecast.Report) {
	fmt.Fprintf(w, "forecast from %s at %s (%s) on Kueue %s: %d runs to %s past it, arrivals %s\n", r.State, dur(r.NowSec), r.Source, r.KueueVersion, r.Repeats, dur(r.HorizonSec), r.Arrivals)
	fmt.Fprintf(w, "work left: %d known, %d drawn from %d finished workloads, %d from the trace\n", r.Known, r.Drawn, r.History, r.FromTrace)
	if r.KueueConfig != "" {
		fmt.Fprintf(w, "Kueue configuration: the cluster's, from the state's %s\n", r.KueueConfig)
	}
	if a := r.ArrivalFit; a != nil {
		var qs []string
		for _, q := range a.Queues {
			x := fmt.Sprintf("%s %.2f/h (%d seen", q.Queue, q.PerHour, q.Seen)
			if q.Pooled {
				x += ", shapes of every queue's"
			}
			qs = append(qs, x+")")
		}
		fmt.Fprintf(w, "arrivals fitted to %d workloads over %s (day shape: %s): %s\n", a.Seen, dur(a.WindowSec), a.DayShape, strings.Join(qs, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "WORKLOAD\tNAMESPACE\tQUEUE\tWAITED")
	for _, th := range forecast.Thresholds {
		fmt.Fprintf(tw, "\t≤%s", th.Name)
	}
	fmt.Fprint(tw, "\tETA p10\tp50\tp90\tWAITS FOR\n")
	var reasons []string // the legend of the WAITS FOR column
	var resized []string // how each alternative size was made
	for _, x := range r.Workloads {
		id, waited := x.ID, dur(x.WaitedSec)
		if x.Manifest != "" {
			id, waited = x.Manifest, "new"
		}
		if x.AltGPUs > 0 {
			id = fmt.Sprintf("%s@%dGPUs", x.Manifest, x.AltGPUs)
			resized = append(resized, fmt.Sprintf("  %s: %s", id, x.Resized))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s", id, x.Namespace, x.Queue, waited)
		for _, th := range forecast.Thresholds {
			fmt.Fprintf(tw, "\t%.0f%%", 100*x.Within[th.Name])
		}
		fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\n", durp(x.P10), durp(x.P50), durp(x.P90), waitText(x.WaitsFor, &reasons))
	}
	_ = tw.Flush()
	if len(resized) > 0 {
		fmt.Fprintln(w, "--alt-gpus: each size in runs of its own, the job's work the same (its duration scaled by the GPUs it had over the GPUs it gets; a drawn duration is not):")
		for _, r := range resized {
			fmt.Fprintln(w, r)
		}
	}
	if len(reasons) > 0 {
		fmt.Fprintln(w, "WAITS FOR: Kueue's last reason before the admission, in the share of runs shown (-o json and --html list every reason):")
		for i, r := range reasons {
			fmt.Fprintf(w, "  [%d] %s\n", i+1, r)
		}
	}
	jobs := 0
	for _, x := range r.Workloads {
		if x.Manifest != "" {
			jobs++
		}
	}
	if jobs > 0 {
		fmt.Fprintf(w, "%d pending workloads (%d of them -f jobs, submitted now: waited \"new\"), %.1f s wall\n", len(r.Workloads), jobs, r.WallSec)
		return
	}
	fmt.Fprintf(w, "%d pending workloads, %.1f s wall\n", len(r.Workloads), r.WallSec)
}

// waitText is a pending workload's most frequent reason to wait, as its number in the legend
// reasons (added when new), with its share of the runs and how many other reasons the runs gave.
func waitText(ws []forecast.Wait, reasons *[]string) string {
	if len(ws) == 0 {
		return "-"
	}
	k := slices.Index(*reasons, ws[0].Reason)
	if k < 0 {
		*reasons = append(*reasons, ws[0].Reason)
		k = len(*reasons) - 1
	}
	s := fmt.Sprintf("[%d] %.0f%%", k+1, 100*ws[0].Share)
	if len(ws) > 1 {
		s += fmt.Sprintf(" +%d more", len(ws)-1)
	}
	return s
}

func printScore(w io.Writer, s *forecast.Score) {
	fmt.Fprintf(w, "score against %s: %d pending workloads, actual admission inside p10-p90 for %d (%.0f%%, 95%% CI %.0f-%.0f%%), median |p50 - actual| %s, p50 within 60 s for %d\n",
		s.Run, s.Workloads, s.Inside, 100*s.Coverage, 100*s.CoverageLow, 100*s.CoverageHigh, dur(s.MedianAbsErrSec), s.Within60)
	if s.Unscored > 0 {
		fmt.Fprintf(w, "%d pending workloads left unscored: what happened to them after the instant is not known\n", s.Unscored)
	}
}

func durp(x *float64) string {
	if x == nil {
		return "-"
	}
	return dur(*x)
}

// dur prints seconds as a Go duration rounded to the second.
func dur(sec float64) string {
	if math.IsInf(sec, 0) || math.IsNaN(sec) {
		return "-"
	}
	return (time.Duration(math.Round(sec)) * time.Second).String()
}

// snapshotTo writes the state of the cluster behind kubeconfig to dir, its warnings on stderr.
func snapshotTo(cmd *cobra.Command, kubeconfig, kubeContext, dir string) error {
	rc, err := snapshot.RESTConfig(kubeconfig, kubeContext)
	if err != nil {
		return err
	}
	s, err := snapshot.FromConfig(cmd.Context(), rc, snapshot.Options{Source: "kubeconfig " + cmp.Or(kubeconfig, "(default)")})
	if err != nil {
		return err
	}
	for _, w := range s.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "snapshot: "+w)
	}
	return s.Write(dir)
}
