// Package crdsource lists the upstream CRD files kueuelab validates against and finds them in the
// Go module cache. The generator copies them into render/validate/crds/ and a test checks the
// copies still match the module cache, so both use this one list.
package crdsource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// Source is one upstream module and the CRD files taken from it.
type Source struct {
	// Module is the Go module path.
	Module string
	// Version pins modules that go.mod does not require; empty means "the version go.mod requires".
	Version string
	// Dir is the directory under crds/ the files are copied to.
	Dir string
	// Files are paths inside the module.
	Files []string
}

// Sources are the CRDs of every kind kueuelab emits. training-operator's kubeflow.org_mpijobs.yaml
// (MPIJob v1) is left out on purpose: kubeflow.org/MPIJob comes from mpi-operator (v2beta1).
var Sources = []Source{
	{Module: "sigs.k8s.io/kueue", Dir: "kueue", Files: []string{
		"config/components/crd/bases/kueue.x-k8s.io_admissionchecks.yaml",
		"config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml",
		"config/components/crd/bases/kueue.x-k8s.io_cohorts.yaml",
		"config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml",
		"config/components/crd/bases/kueue.x-k8s.io_resourceflavors.yaml",
		"config/components/crd/bases/kueue.x-k8s.io_topologies.yaml",
		"config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml",
	}},
	{Module: "sigs.k8s.io/jobset", Dir: "jobset", Files: []string{
		"config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
	}},
	{Module: "github.com/kubeflow/training-operator", Dir: "training-operator", Files: []string{
		"manifests/base/crds/kubeflow.org_pytorchjobs.yaml",
		"manifests/base/crds/kubeflow.org_tfjobs.yaml",
	}},
	{Module: "github.com/kubeflow/mpi-operator", Dir: "mpi-operator", Files: []string{
		"manifests/base/kubeflow.org_mpijobs.yaml",
	}},
	{Module: "github.com/kubeflow/trainer/v2", Dir: "trainer", Files: []string{
		"manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml",
		"manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml",
	}},
	{Module: "github.com/kubeflow/katib", Dir: "katib", Files: []string{
		"manifests/v1beta1/components/crd/experiment.yaml",
	}},
	// kwok is not imported (its dependency tree is large and only its controller binary is
	// used), so go.mod does not require it; this version matches the binary the runtime builds.
	{Module: "sigs.k8s.io/kwok", Version: "v0.7.0", Dir: "kwok", Files: []string{
		"kustomize/crd/bases/kwok.x-k8s.io_stages.yaml",
	}},
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
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("go %s: decode output: %w", strings.Join(args, " "), err)
	}
	return nil
}
