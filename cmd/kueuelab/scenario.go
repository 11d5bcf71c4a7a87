package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/scenario"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

const defaultScenarioDir = "examples/scenarios"

func newScenarioCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenario",
		Short: "The scheduling challenges of AI workloads, runnable and checked",
		Long: `A scenario shows one scheduling challenge of the CNCF cloud-native AI whitepaper (gang scheduling,
priority and preemption, quota borrowing, fair sharing, topology, backfill, fault tolerance,
scalability) as an experiment (a trace, a cluster spec, variants, faults) plus the outcomes it must
show, stated as checks on the results. The library lives in examples/scenarios, one directory each.`,
	}
	cmd.AddCommand(newScenarioListCmd(), newScenarioRunCmd())
	return cmd
}

func newScenarioListCmd() *cobra.Command {
	var dir string
	var showMetrics bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the scenarios (and the challenges not covered yet)",
		Example: `  kueuelab scenario list
  # the metrics a scenario's checks can name
  kueuelab scenario list --metrics`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if showMetrics {
				m := scenario.Metrics()
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				for _, name := range scenario.MetricNames() {
					fmt.Fprintf(tw, "%s\t%s\n", name, m[name])
				}
				return tw.Flush()
			}
			entries, err := scenario.List(dir)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCHALLENGE\tIN make test\tDESCRIPTION")
			var bad []error
			for _, e := range entries {
				if e.Err != nil {
					fmt.Fprintf(tw, "%s\t(does not load)\t\t%v\n", filepath.Base(e.Dir), e.Err)
					bad = append(bad, e.Err)
					continue
				}
				ci := "no (KUEUELAB_E2E_SCENARIOS=all)"
				if e.CI {
					ci = "yes"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Name, e.Challenge, ci, e.Description)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(scenario.NotCovered) > 0 {
				fmt.Fprintln(out, "\nnot covered yet:")
				for _, n := range scenario.NotCovered {
					fmt.Fprintf(out, "  %s: %s\n", n.Challenge, n.Why)
				}
			}
			return errors.Join(bad...)
		},
	}
	c.Flags().StringVar(&dir, "dir", defaultScenarioDir, "scenario library directory")
	c.Flags().BoolVar(&showMetrics, "metrics", false, "list the metrics a check can name instead")
	return c
}

func newScenarioRunCmd() *cobra.Command {
	var (
		dir, out, kubeconfig, binDir, name string
		portBase                           int
		verbose                            bool
	)
	c := &cobra.Command{
		Use:   "run NAME|PATH",
		Short: "Run a scenario, print PASS or FAIL per expected outcome, write results and a report",
		Long: `Runs the scenario's experiment like 'experiment run' (every variant on a fresh local cluster, or with
--kubeconfig on that cluster reset between variants; a scenario whose variants change Kueue's
configuration always needs fresh local clusters), then evaluates its checks on the results and
prints PASS or FAIL with the values measured. OUT holds the usual results per variant, report.html
and checks.json. Exits non-zero when a check fails. A rerun reuses the finished runs in OUT.`,
		Example: `  kueuelab scenario run gang
  kueuelab scenario run examples/scenarios/fault-tolerance --out results/ft`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if _, err := os.Stat(path); err != nil {
				path = filepath.Join(dir, args[0])
			}
			s, err := scenario.Load(path)
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join("results", "scenario-"+s.Name)
			}
			o := scenario.Options{OutDir: out, Out: cmd.OutOrStdout()}
			if verbose {
				o.Log = cmd.ErrOrStderr()
			}
			if kubeconfig != "" {
				if o.REST, err = cluster.RESTConfig(kubeconfig); err != nil {
					return err
				}
			}
			bin, err := tools.BinDir(binDir, tools.Pinned())
			if err != nil {
				return err
			}
			o.Local = experiment.LocalCluster{Name: name, BinDir: bin, PortBase: portBase}
			res, err := scenario.Run(cmd.Context(), s, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "results, %s and %s in %s\n", scenario.ReportFile, scenario.ChecksFile, out)
			if !res.Pass {
				return fmt.Errorf("scenario %s: expected outcomes not met", s.Name)
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "dir", defaultScenarioDir, "scenario library directory (NAME is looked up there)")
	f.StringVar(&out, "out", "", "output directory (default results/scenario-<name>)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "run on this cluster (reset between variants) instead of fresh local clusters")
	f.StringVar(&binDir, "bin-dir", "", "control-plane binaries (env "+tools.BinDirEnv+"; default: the tools cache)")
	f.StringVar(&name, "name", "scenario", "name of the local clusters the runs use (replaced at each run)")
	f.IntVar(&portBase, "port-base", 0, fmt.Sprintf("first of the local cluster's 17 loopback ports (default %d)", localcluster.DefaultPortBase))
	f.BoolVarP(&verbose, "verbose", "v", false, "show cluster start/stop and each run's summary table on stderr")
	return c
}
