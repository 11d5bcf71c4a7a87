package validate

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kueuelab/kueuelab/internal/testutil"
	"github.com/kueuelab/kueuelab/render"
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
			// Only an unreachable module proxy (with the module not cached) is a reason to skip,
			// and not in CI; anything else (a version go.mod or the proxy does not have) fails.
			testutil.SkipIfOffline(t, "the upstream CRDs of "+src.Module, err, nil)
			t.Fatal(err)
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

// TestRegistryMatchesItsCRDs: each kind's GVK and plural, and those of the Kueue integrations
// admitting it, are what the embedded CRDs serve (built-in kinds excepted).
func TestRegistryMatchesItsCRDs(t *testing.T) {
	served := map[string]bool{} // group/version/kind/plural
	err := fs.WalkDir(crdFiles, "crds", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" {
			return err
		}
		b, err := crdFiles.ReadFile(p)
		if err != nil {
			return err
		}
		crds, err := parseCRDs(b)
		for _, crd := range crds {
			for _, v := range crd.Spec.Versions {
				if v.Served {
					served[crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Kind+"/"+crd.Spec.Names.Plural] = true
				}
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	builtin := map[string]bool{"batch": true, "": true}
	for _, in := range render.DefaultRegistry().Integrations() {
		check := func(what string, gvk schema.GroupVersionKind, plural string) {
			if builtin[gvk.Group] {
				return
			}
			if !served[gvk.Group+"/"+gvk.Version+"/"+gvk.Kind+"/"+plural] {
				t.Errorf("%s: %s %v (%s) is served by none of the embedded CRDs", in.Name(), what, gvk, plural)
			}
		}
		check("kind", in.GVK, in.Resource)
		for _, k := range in.Kueue {
			check("Kueue integration "+k.Framework, k.Kind, k.Resource)
		}
		if len(in.CRDs) == 0 && !builtin[in.GVK.Group] {
			t.Errorf("%s: a custom resource without CRD sources", in.Name())
		}
	}
}
