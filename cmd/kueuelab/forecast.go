package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/forecast"
	"github.com/kueuelab/kueuelab/runtime/results"
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
	)
	c := &cobra.Command{
		Use:   "forecast (DIR | --kubeconfig K)",
		Short: "When will each pending workload start: the sim engine run forward from a cluster's state",
		Long: `forecast answers "when will my job start?" for every pending workload of a cluster's state:
a snapshot directory, written by ` + "`kueuelab snapshot`" + ` from a live cluster or by a sim replay
stopped at a trace time (run --engine sim --sim-max-trace T --state-out DIR). It resumes Kueue
v0.19.2's own scheduler from that state in the sim engine, --repeats times, and reports per
pending workload the share of runs that admitted it within 15 minutes, 1, 4 and 24 hours, and
the 10th, 50th and 90th percentiles of its time to admission ("-" when that share of runs did
not admit it within --horizon).

The work a workload has left is what the state knows (a replay's state knows all of it; a
cluster's, what a job's kueuelab.io/duration-sec says), else each run draws it from the state's
history of finished workloads: a finished duration of the same namespace and family (or family,
or any) longer than what the workload has already run, minus that. With no history, the trace's
durations stand. --draw-known draws even what the state knows, to measure the draws.

--arrivals says whether workloads submitted after the state's instant take part: none (only the
live ones) or recorded (the trace's later workloads, as a replay's state holds them; the
default is what the state holds). --control-plane charges Kueue's own speed (default kueue,
the built-in model; none for an infinitely fast Kueue).

--kubeconfig K (with --context C) snapshots that cluster first, as kueuelab snapshot does, into a
temporary directory it removes afterwards.

--score RUN_DIR compares the forecast with what happened: the results of the replay the state
was taken from, run to the end. It prints how often the actual time to admission fell inside
the p10-p90 interval (with its 95% Wilson interval) and the median absolute error of the p50.`,
		Example: `  kueuelab run --engine sim --gen-jobs 300 --gen-span 12h --seed 1 --cluster examples/clusters/teams.yaml --out results/full
  kueuelab run --engine sim --trace results/full/trace.jsonl --cluster examples/clusters/teams.yaml --sim-max-trace 6h --state-out state6h --out results/6h
  kueuelab forecast state6h --repeats 50
  kueuelab forecast state6h --draw-known --score results/full -o json
  kueuelab forecast --kubeconfig ~/.kube/config --repeats 50`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (len(args) == 1) == (kubeconfig != "") {
				return errors.New("give exactly one of a snapshot directory and --kubeconfig")
			}
			if kubeContext != "" && kubeconfig == "" {
				return errors.New("--context goes with --kubeconfig")
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
			if kubeconfig == "" {
				o.Dir = args[0]
			} else {
				dir, err := os.MkdirTemp("", "kueuelab-snapshot-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				if err := snapshotTo(cmd, kubeconfig, kubeContext, dir); err != nil {
					return err
				}
				o.Dir = dir
			}
			rep, err := forecast.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			var sc *forecast.Score
			if score != "" {
				d, err := results.Load(score)
				if err != nil {
					return fmt.Errorf("--score: %w", err)
				}
				s := forecast.ScoreAgainst(rep, d)
				sc = &s
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					*forecast.Report
					Score *forecast.Score `json:"score,omitempty"`
				}{rep, sc})
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
	fl.StringVar(&o.Arrivals, "arrivals", "", "none or recorded (default: what the state holds)")
	fl.BoolVar(&o.DrawKnown, "draw-known", false, "draw the work left of every workload from the history, even where the state knows it")
	fl.StringVar(&controlPlane, "control-plane", controlplane.DefaultName, `control-plane model: "none", "kueue" or a control-plane file`)
	fl.StringVarP(&output, "output", "o", "table", "output format: table or json")
	fl.StringVar(&score, "score", "", "results directory of the full replay to score the forecast against")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "forecast this cluster's state (snapshotted first) instead of a directory")
	fl.StringVar(&kubeContext, "context", "", "kubeconfig context (default its current one)")
	return c
}

func printForecast(w io.Writer, r *forecast.Report) {
	fmt.Fprintf(w, "forecast from %s at %s (%s): %d runs to %s past it, arrivals %s\n", r.State, dur(r.NowSec), r.Source, r.Repeats, dur(r.HorizonSec), r.Arrivals)
	fmt.Fprintf(w, "work left: %d known, %d drawn from %d finished workloads, %d from the trace\n", r.Known, r.Drawn, r.History, r.FromTrace)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "WORKLOAD\tNAMESPACE\tQUEUE\tWAITED")
	for _, th := range forecast.Thresholds {
		fmt.Fprintf(tw, "\t≤%s", th.Name)
	}
	fmt.Fprint(tw, "\tETA p10\tp50\tp90\n")
	for _, x := range r.Workloads {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s", x.ID, x.Namespace, x.Queue, dur(x.WaitedSec))
		for _, th := range forecast.Thresholds {
			fmt.Fprintf(tw, "\t%.0f%%", 100*x.Within[th.Name])
		}
		fmt.Fprintf(tw, "\t%s\t%s\t%s\n", durp(x.P10), durp(x.P50), durp(x.P90))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "%d pending workloads, %.1f s wall\n", len(r.Workloads), r.WallSec)
}

func printScore(w io.Writer, s *forecast.Score) {
	fmt.Fprintf(w, "score against %s: %d pending workloads, actual admission inside p10-p90 for %d (%.0f%%, 95%% CI %.0f-%.0f%%), median |p50 - actual| %s\n",
		s.Run, s.Workloads, s.Inside, 100*s.Coverage, 100*s.CoverageLow, 100*s.CoverageHigh, dur(s.MedianAbsErrSec))
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
	s, err := snapshot.FromConfig(cmd.Context(), rc, snapshot.Options{Source: "kubeconfig " + kubeconfig})
	if err != nil {
		return err
	}
	for _, w := range s.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "snapshot: "+w)
	}
	return s.Write(dir)
}
