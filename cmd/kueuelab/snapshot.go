package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

func newSnapshotCmd() *cobra.Command {
	var kubeconfig, kubeContext, out, kueueVersion, name string
	cmd := &cobra.Command{
		Use:   "snapshot --kubeconfig K [--context C] --out DIR",
		Short: "Read a live cluster's Kueue queues, nodes and Workloads into a state a forecast starts from",
		Long: `snapshot reads a cluster running Kueue and writes a directory:

  cluster.yaml     a kueuelab cluster spec: its ResourceFlavors (one per GPU family, named after it),
                   ClusterQueues, Cohorts, LocalQueues (one team each), WorkloadPriorityClasses,
                   Topology, and its nodes' allocatable as node pools of identical nodes
  workloads.jsonl  a trace with one workload per pending or admitted Workload (its pod sets,
                   requests, namespace and priority); its duration is the kueuelab.io/duration-sec
                   its pods carry, else a placeholder
  state.yaml       per live workload: Pending or Admitted, when it was created, requeued and
                   admitted, its admission (ClusterQueue, flavors) and, when known, its remaining
                   seconds; the Kueue version; now
  history.jsonl    the finished Workloads, as trace import --from-cluster writes them (only when
                   there are any)

Times are seconds since the oldest Workload's creation (live or finished), or, on kueuelab's local cluster while
a replay runs (its ConfigMap kube-system/kueuelab-clock), the replay's trace seconds. Whatever the
spec cannot express is a warning on standard error (and in cluster.yaml's header), or an error when
it would change Kueue's decisions with no honest approximation (two resource groups in a queue,
more than three live priorities, a stopped queue, one flavor over two GPU families).

It needs cluster-wide list access to Kueue's queue objects and Workloads, Nodes and Namespaces: a
403 is an error naming the missing permission. Kueue's visibility API (pending workloads of a
LocalQueue) does not stand in for it: it gives no pod sets and no admitted workloads.`,
		Example: `  kueuelab snapshot --kubeconfig ~/.kube/config --out snap
  kueuelab snapshot --kubeconfig ~/.kube/config --context prod --out snap-$(date +%H%M)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out DIR is required")
			}
			rc, err := snapshot.RESTConfig(kubeconfig, kubeContext)
			if err != nil {
				return err
			}
			src := "kubeconfig " + kubeconfig
			if kubeContext != "" {
				src += " context " + kubeContext
			}
			s, err := snapshot.FromConfig(cmd.Context(), rc, snapshot.Options{Source: src, KueueVersion: kueueVersion, Name: name})
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			for _, w := range s.Warnings {
				fmt.Fprintln(stderr, "WARNING:", w)
			}
			if err := s.Write(out); err != nil {
				return err
			}
			pending, admitted := 0, 0
			for _, w := range s.State.Workloads {
				if w.Phase == state.Admitted {
					admitted++
				} else {
					pending++
				}
			}
			hist := 0
			if s.History != nil {
				hist = len(s.History.Workloads)
			}
			fmt.Fprintf(stderr, "snapshot: %d pending and %d admitted workloads at %.0f s (%s), %d finished in the history, Kueue %s; wrote %s\n",
				pending, admitted, s.State.NowSec, s.Clock, hist, orUnknown(s.State.KueueVersion), filepath.Join(out, state.StateFile))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&kubeContext, "context", "", "kubeconfig context (default its current one)")
	f.StringVar(&out, "out", "", "directory to write (created)")
	f.StringVar(&kueueVersion, "kueue-version", "", "Kueue's version when it cannot be read from its Deployment's image")
	f.StringVar(&name, "name", "", "metadata.name of the state and the spec")
	return cmd
}

func orUnknown(v string) string {
	if v == "" {
		return "version unknown"
	}
	return v
}
