package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "kueuelab",
		Short: "Replay realistic AI workload traces through a real Kueue on simulated GPU nodes",
		Long: `kueuelab generates realistic AI workload traces, renders each logical workload into the
objects a real cluster runs (` + kindList() + `, all queued through Kueue), and replays
traces on a real control plane with KWOK GPU nodes.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if name, ok := pluginName(os.Args[0]); ok {
		// Run by kubectl as its plugin: usage and help name the command the user typed.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
	}
	root.AddCommand(
		newVersionCmd(),
		newTraceCmd(),
		newToolsCmd(), newClusterCmd(),
		newGenCmd(), newProfileCmd(),
		newValidateCmd(),
		newAgentCmd(),
		newRenderCmd(),
		newExperimentCmd(), newReportCmd(), newScenarioCmd(), newCompareCmd(),
		newRunCmd(), newSnapshotCmd(), newForecastCmd(),
		newImageCmd(), newPauseCmd(),
	)
	return root
}

// pluginName is the command kubectl runs an executable named arg0 for when it is its plugin
// (kubectl-kueuelab: "kubectl kueuelab"; kubectl's own rule: dashes separate words, an
// underscore stands for a dash).
func pluginName(arg0 string) (string, bool) {
	rest, ok := strings.CutPrefix(filepath.Base(arg0), "kubectl-")
	if !ok || rest == "" {
		return "", false
	}
	return "kubectl " + strings.ReplaceAll(strings.ReplaceAll(rest, "-", " "), "_", "-"), true
}
