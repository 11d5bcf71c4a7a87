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
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/realnode"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Run a local control plane (Kubernetes, KWOK, Kueue and the operators of every kind)",
	}
	var name string
	cmd.PersistentFlags().StringVar(&name, "name", localcluster.DefaultName, "cluster name (one state dir per cluster)")
	cmd.AddCommand(newClusterUpCmd(&name), newClusterDownCmd(&name), newClusterStatusCmd(&name), newClusterKubeconfigCmd(&name),
		newClusterInstallCmd(), newClusterSuperviseCmd(&name), newClusterLoadImageCmd(&name))
	return cmd
}

// Every local cluster this program brings up (cluster up, run, experiment run) is supervised by
// a `kueuelab cluster supervise` daemon, so its components keep being restarted after the
// command returns.
func init() { localcluster.DefaultDaemon = superviseDaemon }

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
			return localcluster.Supervise(cmd.Context(), root, *name)
		},
	}
	c.Flags().StringVar(&root, "state-root", "", "state root (default: $XDG_STATE_HOME/kueuelab)")
	return c
}

func newClusterUpCmd(name *string) *cobra.Command {
	var binDir, spec string
	var portBase int
	var timeout time.Duration
	var bare, realNode bool
	var rn localcluster.RealNodeOptions
	c := &cobra.Command{
		Use:   "up",
		Short: "Start the local cluster (a no-op that reports health when it is running)",
		Long: `Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK, Kueue and the
operators of every kind kueuelab renders (` + operatorList() + `) on 127.0.0.1 as
background processes that outlive this command, each awaited on its readiness endpoint. A
supervisor process (it too outlives this command) restarts every component that exits, after
200 ms, then doubling up to 30 s; a component that exits again after 5 restarts within 2 minutes
is left down as crash-looping until the next 'cluster up'. 'cluster status' shows each
component's state and restarts. State (certificates, configs, PIDs, logs, etcd data,
status.json) lives in $XDG_STATE_HOME/kueuelab/<name> (default ~/.local/state/kueuelab/<name>).
Without --cluster the cluster gets 4 KWOK nodes with 8 nvidia.com/gpu each. The kube-scheduler
runs with the spec's scheduler section (upstream's default profile without one) and is restarted
when it changes; without --cluster it keeps the configuration it has.

Every node of the local cluster is a KWOK node, so its nodes carry no KWOK taint (there are no
real pods to keep off them): a manifest of your own, with a kueue.x-k8s.io/queue-name label, is
admitted and runs as it would on a real cluster, driven by the agent of a running replay (see
kueuelab agent --help for its defaults).

With --real-node the cluster also gets one real node, ` + localcluster.RealNodeName + `: a kubelet and kube-proxy
(Kubernetes v1.36.2, built into the tools cache on first use, about a minute with warm Go caches)
and containerd, runc and the CNI plugins from the host's packages (installed with apt-get when
missing), in a mount and a network namespace of their own. It needs root. Only pods that
tolerate its taint ` + realnode.TaintKey + `=true:NoSchedule run there; select it with the label
` + realnode.Label + `=true. Its pods reach the API server through the kubernetes Service and
the API server reaches them (webhooks, logs, exec, port-forward). There is no registry: images
come from archives (--load-image, or 'cluster load-image' on a running node, e.g. what 'make
image' writes); the pod sandboxes' pause image is built from a static kueuelab: this one if it
is static, else bin/static/kueuelab beside it (make image builds it), else --image-binary. The node is part of the cluster until --real-node=false
on a stopped cluster; 'cluster down' stops it first and removes what it put on the host (its
veth, route, NAT chain and cgroups).`,
		Example: "  kueuelab cluster up\n  export KUBECONFIG=$(kueuelab cluster kubeconfig)\n  # with a real node running the agent image\n  make image && ./bin/kueuelab cluster up --real-node --load-image bin/images/kueuelab-$(make -s print-version).tar",
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
			if bare && spec != "" {
				return errors.New("--bare starts a cluster without objects: prepare it with `kueuelab cluster install --cluster`")
			}
			o := localcluster.Options{Name: *name, BinDir: dir, PortBase: portBase, Timeout: timeout, Objects: objs, Bare: bare, Out: cmd.OutOrStdout()}
			switch {
			case realNode:
				o.RealNode = &rn
			case cmd.Flags().Changed("real-node"):
				o.NoRealNode = true
			case len(rn.Images) > 0 || rn.ImageBinary != "":
				return errors.New("--load-image and --image-binary go with --real-node")
			}
			if sp != nil {
				o.Scheduler = sp.KubeSchedulerConfiguration()
			}
			cl, err := localcluster.Up(cmd.Context(), o)
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
	c.Flags().IntVar(&portBase, "port-base", 0, fmt.Sprintf("first of %d consecutive loopback ports (default: the cluster's previous base, else 16400 for \"default\" and a block derived from --name otherwise)", numPorts()))
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "readiness deadline per component")
	c.Flags().BoolVar(&realNode, "real-node", false, "give the cluster one real kubelet node beside its KWOK nodes (=false: take it away; needs a stopped cluster)")
	c.Flags().StringArrayVar(&rn.Images, "load-image", nil, "image archive to load into the real node at every start (repeatable)")
	c.Flags().StringVar(&rn.ImageBinary, "image-binary", "", "static kueuelab binary the real node's pause image is built from (default: this one if static, else static/kueuelab beside it)")
	c.Flags().BoolVar(&bare, "bare", false, "start it as a user's own kind + KWOK + Kueue cluster is before `cluster install`: no KWOK stages, no nodes or queues, Kueue's config in the ConfigMap kueue-system/kueue-manager-config, upstream's Job batch period")
	return c
}

func newClusterDownCmd(name *string) *cobra.Command {
	var purge bool
	c := &cobra.Command{
		Use:   "down",
		Short: "Stop the cluster's supervisor and the processes it started (reverse order)",
		Example: `  kueuelab cluster down
  # a named cluster, and its state dir with it
  kueuelab cluster down --name sweep --purge`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localcluster.Down(cmd.Context(), "", *name, purge, cmd.OutOrStdout())
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
		Example: `  kueuelab cluster status
  kueuelab cluster status --name sweep || echo "not every component is ready"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, h, rows, err := localcluster.Status(cmd.Context(), "", *name)
			if err != nil {
				return err
			}
			localcluster.PrintStatus(cmd.OutOrStdout(), s, h, rows)
			if !localcluster.Healthy(rows) {
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
			root, err := localcluster.StateRoot()
			if err != nil {
				return err
			}
			s, ok, err := localcluster.Load(root, *name)
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
	var kubeconfig, spec, kueueURL, schedulerURL string
	var withNodes, inexact bool
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "install",
		Short: "Prepare an existing cluster: check Kueue, KWOK and the job kinds' operators, install KWOK's and kueuelab's stages",
		Long: `For a cluster you run yourself (e.g. kind + KWOK with Kueue installed). First it checks what
kueuelab cannot install and refuses, listing every problem with its fix:
  - Kueue's and KWOK's Stage CRDs are served, and the CRD of every kind (` + kindList() + `):
    those of the default mapping run by an operator are required, the others are reported with
    how to install them;
  - Kueue is a version kueuelab replays (` + supportedKueue() + `: its controller image, and its
    kueue_build_info metric), and which one it is;
  - Kueue's integrations (its Configuration in the ConfigMap its Deployment mounts, read as that
    Kueue reads it, defaults included) include the frameworks of the default kinds (the others
    are reported); the settings a replay carries are shown (clientConnection, waitForPodsReady,
    which Kueue v0.19 runs by default);
  - no KWOK Stage ends pods on its own (KWOK's stock pod-complete would end every Job pod at once);
  - Kueue's and kube-scheduler's metrics can be read (the exact trace clock needs them): through a
    port-forward to their pods, or the URLs given with --kueue-metrics / --scheduler-metrics.
Then it installs what kueuelab owns: KWOK's node and pod lifecycle stages that the cluster lacks
(node-initialize, node-heartbeat-with-lease, pod-ready, pod-delete), kueuelab's completion
stages, the metrics reader's ServiceAccount and RBAC (GET /metrics only), and with --cluster the
spec's namespaces, flavors, queues and KWOK nodes, waiting until the nodes are Ready. RayJobs need
the local cluster: only there does a stand-in answer KubeRay's Ray job API. It reports what the
cluster's kube-scheduler does (its pods' image and flags, and whether it runs a configuration
file) without changing it: a spec's scheduler section applies to the local cluster only.`,
		Example: `  kueuelab cluster install --kubeconfig ~/.kube/config --cluster examples/clusters/small.yaml
  kueuelab run --kubeconfig ~/.kube/config --cluster examples/clusters/small.yaml --gen-jobs 100`,
		Args: cobra.NoArgs,
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
			return cluster.Install(cmd.Context(), cluster.InstallOptions{Kubeconfig: kubeconfig, Objects: objs,
				Metrics: cluster.RemoteMetricsOptions{KueueURL: kueueURL, SchedulerURL: schedulerURL}, Inexact: inexact,
				Scoring: scoring, Timeout: timeout, Out: cmd.OutOrStdout()})
		},
	}
	c.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the existing cluster")
	c.Flags().StringVar(&spec, "cluster", "", "cluster spec whose namespaces, flavors and queues to apply")
	c.Flags().BoolVar(&withNodes, "nodes", true, "with --cluster, also apply the spec's KWOK nodes")
	c.Flags().StringVar(&kueueURL, "kueue-metrics", "", "Kueue's https /metrics URL (default: port-forward to its controller pod)")
	c.Flags().StringVar(&schedulerURL, "scheduler-metrics", "", "kube-scheduler's https /metrics URL (default: port-forward to its pod in kube-system)")
	c.Flags().BoolVar(&inexact, "inexact", false, "accept a cluster whose metrics cannot be read (its runs then need --inexact or --agent in-cluster)")
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for the spec's KWOK nodes to be Ready")
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

func newClusterLoadImageCmd(name *string) *cobra.Command {
	return &cobra.Command{
		Use:   "load-image ARCHIVE...",
		Short: "Load image archives into the cluster's real node (as kind load image-archive does)",
		Long: `Imports docker-archive or OCI image archives (what 'make image' and 'kueuelab image build'
write) into the real node's containerd, where pods with imagePullPolicy Never or IfNotPresent
find them, and keeps them in the node's list so they are loaded again whenever the node starts.`,
		Example: "  kueuelab cluster load-image bin/images/kueuelab-runner-$(make -s print-version).tar",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return localcluster.LoadImages(cmd.Context(), "", *name, args, cmd.OutOrStdout())
		},
	}
}
