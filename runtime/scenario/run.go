package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/report"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// Files Run writes in the output directory besides the experiment's.
const (
	ChecksFile = "checks.json"
	ReportFile = "report.html"
)

// Options configure Run.
type Options struct {
	OutDir string
	// REST and State, when set, are a cluster the scenario's variants run on, reset between runs
	// (experiment.Options.REST); a scenario whose variants change Kueue's configuration runs on
	// fresh local clusters (Local) instead, unless ReconfigureKueue can reconfigure that cluster's
	// Kueue (experiment.Options.ReconfigureKueue).
	REST             *rest.Config
	State            *localcluster.State
	ReconfigureKueue func(ctx context.Context, fields map[string]any) error
	Local            experiment.LocalCluster
	// Out receives progress and the PASS/FAIL lines; Log the detail.
	Out, Log io.Writer
}

// Outcome is what Run found.
type Outcome struct {
	Results []Result `json:"results"`
	Pass    bool     `json:"pass"`
	// Fresh says the variants ran on fresh local clusters (no cluster given, or they set Kueue's
	// configuration and the given cluster's cannot be changed).
	Fresh bool `json:"freshClusters"`
}

// NeedsFreshClusters reports whether a variant changes Kueue's configuration, which needs a
// fresh local cluster per run.
func (s *Scenario) NeedsFreshClusters() bool {
	for _, v := range s.Experiment.Variants {
		if !v.KueueConfig.Empty() {
			return true
		}
	}
	return false
}

// Run executes the scenario's experiment (resumable, like experiment run), evaluates its checks on
// repeat 0 of every variant, prints PASS or FAIL per check, and writes checks.json and a report.
// The error is about running; failed checks are in the Outcome.
func Run(ctx context.Context, s *Scenario, o Options) (*Outcome, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	out := &Outcome{Fresh: o.REST == nil || (s.NeedsFreshClusters() && o.ReconfigureKueue == nil)}
	eo := experiment.Options{OutDir: o.OutDir, Repeats: 1, Out: o.Out, Log: o.Log, Local: o.Local}
	if !out.Fresh {
		eo.REST, eo.State, eo.ReconfigureKueue = o.REST, o.State, o.ReconfigureKueue
	}
	if _, err := experiment.Run(ctx, s.Experiment, eo); err != nil {
		return nil, err
	}
	data := map[string]*variantData{}
	blocks, err := nodeBlocks(s.Experiment.ClusterPath())
	if err != nil {
		return nil, err
	}
	for _, v := range s.Experiment.Variants {
		d, err := results.Load(filepath.Join(o.OutDir, v.Name, "r0"))
		if err != nil {
			return nil, err
		}
		data[v.Name] = &variantData{dir: d, blocks: blocks}
	}
	out.Pass = true
	fmt.Fprintf(o.Out, "scenario %s (%s):\n", s.Name, s.Challenge)
	// Say where a run was not exact, whether or not a check asks: a check that fails on such a run
	// may be about the replay rather than the policy.
	for _, v := range s.Experiment.Variants {
		if m := data[v.Name].dir.Summary; m.HoldsExpired > 0 || m.LateSteps > 0 {
			fmt.Fprintf(o.Out, "  note  variant %s is not exact: %d holds expired %v, %d late steps (worst %gs: %s)\n",
				v.Name, m.HoldsExpired, m.ExpiredByKind, m.LateSteps, m.LateMaxSec, m.LateWorst)
		}
	}
	for i := range s.Checks {
		r := s.Checks[i].evaluate(s, data)
		out.Results = append(out.Results, r)
		verdict := "PASS"
		if !r.Pass {
			verdict, out.Pass = "FAIL", false
		}
		fmt.Fprintf(o.Out, "  %s  %s\n", verdict, r.Name)
		if r.Err != "" {
			fmt.Fprintf(o.Out, "        error: %s\n", r.Err)
		} else {
			fmt.Fprintf(o.Out, "        %s, expected %s\n", r.Measured, r.Expected)
		}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, ChecksFile), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	if err := writeReport(o.OutDir); err != nil {
		return out, err
	}
	return out, nil
}

func writeReport(dir string) error {
	in, err := report.Load([]string{dir}, "")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	r := report.Compute(in)
	plots, err := report.Plots(in, r)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, ReportFile))
	if err != nil {
		return err
	}
	return errors.Join(report.WriteHTML(f, r, plots, time.Now()), f.Close())
}

// nodeBlocks maps each GPU node of the cluster spec to its topology block (empty without one).
func nodeBlocks(specPath string) (map[string]string, error) {
	spec, err := rcluster.Load(specPath)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if spec.Topology == nil {
		return out, nil
	}
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		if n, ok := obj.(*corev1.Node); ok && gpus(n) > 0 {
			out[n.Name] = n.Labels[spec.Topology.BlockLabel]
		}
	}
	return out, nil
}

func gpus(n *corev1.Node) int64 {
	var g int64
	for name, q := range n.Status.Capacity {
		if name == "nvidia.com/gpu" || name == "amd.com/gpu" {
			g += q.Value()
		}
	}
	return g
}
