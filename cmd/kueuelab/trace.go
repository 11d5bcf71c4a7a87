package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/model/trace"
)

func newTraceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Work with trace files (schema v2 JSON Lines)",
		Long: `Commands on kueuelab traces: JSON Lines files of type=workload and type=job records
(schema v2), plain or gzip-compressed.`,
		Example: "  kueuelab trace inspect t.jsonl\n  kueuelab trace import --format helios cluster_log.csv --out helios.jsonl",
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(newTraceInspectCmd(), newTraceImportCmd())
	return cmd
}

func newTraceInspectCmd() *cobra.Command {
	var (
		lenient bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Validate a trace and print its statistics",
		Long: `Validate a trace and print its statistics: workloads and pods per family, the mix of GPUs
per workload, duration quantiles per family (nearest rank), arrivals per hour of day, total
GPU-hours (sum of total GPUs x durationSec / 3600) and the intent-class mix.

FILE may be gzip-compressed (detected from its content) or "-" for standard input. A trace of job
records only has its logical workloads rebuilt from the jobs.

Validation is strict: the first bad line (malformed JSON, a missing or mistyped field, a bad
quantity, a negative or out-of-range number, a duplicate id, records that contradict each other)
is an error naming file:line and the field, and the command exits non-zero. With --lenient bad
lines are skipped, the logical workloads they belong to are left out, and all of it is listed.
Unknown fields are ignored with one warning per field on standard error.`,
		Example: `  # Statistics as tables
  kueuelab trace inspect t.jsonl

  # Machine-readable, from a compressed trace
  kueuelab trace inspect -o json t.jsonl.gz

  # Skip bad lines instead of failing, and list them
  kueuelab gen --jobs 1000 --seed 7 --out - | kueuelab trace inspect --lenient -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: want table or json", output)
			}
			stderr := cmd.ErrOrStderr()
			st, err := trace.Inspect(cmd.Context(), args[0], trace.Options{
				Lenient: lenient,
				Warn:    func(msg string) { fmt.Fprintln(stderr, "warning:", msg) },
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return st.WriteTable(out)
		},
	}
	cmd.Flags().BoolVar(&lenient, "lenient", false, "skip bad lines (counted and listed) instead of failing on the first")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
