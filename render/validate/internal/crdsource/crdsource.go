// Package crdsource lists the upstream CRD files kueuelab validates against and finds them in the
// Go module cache. The generator copies them into render/validate/crds/ and a test checks the
// copies still match the module cache, so both use this one list, built from the kinds' registry.
package crdsource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"

	"github.com/kueuelab/kueuelab/render"
)

// Source is one upstream module and the CRD files taken from it.
type Source struct {
	// Module is the Go module path.
	Module string
	// Version is the version the files come from; empty means "the version go.mod requires". A
	// module go.mod requires must be at that version (TestEmbeddedCRDsMatchModules).
	Version string
	// Dir is the directory under crds/ the files are copied to.
	Dir string
	// Files are paths inside the module.
	Files []string
}

// Sources are the CRDs kueuelab validates against: Kueue's own and KWOK's Stage, then those of
// every kind in the registry (render.Integration.CRDs), which is where a kind's CRD source is
// declared.
var Sources = sources()

func sources() []Source {
	out := []Source{
		{Module: "sigs.k8s.io/kueue", Dir: "kueue", Files: []string{
			"config/components/crd/bases/kueue.x-k8s.io_admissionchecks.yaml",
			"config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
			"config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml",
			"config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml",
			"config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
			"config/components/crd/bases/kueue.x-k8s.io_topologies.yaml",
			"config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml",
		}},
		// kwok is not imported (its dependency tree is large and only its controller binary is
		// used), so go.mod does not require it; this version matches the binary the runtime builds.
		{Module: "sigs.k8s.io/kwok", Version: "v0.7.0", Dir: "kwok", Files: []string{
			"kustomize/crd/bases/kwok.x-k8s.io_stages.yaml",
		}},
	}
	for _, c := range render.DefaultRegistry().CRDs() {
		out = append(out, Source{Module: c.Module, Version: c.Version, Dir: c.Dir, Files: c.Files})
	}
	return out
}

// Located is a Source resolved to a version and a directory in the module cache.
type Located struct {
	Source
	Version string
	ModDir  string
}

// Locate resolves src inside the main module rooted at root: the version comes from go.mod (or
// src.Version) and the directory from `go mod download`, which fetches the zip if needed.
func Locate(ctx context.Context, root string, src Source) (Located, error) {
	version := src.Version
	if version == "" {
		var m struct{ Version string }
		if err := goJSON(ctx, root, &m, "list", "-m", "-json", src.Module); err != nil {
			return Located{}, fmt.Errorf("version of %s in go.mod: %w", src.Module, err)
		}
		version = m.Version
	}
	return locate(ctx, root, src, version)
}

// GoModVersion returns the version of module that go.mod requires, "" when it requires none.
func GoModVersion(ctx context.Context, root, module string) (string, error) {
	var m struct{ Version string }
	if err := goJSON(ctx, root, &m, "list", "-m", "-json", module); err != nil {
		if strings.Contains(err.Error(), "not a known dependency") {
			return "", nil
		}
		return "", err
	}
	return m.Version, nil
}

func locate(ctx context.Context, root string, src Source, version string) (Located, error) {
	var d struct{ Dir, Error string }
	if err := goJSON(ctx, root, &d, "mod", "download", "-json", src.Module+"@"+version); err != nil {
		return Located{}, fmt.Errorf("download %s@%s: %w", src.Module, version, err)
	}
	if d.Error != "" || d.Dir == "" {
		return Located{}, fmt.Errorf("download %s@%s: %s", src.Module, version, d.Error)
	}
	return Located{Source: src, Version: version, ModDir: d.Dir}, nil
}

func goJSON(ctx context.Context, dir string, out any, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		// go mod download -json reports a module's failure (an unreachable proxy, say) in the
		// JSON's Error, not on stderr.
		msg := strings.TrimSpace(stderr.String())
		var e struct{ Error string }
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = strings.TrimSpace(msg + "\n" + e.Error)
		}
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, msg)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("go %s: decode output: %w", strings.Join(args, " "), err)
	}
	return nil
}
