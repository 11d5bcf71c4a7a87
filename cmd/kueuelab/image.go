package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

func newImageCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build kueuelab's container images without Docker",
	}
	cmd.AddCommand(newImageBuildCmd())
	return cmd
}

func newImageBuildCmd() *cobra.Command {
	var which, out, tag, binary, binDir, revision, format string
	var level int
	c := &cobra.Command{
		Use:   "build",
		Short: "Write the agent, runner or pause image as an image archive",
		Long: `Builds an image from scratch (no base image, no container runtime) and writes it as an image
archive that kind, containerd, Docker and Podman load:

  kind load image-archive FILE          # into every node of a kind cluster
  ctr -n k8s.io images import FILE       # into containerd
  docker load -i FILE

--format docker (default) writes docker save's layout; --format oci a tar of an OCI image layout
with OCI media types (ctr, kind, podman, Docker v25+ and skopeo's oci-archive: read it).

--image agent: ` + image.AgentRepository + `:TAG, the kueuelab binary as entrypoint, run as user
65532. charts/kueuelab-agent runs it (its default tag is the chart's appVersion, the tag ` + "`make image`" + `
gives).
--image runner: ` + image.RunnerRepository + `:TAG, the same plus the pinned control-plane binaries
from the tools cache (` + "`kueuelab tools install`" + `) and the upstream manifests a local cluster installs: one
pod runs a whole replay on its own local cluster (see ` + "`kueuelab experiment render-job`" + `).
--image pause: ` + image.PauseRepository + `:TAG, the agent image's layers run as ` + "`kueuelab pause`" + `: the
sandbox ("pause") container of a real node's pods (` + "`cluster up --real-node`" + ` builds and loads it itself).

The binary put into the image must be static: by default this kueuelab itself, so build it with
CGO_ENABLED=0 (` + "`make image`" + ` does). Files get the time of $SOURCE_DATE_EPOCH (default the Unix epoch),
so the same inputs give the same image digest.`,
		Example: `  make image
  CGO_ENABLED=0 go build -o /tmp/kueuelab ./cmd/kueuelab && /tmp/kueuelab image build --image agent --tag 0.1.0 --out agent.tar
  kueuelab image build --image pause --tag 0.1.0 --format oci --out pause.tar`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			f, err := image.ParseFormat(format)
			if err != nil {
				return fmt.Errorf("--format: %w", err)
			}
			if tag == "" {
				tag = kueuelabVersion()
				if tag == "devel" {
					return errors.New("--tag is required (this kueuelab was built without a version; `make image` passes the chart's appVersion)")
				}
			}
			if binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				binary = exe
			}
			created := time.Unix(0, 0)
			if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
				sec, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("$SOURCE_DATE_EPOCH=%q: want Unix seconds", v)
				}
				created = time.Unix(sec, 0)
			}
			o := image.Options{Binary: binary, Tag: tag, Version: kueuelabVersion(), Revision: revision, Created: created, CompressionLevel: level}
			var spec image.Spec
			switch which {
			case "agent":
				spec, err = image.Agent(o)
			case "pause":
				spec, err = image.Pause(o)
			case "runner":
				set := tools.Pinned()
				dir, derr := tools.BinDir(binDir, set)
				if derr != nil {
					return derr
				}
				mods, merr := image.ManifestModuleDirs(cmd.Context(), "")
				if merr != nil {
					return merr
				}
				spec, err = image.Runner(image.RunnerOptions{Options: o, Set: set, BinDir: dir, ModuleDirs: mods})
			default:
				return fmt.Errorf("--image %q: want agent, runner or pause", which)
			}
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return err
			}
			t0 := time.Now()
			info, err := image.Write(out, spec, f)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s\n  %s archive %s: %s (layers %s compressed, %s uncompressed), built in %s\n  digest %s\n",
				info.Ref, f, out, mib(info.ArchiveBytes), mib(info.CompressedBytes), mib(info.UncompressedBytes),
				time.Since(t0).Round(100*time.Millisecond), info.Digest)
			for _, l := range info.Layers {
				fmt.Fprintf(w, "  layer %-60s %10s compressed %10s\n", l.Name, mib(l.CompressedBytes), mib(l.UncompressedBytes))
			}
			fmt.Fprintf(w, "load it: kind load image-archive %s   (or: ctr -n k8s.io images import %s)\n", out, out)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&which, "image", "agent", "agent, runner or pause")
	f.StringVar(&out, "out", "", "archive file to write")
	f.StringVar(&tag, "tag", "", "image tag (default: this kueuelab's version)")
	f.StringVar(&binary, "binary", "", "static kueuelab binary to put in the image (default: this one)")
	f.StringVar(&binDir, "bin-dir", "", "runner: control-plane binaries (env "+tools.BinDirEnv+"; default: the tools cache)")
	f.StringVar(&format, "format", string(image.Docker), "archive layout: docker (docker save's, every loader reads it) or oci (a tar of an OCI image layout, OCI media types)")
	f.StringVar(&revision, "revision", "", "source revision for the image's labels (make image: git rev-parse HEAD)")
	f.IntVar(&level, "gzip-level", 0, "gzip level of the layers, 1 (fast) to 9 (small); default 6")
	return c
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
