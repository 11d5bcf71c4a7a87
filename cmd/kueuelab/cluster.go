package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local control plane (Kubernetes, KWOK, Kueue, JobSet, training-operator, mpi-operator)",
	}
	var name string
	cmd.PersistentFlags().StringVar(&name, "name", cluster.DefaultName, "cluster name (one state dir per cluster)")
	cmd.AddCommand(newClusterUpCmd(&name), newClusterDownCmd(&name), newClusterStatusCmd(&name), newClusterKubeconfigCmd(&name),
		newClusterInstallCmd(), newClusterSuperviseCmd(&name))
	return cmd
}

// Every local cluster this program brings up (cluster up, run, experiment run) is supervised by
// a `kueuelab cluster supervise` daemon, so its components keep being restarted after the
// command returns.
func init() { cluster.DefaultDaemon = superviseDaemon }

func superviseDaemon(root, name string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, "cluster", "supervise", "--name", name, "--state-root", root), nil
}

func newClusterSuperviseCmd(name *string) *cobra.Command {
	var root string
	c := &cobra.Command{
		Use:    "supervise",
		Short:  "Supervise a local cluster's components (the daemon `cluster up` starts)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// SIGTERM or SIGINT cancel the context (main): the supervisor stops the components.
			return cluster.Supervise(cmd.Context(), root, *name)
		},
	}
	c.Flags().StringVar(&root, "state-root", "", "state root (default: $XDG_STATE_HOME/kueuelab)")
	return c
}

func newClusterUpCmd(name *string) *cobra.Command {
	var binDir, spec string
	var portBase int
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "up",
		Short: "Start the local cluster (a no-op that reports health when it is running)",
		Long: `Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Kueue, JobSet,
training-operator and mpi-operator on 127.0.0.1 as background processes that outlive this command,
each awaited on its readiness endpoint. A supervisor process (it too outlives this command)
restarts every component that exits, after 200 ms, then doubling up to 30 s; a component that
exits again after 5 restarts within 2 minutes is left down as crash-looping until the next
'cluster up'. 'cluster status' shows each component's state and restarts. State (certificates,
configs, PIDs, logs, etcd data, status.json) lives in $XDG_STATE_HOME/kueuelab/<name> (default
~/.local/state/kueuelab/<name>). Without --cluster the cluster gets 4 KWOK nodes with 8
nvidia.com/gpu each. The kube-scheduler runs with the spec's scheduler section (upstream's
default profile without one) and is restarted when it changes; without --cluster it keeps the
configuration it has.`,
		Example: "  kueuelab cluster up\n  export KUBECONFIG=$(kueuelab cluster kubeconfig)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sp, objs, err := clusterSpecObjects(spec, false)
			if err != nil {
				return err
			}
			set := tools.Pinned()
			dir := ""
			if binDir != "" || cmd.Flags().Changed("bin-dir") {
				d, err := tools.BinDir(binDir, set)
				if err != nil {
					return err
				}
				dir = d
			}
			o := cluster.Options{Name: *name, BinDir: dir, PortBase: portBase, Timeout: timeout, Objects: objs, Out: cmd.OutOrStdout()}
			if sp != nil {
				o.Scheduler = sp.KubeSchedulerConfiguration()
			}
			cl, err := cluster.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nkubeconfig: %s\n  export KUBECONFIG=$(kueuelab cluster kubeconfig --name %s)\n  kubectl get nodes\nstop it with: kueuelab cluster down --name %s\n",
				cl.State.Kubeconfig(), cl.State.Name, cl.State.Name)
			return nil
		},
	}
	c.Flags().StringVar(&binDir, "bin-dir", "", "directory holding the binaries (env "+tools.BinDirEnv+"; default: the tools cache)")
	c.Flags().StringVar(&spec, "cluster", "", "cluster spec whose nodes, flavors and queues to apply")
	c.Flags().IntVar(&portBase, "port-base", 0, "first of 17 consecutive loopback ports (default: the cluster's previous base, else 16400 for \"default\" and a block derived from --name otherwise)")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "readiness deadline per component")
	return c
}

func newClusterDownCmd(name *string) *cobra.Command {
	var purge bool
	c := &cobra.Command{
		Use:   "down",
		Short: "Stop the cluster's supervisor and the processes it started (reverse order)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cluster.Down(cmd.Context(), "", *name, purge, cmd.OutOrStdout())
		},
	}
	c.Flags().BoolVar(&purge, "purge", false, "also remove the cluster's state dir (certificates, etcd data, logs)")
	return c
}

func newClusterStatusCmd(name *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show each component's state, process, restarts and last exit",
		Long: `Shows what the cluster's supervisor reports (status.json in the state dir): each component's
state (starting, ready, unready, restarting, crash-looping, stopped), PID, restart count and last
exit. Exits non-zero unless every component is ready.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, h, rows, err := cluster.Status(cmd.Context(), "", *name)
			if err != nil {
				return err
			}
			cluster.PrintStatus(cmd.OutOrStdout(), s, h, rows)
			if !cluster.Healthy(rows) {
				return errors.New("cluster not healthy (component logs are in " + s.Dir + "/logs)")
			}
			return nil
		},
	}
}

func newClusterKubeconfigCmd(name *string) *cobra.Command {
	return &cobra.Command{
		Use:     "kubeconfig",
		Short:   "Print the cluster's kubeconfig path",
		Example: "  export KUBECONFIG=$(kueuelab cluster kubeconfig)",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			root, err := cluster.StateRoot()
			if err != nil {
				return err
			}
			s, ok, err := cluster.Load(root, *name)
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("no cluster %q (run `kueuelab cluster up --name %s`)", *name, *name)
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.Kubeconfig())
			return nil
		},
	}
}

func newClusterInstallCmd() *cobra.Command {
	var kubeconfig, spec string
	var withNodes bool
	c := &cobra.Command{
		Use:   "install",
		Short: "Prepare an existing cluster: check Kueue, JobSet, Kubeflow and KWOK, install kueuelab's completion stages",
		Long: `For a cluster you run yourself (e.g. kind + KWOK with Kueue installed): checks that the Kueue,
JobSet, training-operator, mpi-operator and KWOK Stage CRDs are served (and Kueue's version from its
controller Deployment), then installs only what kueuelab owns: the KWOK completion stages and, with
--cluster, the spec's namespaces, flavors, queues and KWOK nodes. It reports what the cluster's
kube-scheduler does (its pods' image and flags, and whether it runs a configuration file) without
changing it: a spec's scheduler section applies to the local cluster only.`,
		Example: "  kueuelab cluster install --kubeconfig ~/.kube/config",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if kubeconfig == "" {
				return errors.New("--kubeconfig is required")
			}
			sp, objs, err := clusterSpecObjects(spec, !withNodes)
			if err != nil {
				return err
			}
			var scoring string
			if sp != nil && sp.Scheduler != nil {
				scoring = sp.Scoring().String()
			}
			return cluster.Install(cmd.Context(), kubeconfig, objs, scoring, cmd.OutOrStdout())
		},
	}
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the existing cluster")
	c.Flags().StringVar(&spec, "cluster", "", "cluster spec whose namespaces, flavors and queues to apply")
	c.Flags().BoolVar(&withNodes, "nodes", true, "with --cluster, also apply the spec's KWOK nodes")
	return c
}

// clusterSpecObjects loads a cluster spec and renders its objects; nil without a spec.
func clusterSpecObjects(path string, omitNodes bool) (*rcluster.Spec, []client.Object, error) {
	if path == "" {
		return nil, nil, nil
	}
	spec, err := rcluster.Load(path)
	if err != nil {
		return nil, nil, err
	}
	objs, err := spec.Objects(rcluster.Options{OmitNodes: omitNodes})
	return spec, objs, err
}
