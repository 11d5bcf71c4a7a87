package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

func newToolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "Build and locate the control-plane binaries the local cluster runs",
	}
	var binDir string
	var force, realNode bool
	// set is the pinned set, with the node binaries when asked for (they share its directory).
	toolSet := func() tools.Set {
		s := tools.Pinned()
		if realNode {
			s.Components = append(s.Components, tools.NodeSet().Components...)
		}
		return s
	}
	install := &cobra.Command{
		Use:   "install",
		Short: "Build the pinned etcd, Kubernetes, KWOK, Kueue and operator binaries",
		Long: `Builds every pinned binary (etcd, Kubernetes, KWOK, Kueue and the operators of every kind: ` + operatorList() + `)
through the Go module proxy with the local go toolchain into a versioned cache
($XDG_CACHE_HOME/kueuelab/bin/<set>, default ~/.cache/kueuelab/bin/<set>), skipping binaries
that are present, so it is idempotent and an added operator builds alone. A cold build (empty
Go module and build caches) took 37–39 minutes on 2 cores.

--real-node also builds kubelet and kube-proxy of the same Kubernetes release, which
` + "`cluster up --real-node`" + ` runs (it builds them itself when they are missing): up to 7 more minutes
on 2 cores, seconds when Go's build cache holds their packages.`,
		Example: "  kueuelab tools install\n  kueuelab tools install --real-node\n  kueuelab tools install --bin-dir /opt/kueuelab/bin",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := toolSet()
			dir, err := tools.BinDir(binDir, set)
			if err != nil {
				return err
			}
			cache, err := tools.CacheDir()
			if err != nil {
				return err
			}
			in := tools.Installer{CacheDir: cache, BinDir: dir, Out: cmd.OutOrStdout(), Force: force}
			return in.Install(cmd.Context(), set)
		},
	}
	install.Flags().StringVar(&binDir, "bin-dir", "", "directory for the binaries (default: the versioned cache; env "+tools.BinDirEnv+")")
	install.Flags().BoolVar(&force, "force", false, "rebuild binaries that are already present")
	install.Flags().BoolVar(&realNode, "real-node", false, "also build kubelet and kube-proxy (for cluster up --real-node)")
	path := &cobra.Command{
		Use:   "path",
		Short: "Print the directory holding the binaries and check that all are present",
		Example: `  kueuelab tools path
  ls "$(kueuelab tools path)"
  kueuelab tools path --real-node`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := toolSet()
			dir, err := tools.BinDir(binDir, set)
			if err != nil {
				return err
			}
			if _, err := tools.Locate(dir, set); err != nil {
				if realNode {
					return fmt.Errorf("%w; kubelet and kube-proxy: `kueuelab tools install --real-node`", err)
				}
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), dir)
			return nil
		},
	}
	path.Flags().StringVar(&binDir, "bin-dir", "", "directory holding the binaries (env "+tools.BinDirEnv+")")
	path.Flags().BoolVar(&realNode, "real-node", false, "also check kubelet and kube-proxy")
	cmd.AddCommand(install, path)
	return cmd
}
