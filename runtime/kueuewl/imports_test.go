package kueuewl

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// adapters are the packages that may import Kueue's code: runtime/kueuewl (this package, the
// adapter the runtime uses) and runtime/sim/kueuelib (the sim's seams into Kueue's code).
var adapters = []string{filepath.Join("runtime", "kueuewl"), filepath.Join("runtime", "sim", "kueuelib")}

// walkImports calls fn with the module-relative path and the imports of every non-test Go file of
// the module outside the adapters.
func walkImports(t *testing.T, fn func(rel string, imports []string)) {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
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
			if slices.Contains(adapters, rel) {
				return filepath.SkipDir
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
		var imports []string
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			imports = append(imports, p)
		}
		fn(rel, imports)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read only %d files under %s: the walk is broken", files, root)
	}
}

// TestOnlyAdaptersImportKueueCode keeps Kueue behind its adapters: no non-test Go file of the
// module outside them imports a package of sigs.k8s.io/kueue/pkg/, Kueue's code, whose packages
// move between versions. Tests may import anything.
func TestOnlyAdaptersImportKueueCode(t *testing.T) {
	walkImports(t, func(rel string, imports []string) {
		for _, p := range imports {
			if strings.HasPrefix(p, "sigs.k8s.io/kueue/pkg/") {
				t.Errorf("%s imports %s: reach Kueue's code through runtime/kueuewl or runtime/sim/kueuelib", rel, p)
			}
		}
	})
}

// maxAPIFiles bounds the non-test files of runtime/ and cmd/ outside the adapters that import
// Kueue's API types (sigs.k8s.io/kueue/apis/...): each is a file a Kueue upgrade may touch.
const maxAPIFiles = 8

// TestFewFilesImportKueueAPI keeps Kueue's API types to the files that work on whole Kueue
// objects (the runner's Workload watch, the sim's lifecycle); a package that needs a few facts of
// a Workload or ClusterQueue gets them from this package.
func TestFewFilesImportKueueAPI(t *testing.T) {
	var using []string
	walkImports(t, func(rel string, imports []string) {
		top := strings.SplitN(rel, string(filepath.Separator), 2)[0]
		if top != "runtime" && top != "cmd" {
			return
		}
		for _, p := range imports {
			if strings.HasPrefix(p, "sigs.k8s.io/kueue/apis/") {
				using = append(using, rel)
				return
			}
		}
	})
	if len(using) > maxAPIFiles {
		t.Errorf("%d files outside the adapters import Kueue's API types, at most %d may: %s\n"+
			"get the facts a file needs from runtime/kueuewl instead", len(using), maxAPIFiles, strings.Join(using, ", "))
	}
}
