package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=..."; the module's build info is the fallback.
var version = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the kueuelab version and the upstream versions it targets",
		Example: "  kueuelab version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "kueuelab %s\n", kueuelabVersion())
			fmt.Fprintln(out, "trace schema v2")
			fmt.Fprintln(out, "targets: "+targets())
			return nil
		},
	}
}

// kueuelabVersion is the version set at build time (`make build` sets the chart's appVersion),
// else the module's, else "devel".
func kueuelabVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}
