package kueuewl

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyAdaptersImportKueueCode keeps Kueue behind its adapters: no non-test Go file of the
// module outside runtime/kueuewl (this package, the Workload adapter both engines use) and
// runtime/sim/kueuelib (the sim's seams into Kueue's code) imports a package of
// sigs.k8s.io/kueue/pkg/, Kueue's code, whose packages move between versions. Kueue's API types
// (sigs.k8s.io/kueue/apis/...) are not covered by this rule; tests may import anything.
func TestOnlyAdaptersImportKueueCode(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{filepath.Join("runtime", "kueuewl"), filepath.Join("runtime", "sim", "kueuelib")}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			for _, a := range allowed {
				if rel == a {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, "sigs.k8s.io/kueue/pkg/") {
				t.Errorf("%s imports %s: reach Kueue's code through runtime/kueuewl or runtime/sim/kueuelib", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read only %d files under %s: the walk is broken", files, root)
	}
}
