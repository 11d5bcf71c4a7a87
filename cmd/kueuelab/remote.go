package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
)

// remoteFlags are the flags of a run on a cluster kueuelab did not start (--kubeconfig).
type remoteFlags struct {
	agent                  string
	kueueURL, schedulerURL string
	inexact                bool
}

const (
	agentInProcess = "in-process"
	agentInCluster = "in-cluster"
)

func (f *remoteFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.agent, "agent", agentInProcess, "with --kubeconfig: 'in-process' (this process drives the pods on the exact trace clock) or 'in-cluster' (the chart's agent Deployment; wall-time clock, --speedup number)")
	fl.StringVar(&f.kueueURL, "kueue-metrics", "", "with --kubeconfig: Kueue's https /metrics URL (default: port-forward to its controller pod)")
	fl.StringVar(&f.schedulerURL, "scheduler-metrics", "", "with --kubeconfig: kube-scheduler's https /metrics URL (default: port-forward to its pod in kube-system)")
	fl.BoolVar(&f.inexact, "inexact", false, "with --kubeconfig: run even when Kueue's or kube-scheduler's metrics cannot be read (the clock then settles on quiet periods: results depend on the machine's speed)")
}

// agentInClusterMode reports whether the chart's agent runs the pods; "cluster" is the older name.
func (f *remoteFlags) agentInClusterMode() (bool, error) {
	switch f.agent {
	case agentInProcess:
		return false, nil
	case agentInCluster, "cluster":
		return true, nil
	}
	return false, fmt.Errorf("--agent %q: want %s or %s", f.agent, agentInProcess, agentInCluster)
}

// remote is what an exact run on another cluster reads there: Kueue's and kube-scheduler's
// metrics (the settlers of the trace clock), Kueue's wall-time timers and its version and
// settings for the summary.
type remote struct {
	kueue, scheduler runner.MetricsSource
	timers           runner.KueueTimers
	meta             *results.KueueMeta
	close            func()
}

// supportedKueue lists the Kueue versions a run on another cluster accepts, for help texts.
func supportedKueue() string {
	var out []string
	for _, m := range cluster.SupportedKueue {
		out = append(out, m+".x")
	}
	return strings.Join(out, ", ")
}

// connectRemote reaches the cluster's Kueue and kube-scheduler metrics and reads Kueue's version
// and configuration. Without both metrics it refuses (the trace clock could not tell when Kueue or
// the scheduler have caught up), unless --inexact; it refuses a Kueue version kueuelab does not
// replay.
func connectRemote(ctx context.Context, rc *rest.Config, f *remoteFlags, out io.Writer) (*remote, error) {
	r := &remote{close: func() {}}
	m, err := cluster.ConnectMetrics(ctx, rc, cluster.RemoteMetricsOptions{KueueURL: f.kueueURL, SchedulerURL: f.schedulerURL})
	version, versionFrom := "", ""
	switch {
	case err != nil && !f.inexact:
		return nil, fmt.Errorf("the trace clock needs Kueue's and kube-scheduler's metrics to know when they have caught up:\n  %s\ngive --kueue-metrics / --scheduler-metrics, or --inexact to run with a clock that settles on quiet periods (results then depend on the machine's speed), or --agent in-cluster",
			strings.ReplaceAll(err.Error(), "\n", "\n  "))
	case err != nil:
		fmt.Fprintf(out, "WARNING: --inexact: %v\n  the trace clock settles on quiet periods: results depend on how fast this cluster is\n", err)
	default:
		fmt.Fprintf(out, "Kueue %s metrics via %s\nkube-scheduler %s metrics via %s\n", m.KueueVersion, m.KueueVia, m.SchedulerVersion, m.SchedulerVia)
		version, versionFrom = m.KueueVersion, "its kueue_build_info"
		kr, sr := m.Kueue, m.Scheduler
		r.kueue = func(ctx context.Context) (io.ReadCloser, error) { return kr(ctx) }
		r.scheduler = func(ctx context.Context) (io.ReadCloser, error) { return sr(ctx) }
		r.close = m.Close
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		r.close()
		return nil, err
	}
	k, err := cluster.InspectKueue(ctx, cs)
	if err != nil {
		r.close()
		return nil, err
	}
	if version == "" && k.Version() != "" {
		version, versionFrom = k.Version(), "image "+k.Image
	}
	if err := carryKueue(r, k, version, versionFrom, out); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// carryKueue checks the version of the cluster's Kueue and carries its configuration into the
// run: the timers the runner holds the trace clock for, and the summary's account.
func carryKueue(r *remote, k *cluster.RemoteKueue, version, versionFrom string, out io.Writer) error {
	switch {
	case version == "":
		fmt.Fprintf(out, "WARNING: Kueue's version is unknown (no metrics, no tagged image): kueuelab replays Kueue %s\n", supportedKueue())
	default:
		if p := cluster.KueueVersionProblem(version, versionFrom); p != "" {
			return errors.New(p)
		}
		fmt.Fprintf(out, "Kueue %s (%s)\n", version, versionFrom)
	}
	r.meta = k.ReplayMeta(version)
	switch {
	case k.Config == nil:
		fmt.Fprintln(out, "WARNING: Kueue's configuration was not found (no ConfigMap mounted by kueue-controller-manager, no kueue-system/kueue-manager-config): Kueue v0.19 runs waitForPodsReady by default, and its timers are not held on the trace clock")
		return nil
	case k.Config.WaitForPodsReady != nil:
		w := k.Config.WaitForPodsReady
		// That Kueue runs its timers on wall time: the runner holds the trace clock at each
		// timer's trace time until Kueue has acted.
		r.timers = runner.KueueTimers{PodsReadyTimeout: w.Timeout.Seconds(), RecoveryTimeout: w.RecoveryTimeout.Seconds(),
			BackoffBase: w.BackoffBase.Seconds(), BackoffMax: w.BackoffMax.Seconds()}
	}
	fmt.Fprintf(out, "Kueue's configuration (%s): %s; its timers run on wall time, and the trace clock waits for each\n", k.ConfigSource, k.Config.Describe())
	return nil
}
