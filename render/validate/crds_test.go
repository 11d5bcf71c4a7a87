package validate

import (
	"bytes"
	"context"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/kueuelab/kueuelab/render/validate/internal/crdsource"
)

// TestEmbeddedCRDsMatchModules proves the embedded schemas are the upstream files at the versions
// go.mod pins: regenerate with `go generate ./render/validate` when this fails.
func TestEmbeddedCRDsMatchModules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, src := range crdsource.Sources {
		loc, err := crdsource.Locate(context.Background(), root, src)
		if err != nil {
			t.Skipf("module cache not available (offline build?): %v", err)
		}
		// A kind's typed API (go.mod) and the CRD it is validated against are one release.
		if src.Version != "" {
			gm, err := crdsource.GoModVersion(context.Background(), root, src.Module)
			if err != nil {
				t.Fatal(err)
			}
			if gm != "" && gm != src.Version {
				t.Errorf("%s: the registry takes CRDs from %s, go.mod requires %s", src.Module, src.Version, gm)
			}
		}
		for _, f := range src.Files {
			name := path.Join("crds", src.Dir, path.Base(f))
			want[name] = true
			upstream, err := os.ReadFile(filepath.Join(loc.ModDir, f))
			if err != nil {
				t.Errorf("%s@%s: %v", src.Module, loc.Version, err)
				continue
			}
			embedded, err := crdFiles.ReadFile(name)
			if err != nil {
				t.Errorf("%s not embedded; run go generate ./render/validate", name)
				continue
			}
			if !bytes.Equal(upstream, embedded) {
				t.Errorf("%s differs from %s@%s %s; run go generate ./render/validate", name, src.Module, loc.Version, f)
			}
		}
	}
	entries, err := crdFiles.ReadDir("crds")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range entries {
		if !d.IsDir() {
			continue
		}
		files, err := crdFiles.ReadDir(path.Join("crds", d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if name := path.Join("crds", d.Name(), f.Name()); !want[name] {
				t.Errorf("%s is embedded but not listed in crdsource.Sources", name)
			}
		}
	}
}
