package tools

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/internal/testutil"
)

func TestPinnedSetIsConsistent(t *testing.T) {
	set := Pinned()
	seen := map[string]bool{}
	for _, c := range set.Components {
		if seen[c.Name] {
			t.Errorf("component %s listed twice", c.Name)
		}
		seen[c.Name] = true
		if c.Module == "" || !strings.HasPrefix(c.Version, "v") || c.Package == "" {
			t.Errorf("component %s: module %q version %q package %q", c.Name, c.Module, c.Version, c.Package)
		}
		for _, name := range c.patches {
			if _, err := patches.ReadFile("patches/" + name); err != nil {
				t.Errorf("component %s: patch %s: %v", c.Name, name, err)
			}
		}
	}
	if strings.ContainsAny(set.Name, "/ ") {
		t.Errorf("set name %q must be usable as a directory name", set.Name)
	}
}

func TestLocate(t *testing.T) {
	set := Set{Name: "s", Components: []Component{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b"), []byte("not executable"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Locate(dir, set)
	if err == nil || !strings.Contains(err.Error(), "b, c") {
		t.Fatalf("err = %v, want one naming the missing b, c", err)
	}
	if err := os.Chmod(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := Locate(dir, set)
	if err != nil {
		t.Fatal(err)
	}
	if got["c"] != filepath.Join(dir, "c") {
		t.Errorf("c at %q", got["c"])
	}
}

func TestBinDirPrecedence(t *testing.T) {
	set := Set{Name: "s"}
	t.Setenv(BinDirEnv, "/from/env")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	tests := []struct{ flag, want string }{
		{"/from/flag", "/from/flag"},
		{"", "/from/env"},
	}
	for _, tc := range tests {
		if got, err := BinDir(tc.flag, set); err != nil || got != tc.want {
			t.Errorf("BinDir(%q) = %q, %v; want %q", tc.flag, got, err, tc.want)
		}
	}
	t.Setenv(BinDirEnv, "")
	if got, _ := BinDir("", set); got != "/cache/kueuelab/bin/s" {
		t.Errorf("default BinDir = %q, want /cache/kueuelab/bin/s", got)
	}
}

// TestAddedComponentsAreAdditive: the set's cache dir is named by SetName, which records the version
// of every infrastructure component (a new Kubernetes, etcd, KWOK or Kueue is a new set, built
// whole). Every other component records its version in the set name or in its file name, so a
// version bump never silently reuses the old binary, and adding or bumping an operator builds that
// binary alone instead of a new dir (and a 40-minute rebuild of everything).
func TestAddedComponentsAreAdditive(t *testing.T) {
	set := Pinned()
	if set.Name != SetName {
		t.Fatalf("set name %q, want SetName", set.Name)
	}
	infra := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue"}
	files := map[string]string{}
	for _, c := range set.Components {
		v := strings.TrimPrefix(c.Version, "v")
		inName := strings.Contains(set.Name, "-"+v)
		switch {
		case slices.Contains(infra, c.Name) && !inName:
			t.Errorf("infrastructure component %s %s: the set name does not record its version", c.Name, c.Version)
		case !inName && !strings.Contains(c.FileName(), c.Version):
			t.Errorf("component %s %s: neither the set name nor its file name %q records its version", c.Name, c.Version, c.FileName())
		}
		if prev, dup := files[c.FileName()]; dup {
			t.Errorf("components %s and %s share the file name %s", prev, c.Name, c.FileName())
		}
		files[c.FileName()] = c.Name
	}
	for _, name := range infra {
		if !slices.Contains(set.Names(), name) {
			t.Errorf("the set has no %s", name)
		}
	}
}

func TestManifestModulesCoverOperatorsAndCRDs(t *testing.T) {
	mods := ManifestModules()
	for _, c := range Pinned().Components {
		if c.method != goInstall && c.method != sourceCopy || c.Name == "kwok" || c.Name == "kueue" {
			continue
		}
		if !slices.Contains(mods, c.Module+"@"+c.Version) {
			t.Errorf("operator %s: its module %s@%s is not a manifest module (its webhooks would not be found)", c.Name, c.Module, c.Version)
		}
	}
}

// TestPatchesApply applies every component's patch to the files it touches in the pinned module's
// source, so a version bump that moves the patched code fails here rather than in a 40-minute
// tools build.
func TestPatchesApply(t *testing.T) {
	patch := testutil.Command(t, "patch") // the tools build needs it too, so CI has it
	for _, c := range Pinned().Components {
		if len(c.patches) == 0 {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			src, err := ModuleDir(context.Background(), "", c.Module+"@"+c.Version)
			if err != nil {
				testutil.SkipIfOffline(t, "the source of "+c.Module+"@"+c.Version, err, nil)
				t.Fatal(err)
			}
			dir := t.TempDir()
			// The patches apply in order to one copy, so a later one may touch a file an earlier one changed.
			for _, name := range c.patches {
				p, err := patches.ReadFile("patches/" + name)
				if err != nil {
					t.Fatal(err)
				}
				prev := ""
				for _, line := range strings.Split(string(p), "\n") {
					f, ok := strings.CutPrefix(line, "+++ b/")
					created := prev == "--- /dev/null"
					prev = line
					if !ok || created {
						continue // a file the patch creates
					}
					f, _, _ = strings.Cut(f, "\t")
					if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
						continue
					}
					b, err := os.ReadFile(filepath.Join(src, f))
					if err != nil {
						t.Fatalf("%s: patched file: %v", name, err)
					}
					if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				cmd := exec.Command(patch, "-p1", "--forward", "--batch")
				cmd.Dir, cmd.Stdin = dir, bytes.NewReader(p)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("%s does not apply to %s@%s: %v\n%s", name, c.Module, c.Version, err, out)
				}
			}
		})
	}
}

// TestNodeSet: kubelet and kube-proxy are built as kube-apiserver is (the same release, wrapper
// and version stamp) into the pinned set's directory, under file names no pinned binary uses.
func TestNodeSet(t *testing.T) {
	set := NodeSet()
	if set.Name != SetName {
		t.Errorf("node set name %q, want SetName (the binaries sit beside the API server they join)", set.Name)
	}
	var apiserver Component
	files := map[string]bool{}
	for _, c := range Pinned().Components {
		files[c.FileName()] = true
		if c.Name == "kube-apiserver" {
			apiserver = c
		}
	}
	tests := []struct{ name, pkg string }{
		{"kubelet", "k8s.io/kubernetes/cmd/kubelet"},
		{"kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy"},
	}
	if len(set.Components) != len(tests) {
		t.Fatalf("node set %v, want %d components", set.Names(), len(tests))
	}
	for i, tc := range tests {
		c := set.Components[i]
		if c.Name != tc.name || c.FileName() != tc.name || c.Package != tc.pkg {
			t.Errorf("component %d: name %q file %q package %q, want %s in file %[4]s from %s", i, c.Name, c.FileName(), c.Package, tc.name, tc.pkg)
		}
		if c.Module != apiserver.Module || c.Version != apiserver.Version || c.method != wrapperK8s || !slices.Equal(c.ldflags, apiserver.ldflags) {
			t.Errorf("%s: %s@%s method %d ldflags %v; kube-apiserver is %s@%s method %d ldflags %v",
				c.Name, c.Module, c.Version, c.method, c.ldflags, apiserver.Module, apiserver.Version, apiserver.method, apiserver.ldflags)
		}
		if !strings.Contains(set.Name, "-"+strings.TrimPrefix(c.Version, "v")) {
			t.Errorf("%s %s: the set name does not record its version", c.Name, c.Version)
		}
		if files[c.FileName()] {
			t.Errorf("%s: file name %s is a pinned binary's", c.Name, c.FileName())
		}
		files[c.FileName()] = true
	}
}

// TestK8sWrapperListsEveryCommand: the wrapper module is tidied for every Kubernetes command built
// through it, so none of the builds adds modules to the go.sum the others share.
func TestK8sWrapperListsEveryCommand(t *testing.T) {
	tools := toolsGo(k8sWrapperPackages()...)
	for _, c := range slices.Concat(Pinned().Components, NodeSet().Components) {
		if c.method != wrapperK8s {
			continue
		}
		if imp := "\t_ \"k8s.io/kubernetes/cmd/" + c.Name + "\"\n"; !strings.Contains(tools, imp) {
			t.Errorf("the wrapper's tools.go does not import %s's command:\n%s", c.Name, tools)
		}
	}
}

// TestK8sWrapperRetidies runs writeK8sWrapper on a tidied wrapper with a fake go command: a
// wrapper tidied for every command is left alone, one tidied for fewer (a cache from before
// kubelet) gets the full tools.go and one `go mod tidy` with its go.mod kept, and a failed tidy
// puts the old tools.go back so the next install tries again.
func TestK8sWrapperRetidies(t *testing.T) {
	current := toolsGo(k8sWrapperPackages()...)
	old := toolsGo("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kube-scheduler")
	const gomod = "module kueuelab.local/k8s\n\nrequire k8s.io/kubernetes v1.36.2\n"
	tests := []struct {
		name      string
		tools     string
		tidyFails bool
		wantRuns  string // the fake go's log: one line per run, "GOFLAGS args"
		wantTools string
		wantErr   bool
	}{
		{name: "tidied for every command", tools: current, wantTools: current},
		{name: "tidied before kubelet", tools: old, wantRuns: "-mod=mod mod tidy\n", wantTools: current},
		{name: "tidy fails", tools: old, tidyFails: true, wantRuns: "-mod=mod mod tidy\n", wantTools: old, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, bin := t.TempDir(), t.TempDir()
			log := filepath.Join(bin, "log")
			code := 0
			if tc.tidyFails {
				code = 1
			}
			script := "#!/bin/sh\necho \"$GOFLAGS $*\" >> " + log + "\nexit " + strconv.Itoa(code) + "\n"
			goBin := filepath.Join(bin, "go")
			for f, s := range map[string]string{goBin: script, filepath.Join(dir, "go.mod"): gomod,
				filepath.Join(dir, "go.sum"): "", filepath.Join(dir, "tools.go"): tc.tools} {
				if err := os.WriteFile(f, []byte(s), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			err := writeK8sWrapper(context.Background(), runner{goBin: goBin, log: io.Discard}, dir, NodeSet().Components[0])
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
			runs, _ := os.ReadFile(log)
			if string(runs) != tc.wantRuns {
				t.Errorf("go ran %q, want %q", runs, tc.wantRuns)
			}
			for f, want := range map[string]string{"tools.go": tc.wantTools, "go.mod": gomod} {
				if got, _ := os.ReadFile(filepath.Join(dir, f)); string(got) != want {
					t.Errorf("%s:\n%s\nwant:\n%s", f, got, want)
				}
			}
		})
	}
}
