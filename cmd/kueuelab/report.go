package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/report"
)

func newReportCmd() *cobra.Command {
	var out, baseline string
	c := &cobra.Command{
		Use:   "report DIR...",
		Short: "Compare the variants of an experiment: tables with confidence intervals and plots in one HTML file",
		Long: `Loads every finished run under the given directories (an experiment's output directory, a
variant's directory, or single results directories), prints per metric a table of each variant's
mean over repeats with its 95% confidence interval and its delta against the baseline, and writes a
self-contained HTML file (plots embedded) plus the tables as JSON and CSV next to it.`,
		Example: "  kueuelab report results/quota-sweep --out quota-sweep.html\n  kueuelab report runs/a runs/b --baseline a",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := report.Load(args, baseline)
			if err != nil {
				return err
			}
			r := report.Compute(in)
			plots, err := report.Plots(in, r)
			if err != nil {
				return err
			}
			if err := r.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			stem := strings.TrimSuffix(out, ".html")
			write := func(path string, f func(*os.File) error) error {
				fh, err := os.Create(path)
				if err != nil {
					return err
				}
				return errors.Join(f(fh), fh.Close())
			}
			err = errors.Join(
				write(out, func(f *os.File) error { return report.WriteHTML(f, r, plots, time.Now()) }),
				write(stem+".json", func(f *os.File) error { return r.WriteJSON(f) }),
				write(stem+".csv", func(f *os.File) error { return r.WriteCSV(f) }),
			)
			if err != nil {
				return fmt.Errorf("report: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nreport: %s (%d plots), %s.json, %s.csv\n", out, len(plots), stem, stem)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "report.html", "HTML file to write (the .json and .csv go next to it)")
	c.Flags().StringVar(&baseline, "baseline", "", "variant deltas are measured against (default: the experiment's baseline, else the first)")
	return c
}
