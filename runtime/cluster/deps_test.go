package cluster

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/kueuelab/kueuelab/"

// TestNoLocalControlPlane fails when this package reaches runtime/localcluster through any chain
// of the module's own packages: a replay on a user's cluster must not depend on the process
// supervisor. It follows the non-test imports each package's files declare for this platform, as
// `go list -deps` would, without running the go command. (While localcluster imports this package
// such an import is also a cycle the compiler refuses; the test keeps the rule if that changes.)
func TestNoLocalControlPlane(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const start, forbidden = module + "runtime/cluster", module + "runtime/localcluster"
	via := map[string]string{start: ""} // package -> the package that imports it
	queue := []string{start}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(pkg, module)), 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue // outside the module: cannot import this module's packages
			}
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = pkg
			if imp == forbidden {
				chain := []string{imp}
				for p := pkg; p != ""; p = via[p] {
					chain = append([]string{p}, chain...)
				}
				t.Fatalf("runtime/cluster imports the local control plane: %s", strings.Join(chain, " -> "))
			}
			queue = append(queue, imp)
		}
	}
	if len(via) < 3 {
		t.Fatalf("followed only %v: the walk is broken", via)
	}
}
