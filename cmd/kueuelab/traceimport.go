package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/importer"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/history"
)

func newTraceImportCmd() *cobra.Command {
	var (
		format, out, teamBy, kubeconfig string
		fromCluster, lenient            bool
		since                           time.Duration
		timeScale                       float64
	)
	cmd := &cobra.Command{
		Use:   "import (--format FORMAT FILE... | --from-cluster)",
		Short: "Turn a public GPU cluster trace, or what a cluster ran, into a kueuelab trace",
		Long: `import writes a kueuelab trace (schema v2, workload and job records) from

  --format philly       Microsoft Philly's cluster_job_log (github.com/msr-fiddle/philly-traces)
  --format helios       SenseTime Helios' cluster_log.csv (github.com/S-Lab-System-Group/HeliosData)
  --format alibaba-pai  Alibaba PAI v2020's pai_job_table.csv and pai_task_table.csv, optionally
                        pai_sensor_table.csv for utilisation (github.com/alibaba/clusterdata,
                        cluster-trace-gpu-v2020; the published files have no header row)
  --format alibaba-gfs  Alibaba's GPU cluster trace v2026 (GFS) job_info_df.csv
                        (github.com/alibaba/clusterdata, cluster-trace-gpu-v2026)
  --from-cluster        the Kueue Workloads of a cluster and the jobs that own them

A share of a GPU (PAI's plan_gpu 50, GFS's gpu_request 0.5) stays a share: the pod asks for
kueuelab.io/gpu-fraction (render puts it on the smallest MIG slice that holds it, or on a whole GPU).

What a public trace does not say (the family, CPU and memory where missing, the intensity profile)
follows documented rules (package model/importer): no GPUs is cpu_analytics from 1800 s of run time
and cpu_preprocess below; a parameter-server task makes parameter_server_training; more than one GPU
pod distributed_training; one GPU pod debug_eval up to 1000 s, single_gpu_training above. The
namespace is the virtual cluster, user or organization (--team-by); GFS's HP jobs get intent
performance and its Spot jobs eco. Jobs that never ran are counted and left out; a malformed row is
an error naming file, line and column (--lenient skips and lists it).

--from-cluster reads every Workload that finished: its pod sets, queue namespace, priority class
(as intent), its owner's creation (as the submit time) and admission to Finished (as the
duration). Pods rendered by kueuelab keep their family, role and profile from the render contract,
and an HPO experiment's trial Jobs become one workload again. Kubernetes times have one-second
resolution and are wall times: --time-scale S reads back a replay that ran S trace seconds per wall
second throughout (run --kubeconfig K --speedup S --keep) in the replayed trace's seconds. A local
replay's event-driven clock jumps over quiet time and stands still while the control plane owes a
step, so its timestamps do not give trace times. Keep the replay's objects (run --keep): the
runner deletes what it submitted otherwise.`,
		Example: `  kueuelab trace import --format philly cluster_job_log --out philly.jsonl.gz
  kueuelab trace import --format alibaba-pai pai_job_table.csv pai_task_table.csv pai_sensor_table.csv --out pai.jsonl
  kueuelab trace import --format helios --team-by user Venus/cluster_log.csv --out venus.jsonl
  kueuelab trace import --from-cluster --kubeconfig ~/.kube/config --since 24h --out yesterday.jsonl`,
		RunE: func(cmd *cobra.Command, args []string) error {
			stderr := cmd.ErrOrStderr()
			var res *importer.Result
			var err error
			switch {
			case fromCluster && format != "":
				return errors.New("give --format FILE... or --from-cluster, not both")
			case fromCluster:
				if len(args) > 0 {
					return fmt.Errorf("--from-cluster reads no files, got %s", strings.Join(args, " "))
				}
				res, err = importCluster(cmd, kubeconfig, history.Options{Since: since, TimeScale: timeScale})
			case format == "":
				return fmt.Errorf("--format is required (one of %s), or --from-cluster", strings.Join(importer.Formats, ", "))
			default:
				if since != 0 || timeScale != 0 || kubeconfig != "" {
					return errors.New("--since, --time-scale and --kubeconfig go with --from-cluster")
				}
				res, err = importer.Import(format, args, importer.Options{TeamBy: teamBy, Lenient: lenient})
			}
			if err != nil {
				return err
			}
			for _, e := range res.Skipped {
				fmt.Fprintln(stderr, "skipped:", e)
			}
			if len(res.Workloads) == 0 {
				return fmt.Errorf("nothing to import: %s", res.NotRunSummary())
			}
			fw, err := trace.Create(out)
			if err != nil {
				return err
			}
			if err := res.Write(fw.Writer); err != nil {
				_ = fw.Close()
				return err
			}
			if err := fw.Close(); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "imported %d workloads of %d jobs read", len(res.Workloads), res.Read)
			if len(res.NotRun) > 0 {
				fmt.Fprintf(stderr, " (left out: %s)", res.NotRunSummary())
			}
			if len(res.Skipped) > 0 {
				fmt.Fprintf(stderr, ", %d malformed rows skipped", len(res.Skipped))
			}
			if out != "-" {
				fmt.Fprintf(stderr, "; wrote %s", out)
			}
			fmt.Fprintln(stderr)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "", "public trace format: "+strings.Join(importer.Formats, ", "))
	f.BoolVar(&fromCluster, "from-cluster", false, "import the finished Kueue Workloads of a cluster")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG)")
	f.DurationVar(&since, "since", 0, "with --from-cluster: only Workloads created this long ago or later (0: all)")
	f.Float64Var(&timeScale, "time-scale", 0, "with --from-cluster: trace seconds per cluster second (a replay's --speedup; default 1)")
	f.StringVar(&teamBy, "team-by", "", "column the namespace comes from: vc or user (philly, helios), user (alibaba-pai), org (alibaba-gfs)")
	f.BoolVar(&lenient, "lenient", false, "skip malformed rows (listed on standard error) instead of failing on the first")
	f.StringVarP(&out, "out", "o", "-", "output trace (\"-\" is standard output; a .gz name is compressed)")
	return cmd
}

func importCluster(cmd *cobra.Command, kubeconfig string, opts history.Options) (*importer.Result, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig == "" {
		return nil, errors.New("--from-cluster needs --kubeconfig or $KUBECONFIG")
	}
	rc, err := cluster.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	items, err := history.Read(cmd.Context(), c, opts)
	if err != nil {
		return nil, err
	}
	return history.Build(items, opts)
}
