package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
)

func newProfileCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "profile",
		Short: "Inspect generator profiles (the priors of 'kueuelab gen')",
		Long: `A profile is one versioned YAML file holding every prior of the workload generator: arrival
shape, family mix, GPU footprint, durations, intensity ranges, pod sizes and intent classes. The
default is embedded in kueuelab; 'kueuelab gen --profile FILE' uses another one.`,
		Example: `  kueuelab profile show
  kueuelab profile show --profile my.yaml
  kueuelab profile fit t.jsonl > fitted.yaml`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newProfileShowCmd(), newProfileFitCmd())
	return cmd
}

func newProfileShowCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "show",
		Short: "Validate a generator profile and print it as YAML",
		Long: `show prints a generator profile after validating it: the embedded default, or the file
given with --profile. The output is a valid profile to copy, edit and pass to 'kueuelab gen --profile'.
A profile that fails validation is not printed; every problem is reported with file, line and field.`,
		Example: `  # the embedded default priors
  kueuelab profile show

  # start your own profile from the default and check it
  kueuelab profile show > my.yaml
  kueuelab profile show --profile my.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data := gen.DefaultProfileYAML()
			if path != "" {
				var err error
				if _, data, err = gen.LoadProfile(path); err != nil {
					return err
				}
			} else if _, err := gen.DefaultProfile(); err != nil {
				return err
			}
			_, err := cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().StringVar(&path, "profile", "", "profile YAML to validate and print (default: the embedded profile)")
	return cmd
}

func newProfileFitCmd() *cobra.Command {
	var lenient bool
	cmd := &cobra.Command{
		Use:   "fit TRACE",
		Short: "Estimate a generator profile from a trace",
		Long: `fit estimates every prior of the generator's profile from a trace and prints the profile as
YAML on standard output, and the goodness of fit on standard error: per family the clamped
lognormal fitted to its durations with its Kolmogorov-Smirnov distance, and chi-square tests of
what the profile assumes (one GPU-count, intent and team mix for every family, one hourly arrival
shape for every day).

How each prior is estimated is documented on gen.Fit: observed shares for the mixes; censored
maximum likelihood for durations (the clamps are the extremes, censored when durations pile up
there; a larger median for large-GPU workloads when a likelihood-ratio test finds one); hourly
rates outside bursts and bursts from a hidden Markov model of the gaps; unbiased uniform bounds
for intensity and sensitivity ranges; least squares for pod sizes. What the trace cannot tell keeps
the embedded default's value and is listed as a note.

'kueuelab gen --profile fitted.yaml' then generates traces like TRACE.`,
		Example: `  kueuelab profile fit t.jsonl > fitted.yaml
  kueuelab gen --profile fitted.yaml --jobs 10000 --out like-t.jsonl

  # a public trace, through import
  kueuelab trace import --format helios cluster_log.csv --out helios.jsonl
  kueuelab profile fit helios.jsonl > helios.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			tr, err := trace.LoadWorkloads(cmd.Context(), args[0], trace.Options{Lenient: lenient,
				Warn: func(msg string) { fmt.Fprintln(stderr, "warning:", msg) }})
			if err != nil {
				return err
			}
			p, rep, err := gen.Fit(tr)
			if err != nil {
				return err
			}
			y, err := p.YAML()
			if err != nil {
				return err
			}
			if err := rep.WriteTable(stderr); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "# kueuelab generator profile fitted to %s (%d workloads) by 'kueuelab profile fit'.\n", args[0], len(tr.Workloads))
			_, err = out.Write(y)
			return err
		},
	}
	cmd.Flags().BoolVar(&lenient, "lenient", false, "skip bad lines of the trace (listed) instead of failing on the first")
	return cmd
}
