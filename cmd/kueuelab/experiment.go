package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

func newExperimentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Run one trace under several cluster and Kueue configurations",
		Long: `An experiment file names a trace (or generator settings), a base cluster spec and variants,
each a list of typed patch operations on the spec (quotas of queues and cohorts, cohorts and cohort
trees, preemption, fair-sharing weights, priorities, power caps, node counts), Kueue settings (fair
sharing, waitForPodsReady) and an optional JSON merge patch. See examples/experiments/.`,
	}
	cmd.AddCommand(newExperimentRunCmd(), newExperimentCheckCmd(), newExperimentRenderJobCmd(), newExperimentMergeCmd())
	return cmd
}

func newExperimentCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "check FILE",
		Short:   "Validate an experiment file and build every variant's cluster spec",
		Example: `  kueuelab experiment check examples/experiments/quota-sweep.yaml`,
		Args:    cobra.ExactArgs(1),
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
				for k := range v.KueueConfig.Fields() {
					kc = append(kc, k)
				}
				sort.Strings(kc)
				fmt.Fprintf(cmd.OutOrStdout(), "variant %s: %d operations, kueue config [%s]%s: ok\n", v.Name, len(v.Patch), strings.Join(kc, ", "), e.DescribeFaults(v))
			}
			return nil
		},
	}
}

func newExperimentRunCmd() *cobra.Command {
	var (
		out, kubeconfig, binDir, name, indexEnv string
		repeats, portBase, parallel, index      int
		verbose, inProcess                      bool
		remoteF                                 remoteFlags
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

--parallel N runs N variant × repeat runs at once, each on its own local cluster (named
<name>-<i>, its ports 100 apart from --port-base): about 2 cores and 2-3 GB of memory each.
--index I (or --index-from-env VAR, e.g. JOB_COMPLETION_INDEX) runs only run number I: variant
I ÷ repeats, repeat I mod repeats, as one pod of 'kueuelab experiment render-job' does.

With --kubeconfig the agent runs in this process on the exact trace clock, reading that
cluster's Kueue and kube-scheduler metrics as 'kueuelab run --kubeconfig' does.

An experiment with 'engine: sim' runs every variant through Kueue's scheduler in virtual time
instead (runtime/sim: no cluster, seconds per run); 'sim: {cycle, podStart}' sets its timing.`,
		Example: `  kueuelab experiment run examples/experiments/quota-sweep.yaml --out results/quota-sweep
  kueuelab experiment run examples/experiments/quota-sweep.yaml --out results/quota-sweep --parallel 3
  JOB_COMPLETION_INDEX=2 kueuelab experiment run sweep.yaml --out results/sweep --index-from-env JOB_COMPLETION_INDEX
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
			o := experiment.Options{OutDir: out, Repeats: repeats, Parallel: parallel, Out: cmd.OutOrStdout(), InProcess: inProcess}
			if verbose {
				o.Log = cmd.ErrOrStderr()
			}
			if cmd.Flags().Changed("index") && indexEnv != "" {
				return errors.New("give --index or --index-from-env, not both")
			}
			if cmd.Flags().Changed("index") {
				o.Index = &index
			}
			if indexEnv != "" {
				v, ok := os.LookupEnv(indexEnv)
				i, err := strconv.Atoi(v)
				if !ok || err != nil {
					return fmt.Errorf("--index-from-env %s: $%s=%q, want a run index (0, 1, ...)", indexEnv, indexEnv, v)
				}
				o.Index = &i
			}
			if kubeconfig != "" {
				if o.REST, err = cluster.RESTConfig(kubeconfig); err != nil {
					return err
				}
				if err := cluster.CheckInstalled(cmd.Context(), o.REST); err != nil {
					return err
				}
				if o.AgentInCluster, err = remoteF.agentInClusterMode(); err != nil {
					return err
				}
				if !o.AgentInCluster {
					r, err := connectRemote(cmd.Context(), o.REST, &remoteF, cmd.OutOrStdout())
					if err != nil {
						return err
					}
					defer r.close()
					o.KueueMetrics, o.SchedulerMetrics, o.Timers, o.Kueue = r.kueue, r.scheduler, r.timers, r.meta
				}
			} else {
				dir, err := tools.BinDir(binDir, tools.Pinned())
				if err != nil {
					return err
				}
				o.Local = experiment.LocalCluster{Name: name, BinDir: dir, PortBase: portBase}
			}
			if e.Engine == results.EngineSim {
				defer tuneGCForSim()()
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
	f.StringVar(&binDir, "bin-dir", "", "control-plane binaries (env "+tools.BinDirEnv+"; default: the tools cache)")
	f.StringVar(&name, "name", "experiment", "name of the local cluster the runs use (replaced at each run)")
	f.IntVar(&portBase, "port-base", 0, "first of the local cluster's loopback ports (default: derived from --name); parallel runs add 100 per run")
	f.IntVar(&parallel, "parallel", 1, "runs at once, each on its own local cluster (not with --kubeconfig)")
	f.IntVar(&index, "index", 0, "run only this run number (variant = index ÷ repeats, repeat = index mod repeats)")
	f.StringVar(&indexEnv, "index-from-env", "", "read --index from this environment variable (JOB_COMPLETION_INDEX in an Indexed Job)")
	remoteF.register(f)
	f.BoolVarP(&verbose, "verbose", "v", false, "show cluster start/stop and each run's summary table on stderr")
	// Set by kueuelab itself on the process of its own it starts for a sim run on another Kueue
	// release or with feature gates.
	f.BoolVar(&inProcess, "in-process", false, "run every sim run in this process")
	_ = f.MarkHidden("in-process")
	return c
}

func newExperimentRenderJobCmd() *cobra.Command {
	var o experiment.JobOptions
	var out string
	c := &cobra.Command{
		Use:   "render-job FILE",
		Short: "Render the experiment as a Kubernetes Indexed Job: one pod per variant × repeat",
		Long: `Writes a ConfigMap holding the experiment's inputs (the experiment file, its cluster spec, its trace
or profile) and an Indexed Job whose completion index i runs run i of the experiment (variant
i ÷ repeats, repeat i mod repeats) in the runner image (` + "`make image`" + `): each pod starts its own local
cluster and writes <results>/<name>/<variant>/r<k>/, the layout 'experiment run' writes. Each pod
requests what one replay needs (default 2 CPUs, 3Gi; limit 6Gi) and an 8Gi scratch emptyDir.

--results pvc:CLAIM[/DIR] writes to a ReadWriteMany PersistentVolumeClaim; --results
gs://BUCKET[/PREFIX] to Cloud Storage through GKE's Cloud Storage FUSE CSI driver (give a
--service-account with write access). The command that collects and merges the results into one
report is printed at the top of the output.

A pod runs exactly this, in /work with inputs/ and results/ mounted:
  kueuelab experiment run inputs/experiment.yaml --out results/<name> --index-from-env JOB_COMPLETION_INDEX
so one index can be run on a workstation the same way (see the README).`,
		Example: `  kueuelab experiment render-job examples/experiments/quota-sweep.yaml --results pvc:kueuelab-results --out sweep-job.yaml
  kubectl apply -f sweep-job.yaml && kubectl wait --for=condition=Complete job/quota-sweep --timeout=2h`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			e, err := experiment.Load(args[0])
			if err != nil {
				return err
			}
			if o.Image == "" {
				v := kueuelabVersion()
				if v == "devel" {
					return errors.New("--image is required (this kueuelab was built without a version; make build sets the chart's appVersion)")
				}
				o.Image = image.RunnerRepository + ":" + v
			}
			b, err := experiment.RenderJob(e, o)
			if err != nil {
				return err
			}
			doc, err := b.YAML()
			if err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(doc)
				return err
			}
			if err := os.WriteFile(out, doc, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: ConfigMap %s and Indexed Job %s (%d completions)\n%s", out, b.ConfigMap.Name, b.Job.Name, *b.Job.Spec.Completions, b.Collect)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&out, "out", "", "file to write (default: stdout)")
	f.StringVar(&o.Name, "name", "", "name of the Job and its ConfigMap (default: the experiment's metadata.name)")
	f.StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the Job (default: none, kubectl's)")
	f.StringVar(&o.Image, "image", "", "runner image (default "+image.RunnerRepository+":<this version>)")
	f.StringVar(&o.Results, "results", "", "where the pods write: pvc:CLAIM[/DIR], gs://BUCKET[/PREFIX] or hostpath:/DIR (required)")
	f.StringToStringVar(&o.NodeSelector, "node-selector", nil, "node labels the pods need (key=value,...)")
	f.Var(tolerationsFlag{&o.Tolerations}, "toleration", "a taint the pods tolerate, KEY[=VALUE]:EFFECT as kubectl taint writes it (repeatable)")
	f.IntVar(&o.Repeats, "repeats", 0, "runs per variant (default: the file's repeats)")
	f.IntVar(&o.Parallelism, "parallelism", 0, "pods at once (default: all)")
	f.StringVar(&o.CPU, "cpu", "2", "CPU request per pod")
	f.StringVar(&o.Memory, "memory", "3Gi", "memory request per pod")
	f.StringVar(&o.MemoryLimit, "memory-limit", "6Gi", "memory limit per pod")
	f.StringVar(&o.ServiceAccount, "service-account", "", "service account of the pods")
	_ = c.MarkFlagRequired("results")
	return c
}

func newExperimentMergeCmd() *cobra.Command {
	var out string
	var partial bool
	c := &cobra.Command{
		Use:   "merge SRC... --out DIR",
		Short: "Gather the finished runs of one experiment from several result directories",
		Long: `Copies the finished runs (those with a done marker) of one experiment from each SRC into DIR, in
the layout 'experiment run' writes, and lists the runs no SRC finished by their index (the
completion index of 'experiment render-job''s Job, which can be rerun alone). It exits non-zero
when a run is missing, unless --partial. Then: kueuelab report DIR.`,
		Example: `  kueuelab experiment merge fetched/quota-sweep --out results/quota-sweep && kueuelab report results/quota-sweep`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			missing, err := experiment.Merge(out, args, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if len(missing) > 0 {
				msg := fmt.Sprintf("%d runs not finished in any source: %s", len(missing), strings.Join(missing, ", "))
				if !partial {
					return errors.New(msg + " (--partial merges what is there)")
				}
				fmt.Fprintln(cmd.OutOrStdout(), msg)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "  kueuelab report %s\n", out)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "the merged results directory")
	c.Flags().BoolVar(&partial, "partial", false, "succeed with runs missing")
	return c
}

// tolerationsFlag reads --toleration KEY[=VALUE]:EFFECT into a toleration of that taint.
type tolerationsFlag struct{ ts *[]corev1.Toleration }

func (f tolerationsFlag) String() string {
	if f.ts == nil {
		return ""
	}
	var out []string
	for _, t := range *f.ts {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		out = append(out, s+":"+string(t.Effect))
	}
	return strings.Join(out, ",")
}

func (f tolerationsFlag) Set(v string) error {
	kv, effect, ok := strings.Cut(v, ":")
	t := corev1.Toleration{Effect: corev1.TaintEffect(effect)}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("%q: want KEY[=VALUE]:EFFECT with EFFECT NoSchedule, PreferNoSchedule or NoExecute", v)
	}
	if !ok || kv == "" {
		return fmt.Errorf("%q: want KEY[=VALUE]:EFFECT", v)
	}
	t.Key, t.Value, _ = strings.Cut(kv, "=")
	t.Operator = corev1.TolerationOpExists
	if t.Value != "" {
		t.Operator = corev1.TolerationOpEqual
	}
	*f.ts = append(*f.ts, t)
	return nil
}

func (tolerationsFlag) Type() string { return "toleration" }
