package main

import (
	"fmt"
	"math"
	"os"
	"time"

	"github.com/kueuelab/kueuelab/render/contract"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

func newAgentCmd() *cobra.Command {
	var (
		kubeconfig, catalog string
		speedup             float64
		cfg                 agent.Config
	)
	c := &cobra.Command{
		Use:   "agent",
		Short: "Simulate the pods on KWOK nodes: progress, power caps, gangs, energy and completion",
		Long: `Watches the pods on simulated (KWOK) nodes, reads the kueuelab.io/ annotations render wrote,
and advances each pod's work at the speed the hardware model gives on its node: GPU family, power
cap (node label or annotation kueuelab.io/power-cap: eco, performance, 70%, 450W), contention and
the pod's sensitivity. Gang pods progress only while the whole gang runs. Finished pods get their
energy and run time as annotations and are completed through the API (--complete-via status writes
the pod status, stage lets kueuelab's KWOK stage react to kueuelab.io/complete). Progress is
checkpointed to pod annotations, so a restarted agent resumes. All times are trace time: --speedup
trace seconds pass per wall second. Without --kubeconfig it uses $KUBECONFIG or the in-cluster config.`,
		Example: `  kueuelab agent --kubeconfig $(kueuelab cluster kubeconfig) --speedup 60
  kueuelab agent --speedup 600 --catalog my-hardware.yaml --metrics-addr 127.0.0.1:9090
  kueuelab agent --speedup 60 --failure-rate 0.02 --seed 7 --checkpoint-interval 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cat, err := loadCatalog(catalog)
			if err != nil {
				return err
			}
			if kubeconfig == "" {
				kubeconfig = os.Getenv("KUBECONFIG")
			}
			rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("agent: kubeconfig %q: %w", kubeconfig, err)
			}
			// The agent rate-limits its own writes; client-go's limiter must not throttle them again.
			rc.QPS, rc.Burst = float32(2*cfg.WriteQPS+20), 2*cfg.WriteBurst+40
			client, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			if !(speedup > 0) || math.IsInf(speedup, 0) {
				return fmt.Errorf("--speedup %g: want a positive number", speedup)
			}
			// On its own the agent cannot share a runner's event-driven clock: its trace time is
			// wall time × speedup from its start.
			cfg.Trace = simclock.New(simclock.Options{Disabled: true, MaxRate: speedup})
			a, err := agent.New(cfg, client, cat)
			if err != nil {
				return err
			}
			cfg.Trace.Start(cmd.Context())
			fmt.Fprintf(cmd.ErrOrStderr(), "kueuelab agent: speedup %g, pods %q, nodes %q, complete via %s\n",
				speedup, cfg.PodSelector, cfg.NodeSelector, cfg.CompleteVia)
			return a.Run(cmd.Context())
		},
	}
	f := c.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, then in-cluster)")
	f.StringVar(&catalog, "catalog", "", "hardware catalog YAML replacing the embedded one")
	f.Float64Var(&speedup, "speedup", 1, "trace seconds per wall second")
	f.StringVar(&cfg.PodSelector, "pod-selector", "", `label selector of the pods to simulate ("": every pod on a simulated node; pods kueuelab did not render run kueuelab.io/duration-sec trace seconds, default 600)`)
	f.StringSliceVar(&cfg.Namespaces, "namespace", nil, "simulate only the pods of these namespaces (repeat or comma-separate; default: all)")
	f.StringVar(&cfg.NodeSelector, "node-selector", "type=kwok", "label selector of the simulated nodes")
	f.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve Prometheus /metrics on this address (e.g. 127.0.0.1:9090)")
	f.DurationVar(&cfg.CheckpointInterval, "checkpoint-interval", 10*time.Second, "wall time between progress writes (the most a restart loses)")
	f.Float64Var(&cfg.FailureRate, "failure-rate", 0, "probability in [0, 1] that a pod fails partway")
	f.Uint64Var(&cfg.Seed, "seed", 1, "seed of the failure draws")
	f.Float64Var(&cfg.GangBlockedAfter, "gang-blocked-after", 600, "trace seconds a partial gang waits before it is reported (event GangBlocked)")
	f.StringVar(&cfg.CompleteVia, "complete-via", agent.CompleteViaStatus, "how pods are completed: status (pods/status write) or stage (KWOK stage)")
	f.StringVar(&cfg.PowerCapKey, "power-cap-key", contract.PowerCap, "node label/annotation holding the GPU power cap")
	f.Float64Var(&cfg.WriteQPS, "write-qps", 50, "pod writes per second (token bucket)")
	f.IntVar(&cfg.WriteBurst, "write-burst", 100, "pod write burst")
	return c
}

func loadCatalog(path string) (*hw.Catalog, error) {
	if path == "" {
		return hw.DefaultCatalog()
	}
	return hw.LoadCatalog(path)
}
