package main

import (
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
		newImageCmd(),
	)
	return root
}
