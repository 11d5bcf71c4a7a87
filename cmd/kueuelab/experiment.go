package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

func newExperimentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Run one trace under several cluster and Kueue configurations",
		Long: `An experiment file names a trace (or generator settings), a base cluster spec and variants,
each a list of typed patch operations on the spec (quotas, cohorts, preemption, fair-sharing weights,
priorities, power caps, node counts), Kueue settings (fair sharing, waitForPodsReady) and an optional
JSON merge patch. See examples/experiments/.`,
	}
	cmd.AddCommand(newExperimentRunCmd(), newExperimentCheckCmd())
	return cmd
}

func newExperimentCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Validate an experiment file and build every variant's cluster spec",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := experiment.Load(args[0])
			if err != nil {
				return err
			}
			for i := range e.Variants {
				v := &e.Variants[i]
				if _, _, err := e.Spec(v); err != nil {
					return err
				}
				var kc []string
				scale, err := v.KueueConfig.Scale(e.Speedup)
				if err != nil {
					return fmt.Errorf("variant %s: %w", v.Name, err)
				}
				for k := range v.KueueConfig.Fields(scale) {
					kc = append(kc, k)
				}
				sort.Strings(kc)
				timers := ""
				if len(kc) > 0 {
					timers = fmt.Sprintf(", Kueue's wall-time settings ÷ %g", scale)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "variant %s: %d operations, kueue config [%s]%s%s: ok\n", v.Name, len(v.Patch), strings.Join(kc, ", "), timers, e.DescribeFaults(v))
			}
			return nil
		},
	}
}

func newExperimentRunCmd() *cobra.Command {
	var (
		out, kubeconfig, binDir, name, agentMode string
		repeats, portBase                        int
		verbose                                  bool
	)
	c := &cobra.Command{
		Use:   "run FILE",
		Short: "Run every variant × repeat of an experiment (resumable)",
		Long: `Runs each variant × repeat on a fresh local cluster (cluster up with the variant's Kueue
configuration, run, cluster down --purge), or with --kubeconfig on that cluster, deleting the
namespaces, queues, flavors and nodes of every variant between runs. Repeat k uses seed + k (and,
with a generator, a trace generated with generator.seed + k, shared by every variant).

Each run writes OUT/<variant>/r<k>/ and, once finished, a 'done' marker holding its summary: a
rerun skips finished runs and redoes cut-short ones. A run that reaches the experiment's timeout
counts as finished (its unfinished workloads are reported). Compare the variants with
'kueuelab report OUT'.

An experiment with 'engine: sim' runs every variant through Kueue's scheduler in virtual time
instead (runtime/sim: no cluster, seconds per run); 'sim: {cycle, podStart}' sets its timing.`,
		Example: `  kueuelab experiment run examples/experiments/quota-sweep.yaml --out results/quota-sweep
  kueuelab report results/quota-sweep --out quota-sweep.html`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := experiment.Load(args[0])
			if err != nil {
				return err
			}
			if out == "" {
				out = filepath.Join("results", strings.TrimSuffix(filepath.Base(args[0]), filepath.Ext(args[0])))
			}
			o := experiment.Options{OutDir: out, Repeats: repeats, Out: cmd.OutOrStdout()}
			if verbose {
				o.Log = cmd.ErrOrStderr()
			}
			if kubeconfig != "" {
				if o.REST, err = cluster.RESTConfig(kubeconfig); err != nil {
					return err
				}
				switch agentMode {
				case "in-process":
				case "cluster":
					o.AgentInCluster = true
				default:
					return fmt.Errorf("--agent %q: want cluster or in-process", agentMode)
				}
			} else {
				dir, err := tools.BinDir(binDir, tools.Pinned())
				if err != nil {
					return err
				}
				o.Local = experiment.LocalCluster{Name: name, BinDir: dir, PortBase: portBase}
			}
			res, err := experiment.Run(cmd.Context(), e, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "experiment %s: %d runs now, %d done earlier; results in %s\n  kueuelab report %s\n",
				res.Manifest.Name, res.Ran, res.Skipped, out, out)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&out, "out", "", "output directory (default results/<experiment file name>)")
	f.IntVar(&repeats, "repeats", 0, "runs per variant (default: the file's repeats)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "run on this cluster instead of a fresh local cluster per run")
	f.StringVar(&agentMode, "agent", "in-process", "with --kubeconfig: 'in-process' (this process drives the pods; exact trace clock) or 'cluster' (the chart's agent Deployment; wall-time clock)")
	f.StringVar(&binDir, "bin-dir", "", "control-plane binaries (env "+tools.BinDirEnv+"; default: the tools cache)")
	f.StringVar(&name, "name", "experiment", "name of the local cluster the runs use (replaced at each run)")
	f.IntVar(&portBase, "port-base", 0, fmt.Sprintf("first of the local cluster's 17 loopback ports (default %d)", cluster.DefaultPortBase))
	f.BoolVarP(&verbose, "verbose", "v", false, "show cluster start/stop and each run's summary table on stderr")
	return c
}
