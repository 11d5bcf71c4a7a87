package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/compare"
	"github.com/kueuelab/kueuelab/runtime/results"
)

func newCompareCmd() *cobra.Command {
	var csvOut string
	var top int
	var check bool
	c := &cobra.Command{
		Use:   "compare A B",
		Short: "Put two runs of the same trace side by side, per workload and as a whole",
		Long: `Compares results directory B against A (typically the cluster engine and the sim engine on one
trace): per workload its final state, admission order, time to admission (TTA), job completion
time (JCT) and preemptions; as a whole the agreement criteria — the same workloads finish,
median JCT within 2 %, TTA p50 and p95 within 10 % (or a minute), preemptions within 10 % (or
two), GPU allocation within 2 % — and the workloads whose JCT differs most. --csv writes every
workload's row; --check exits non-zero when the runs do not agree.`,
		Example: "  kueuelab compare results/cluster results/sim --csv diff.csv\n  kueuelab compare results/a results/b --check",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := results.Load(args[0])
			if err != nil {
				return err
			}
			b, err := results.Load(args[1])
			if err != nil {
				return err
			}
			r, err := compare.Compare(a, b, compare.DefaultTolerances)
			if err != nil {
				return err
			}
			if err := r.WriteText(cmd.OutOrStdout(), top); err != nil {
				return err
			}
			if csvOut != "" {
				f, err := os.Create(csvOut)
				if err != nil {
					return err
				}
				if err := errors.Join(r.WriteCSV(f), f.Close()); err != nil {
					return fmt.Errorf("compare: %w", err)
				}
			}
			if check && !r.Agree() {
				return errors.New("compare: the runs differ beyond the tolerances")
			}
			return nil
		},
	}
	c.Flags().StringVar(&csvOut, "csv", "", "write the per-workload comparison to this CSV file")
	c.Flags().IntVar(&top, "top", 15, "list this many workloads whose JCT differs most")
	c.Flags().BoolVar(&check, "check", false, "exit non-zero unless the runs agree within the tolerances")
	return c
}
