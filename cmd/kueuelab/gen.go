package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
)

// progressMinWorkloads is the size from which gen shows a progress bar (on a terminal only).
const progressMinWorkloads = 200000

func newGenCmd() *cobra.Command {
	var (
		jobs        int
		seed        uint64
		emit        bool
		profilePath string
		out         string
	)
	// Flag defaults show the embedded profile's values; a flag overrides the profile only when set.
	def, err := gen.DefaultProfile()
	if err != nil {
		panic(fmt.Sprintf("embedded profile is invalid: %v", err)) // a build defect, caught by the tests
	}
	var ov gen.Profile
	cmd := &cobra.Command{
		Use:   "gen",
		Short: "Generate a synthetic AI workload trace (JSONL, schema v2)",
		Long: `gen samples logical AI workloads from a profile of priors and writes them as a trace of
JSON Lines: one type=job record per pod, preceded by a type=workload record per logical workload
with --emit-workload-records. Records come in submit order.

The model: day-shaped Poisson arrivals (hourly multipliers, optional burst days); GPU families
(debug_eval, single_gpu_training, distributed_training, parameter_server_training, hpo_experiment)
with probability --gpu-ratio, CPU families otherwise; GPU footprint, clamped lognormal durations,
intensity profile, pod structure, work units, sensitivity and intent class per workload. Every prior
lives in the profile: see 'kueuelab profile show'. Flags override the profile only when given.

The same seed and profile give byte-identical output on any machine.`,
		Example: `  # 1000 workloads with their workload records, as the README does
  kueuelab gen --jobs 1000 --seed 7 --emit-workload-records --out t.jsonl

  # a compressed month-scale trace with more eco work and burst days
  kueuelab gen --jobs 100000 --eco-ratio 0.4 --burst-day-probability 0.2 --out big.jsonl.gz

  # your own priors
  kueuelab profile show > my.yaml && kueuelab gen --profile my.yaml --jobs 500 | head`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobs < 0 {
				return fmt.Errorf("--jobs must be >= 0, got %d", jobs)
			}
			p, name := def, gen.DefaultProfileName
			if profilePath != "" {
				if p, _, err = gen.LoadProfile(profilePath); err != nil {
					return err
				}
				name = profilePath
			}
			applyOverrides(cmd, p, &ov)
			if err := p.Validate(name + " with flag overrides"); err != nil {
				return err
			}
			return runGen(cmd, p, seed, jobs, emit, out)
		},
	}
	f := cmd.Flags()
	f.IntVar(&jobs, "jobs", 1000, "number of logical workloads to generate")
	f.Uint64Var(&seed, "seed", 1, "random seed (same seed, same profile: byte-identical trace)")
	f.Float64Var(&ov.Arrival.MeanInterArrivalSec, "mean-inter-arrival-sec", def.Arrival.MeanInterArrivalSec, "mean seconds between submissions at hourly multiplier 1")
	f.Float64Var(&ov.GPURatio, "gpu-ratio", def.GPURatio, "share of GPU-family workloads")
	f.Float64Var(&ov.Intent.PerformanceRatio, "perf-ratio", def.Intent.PerformanceRatio, "share of workloads with intentClass performance")
	f.Float64Var(&ov.Intent.EcoRatio, "eco-ratio", def.Intent.EcoRatio, "share of workloads with intentClass eco")
	f.Float64Var(&ov.Arrival.Burst.DayProbability, "burst-day-probability", def.Arrival.Burst.DayProbability, "probability that a day has a submission burst")
	f.Float64Var(&ov.Arrival.Burst.Multiplier, "burst-multiplier", def.Arrival.Burst.Multiplier, "arrival rate multiplier during a burst")
	f.Float64Var(&ov.Arrival.Burst.MeanJobs, "burst-mean-jobs", def.Arrival.Burst.MeanJobs, "mean number of workloads in a burst")
	f.Float64Var(&ov.Work.CPURatePerCore, "cpu-work-rate-per-core", def.Work.CPURatePerCore, "work units per busy core-second")
	f.Float64Var(&ov.Work.GPURatePerGPU, "gpu-work-rate-per-gpu", def.Work.GPURatePerGPU, "work units per busy GPU-second")
	f.BoolVar(&emit, "emit-workload-records", false, "write a type=workload record before each workload's job records")
	f.StringVar(&profilePath, "profile", "", "profile YAML with the priors (default: the embedded profile)")
	f.StringVar(&out, "out", "-", `output file ("-" for stdout; a name ending in .gz is gzip-compressed)`)
	return cmd
}

// applyOverrides copies into p the profile fields whose flags were given.
func applyOverrides(cmd *cobra.Command, p, ov *gen.Profile) {
	for _, o := range []struct {
		flag     string
		dst, src *float64
	}{
		{"mean-inter-arrival-sec", &p.Arrival.MeanInterArrivalSec, &ov.Arrival.MeanInterArrivalSec},
		{"gpu-ratio", &p.GPURatio, &ov.GPURatio},
		{"perf-ratio", &p.Intent.PerformanceRatio, &ov.Intent.PerformanceRatio},
		{"eco-ratio", &p.Intent.EcoRatio, &ov.Intent.EcoRatio},
		{"burst-day-probability", &p.Arrival.Burst.DayProbability, &ov.Arrival.Burst.DayProbability},
		{"burst-multiplier", &p.Arrival.Burst.Multiplier, &ov.Arrival.Burst.Multiplier},
		{"burst-mean-jobs", &p.Arrival.Burst.MeanJobs, &ov.Arrival.Burst.MeanJobs},
		{"cpu-work-rate-per-core", &p.Work.CPURatePerCore, &ov.Work.CPURatePerCore},
		{"gpu-work-rate-per-gpu", &p.Work.GPURatePerGPU, &ov.Work.GPURatePerGPU},
	} {
		if cmd.Flags().Changed(o.flag) {
			*o.dst = *o.src
		}
	}
}

func runGen(cmd *cobra.Command, p *gen.Profile, seed uint64, n int, emit bool, out string) error {
	// Stdout goes through cobra's writer, so callers that redirect the command's output get the trace.
	w := trace.NewWriter(cmd.OutOrStdout())
	closeOut := w.Flush
	if out != "-" {
		fw, err := trace.Create(out)
		if err != nil {
			return err
		}
		w, closeOut = fw.Writer, fw.Close
	}
	opts := gen.Options{Workloads: n, EmitWorkloadRecords: emit}
	stderr := cmd.ErrOrStderr()
	if f, ok := stderr.(*os.File); ok && n >= progressMinWorkloads && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions(n,
			progressbar.OptionSetWriter(f),
			progressbar.OptionSetDescription("generating"),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish())
		opts.Progress = func(done int) { _ = bar.Set(done) }
		defer func() { _ = bar.Finish() }()
	}
	st, genErr := gen.Write(cmd.Context(), w, gen.New(p, seed), opts)
	closeErr := closeOut()
	if err := errors.Join(genErr, closeErr); err != nil {
		return err
	}
	dest := out
	if out == "-" {
		dest = "stdout"
	}
	fmt.Fprintf(stderr, "kueuelab gen: %d workloads, %d job records -> %s\n", st.Workloads, st.Jobs, dest)
	return nil
}
