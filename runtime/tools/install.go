package tools

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Installer builds a Set with the local Go toolchain.
type Installer struct {
	Go       string    // the go command; "go" when empty
	CacheDir string    // kueuelab's cache root (work dirs and logs go under it)
	BinDir   string    // where the binaries go
	Out      io.Writer // one progress line per component
	Force    bool      // rebuild binaries that are present
}

// Install builds every missing binary of the set, one component at a time (each go build is
// parallel already), and downloads the manifest modules.
func (in Installer) Install(ctx context.Context, set Set) error {
	start := time.Now()
	if err := in.buildMissing(ctx, set); err != nil {
		return err
	}
	t0 := time.Now()
	for _, m := range ManifestModules() {
		if _, err := ModuleDir(ctx, in.Go, m); err != nil {
			return err
		}
	}
	fmt.Fprintf(in.Out, "  %-24s %-8s ready in %s\n", "manifest modules", "", time.Since(t0).Round(time.Second))
	fmt.Fprintf(in.Out, "total %s\n", time.Since(start).Round(time.Second))
	return nil
}

// EnsureNodeBinaries returns the path of each binary of NodeSet by name ("kubelet",
// "kube-proxy") in in.BinDir, building the missing ones first. On 2 cores with the module cache
// warm, kubelet took 7 min (412 s) with an empty build cache and kube-proxy 12 s after it; with
// their packages in the build cache, the link alone: 9 s and 6 s. in.Out (nil: discarded) gets
// one line per binary.
func EnsureNodeBinaries(ctx context.Context, in Installer) (map[string]string, error) {
	set := NodeSet()
	if bins, err := Locate(in.BinDir, set); err == nil {
		return bins, nil
	}
	if in.Out == nil {
		in.Out = io.Discard
	}
	if err := in.buildMissing(ctx, set); err != nil {
		return nil, fmt.Errorf("node binaries: %w", err)
	}
	return Locate(in.BinDir, set)
}

// buildMissing builds the set's binaries that are not in in.BinDir (all of them with in.Force).
func (in Installer) buildMissing(ctx context.Context, set Set) error {
	logDir := filepath.Join(in.CacheDir, "logs", set.Name)
	work := filepath.Join(in.CacheDir, "build", set.Name)
	for _, d := range []string{in.BinDir, logDir, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("tools install: %w", err)
		}
	}
	fmt.Fprintf(in.Out, "tools set %s -> %s\n", set.Name, in.BinDir)
	for _, c := range set.Components {
		dst := filepath.Join(in.BinDir, c.FileName())
		if _, err := os.Stat(dst); err == nil && !in.Force {
			fmt.Fprintf(in.Out, "  %-24s %-8s present\n", c.Name, c.Version)
			continue
		}
		t0 := time.Now()
		logPath := filepath.Join(logDir, c.Name+".log")
		if err := in.build(ctx, c, work, dst, logPath); err != nil {
			return fmt.Errorf("build %s %s: %w\n--- last lines of %s ---\n%s", c.Name, c.Version, err, logPath, tail(logPath, 25))
		}
		fmt.Fprintf(in.Out, "  %-24s %-8s built in %s\n", c.Name, c.Version, time.Since(t0).Round(time.Second))
	}
	return nil
}

// GoBuildFlags are the go build (or install) flags every tool is built with, ldflags added to
// the linker's. The linker drops DWARF (-w), so the compiler need not write it: 7 % less wall time
// for a cold build of kwok (farm-bench, A B A B: 207 s against 224 s), 4 % for the whole set
// (37 min 17 s against 38 min 53 s), the same binaries otherwise.
func GoBuildFlags(ldflags ...string) []string {
	return []string{"-trimpath", "-gcflags=all=-dwarf=false", "-ldflags", strings.Join(append([]string{"-s", "-w"}, ldflags...), " ")}
}

func (in Installer) build(ctx context.Context, c Component, work, dst, logPath string) error {
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	r := runner{goBin: in.Go, log: logf}
	flags := GoBuildFlags(c.ldflags...)
	tmp := dst + ".tmp"
	defer os.Remove(tmp)
	switch c.method {
	case wrapperK8s:
		dir := filepath.Join(work, "k8s")
		if err := writeK8sWrapper(ctx, r, dir, c); err != nil {
			return err
		}
		if len(c.patches) > 0 {
			if dir, err = in.patchedK8sWrapper(ctx, r, c, dir, filepath.Join(work, "k8s-"+c.FileName())); err != nil {
				return err
			}
		}
		if c.main != "" {
			if err := os.MkdirAll(filepath.Join(dir, c.Name), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, c.Name, "main.go"), []byte(c.main), 0o644); err != nil {
				return err
			}
		}
		err = r.run(ctx, dir, modMod, slices.Concat([]string{"build"}, flags, []string{"-o", tmp, c.Package})...)
	case wrapperModule:
		dir := filepath.Join(work, c.Name)
		if err := writeWrapper(ctx, r, dir, "go 1.23", c.Module+" "+c.Version, nil, c.Package); err != nil {
			return err
		}
		err = r.run(ctx, dir, modMod, slices.Concat([]string{"build"}, flags, []string{"-o", tmp, c.Package})...)
	case goInstall:
		gobin := filepath.Join(work, "gobin")
		r.extraEnv = []string{"GOBIN=" + gobin}
		if err = r.run(ctx, work, "", slices.Concat([]string{"install"}, flags, []string{c.Package + "@" + c.Version})...); err == nil {
			err = copyFile(filepath.Join(gobin, filepath.Base(c.Package)), tmp)
		}
	case sourceCopy:
		dir := filepath.Join(work, c.Name)
		if err := in.copySource(ctx, r, c, dir); err != nil {
			return err
		}
		err = r.run(ctx, dir, modMod, slices.Concat([]string{"build"}, flags, []string{"-o", tmp, c.Package})...)
	default:
		return fmt.Errorf("unknown build method %d", c.method)
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// patchedK8sWrapper is the tidied wrapper module in shared with k8s.io/kubernetes replaced by a
// patched copy of its source: a Kubernetes component whose build differs from upstream's in
// an unexported function (kube-scheduler's tie-break) cannot change it from its main package as
// the controller manager's does. The staging modules stay those of shared's go.mod (the copy's
// own replace directives are ignored, as for any module that is not the main one), and the build
// cache recompiles only the packages the patches touch and what imports them.
func (in Installer) patchedK8sWrapper(ctx context.Context, r runner, c Component, shared, dir string) (string, error) {
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := in.copySource(ctx, r, c, filepath.Join(dir, "kubernetes")); err != nil {
		return "", err
	}
	for _, f := range []string{"go.mod", "go.sum", "tools.go"} {
		b, err := os.ReadFile(filepath.Join(shared, f))
		if err != nil {
			return "", err
		}
		if f == "go.mod" {
			b = append(b, []byte("\nreplace "+c.Module+" => ./kubernetes\n")...)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// copySource copies the module out of the read-only module cache and applies the component's patch.
func (in Installer) copySource(ctx context.Context, r runner, c Component, dir string) error {
	return PatchedModule(ctx, in.Go, c.Module+"@"+c.Version, dir, c.patches, r.log)
}

// PatchedModule writes into dir (replacing what it holds) a copy of module@version from the module
// cache with the named patches of patches/ applied in order; patch(1)'s output goes to log.
func PatchedModule(ctx context.Context, goBin, moduleAtVersion, dir string, names []string, log io.Writer) error {
	src, err := ModuleDir(ctx, goBin, moduleAtVersion)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	// os.CopyFS makes the copies writable (the module cache's are read-only), so the patches apply.
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	for _, name := range names {
		p, err := patches.ReadFile("patches/" + name)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "patch", "-p1", "--forward", "--batch")
		cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, bytes.NewReader(p), log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apply patches/%s to %s: %w", name, moduleAtVersion, err)
		}
	}
	return nil
}

// PatchSum is a digest of the named patches' contents, for a cache key.
func PatchSum(names []string) (string, error) {
	h := sha256.New()
	for _, name := range names {
		p, err := patches.ReadFile("patches/" + name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(p))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// k8sWrapperCommands are the commands of k8s.io/kubernetes the wrapper module is tidied for: every
// wrapperK8s component's, of Pinned and NodeSet (TestK8sWrapperListsEveryCommand). One module
// for all of them, so they share one go.sum and one build cache.
var k8sWrapperCommands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"}

func k8sWrapperPackages() []string {
	out := make([]string, len(k8sWrapperCommands))
	for i, name := range k8sWrapperCommands {
		out[i] = "k8s.io/kubernetes/cmd/" + name
	}
	return out
}

// writeK8sWrapper writes a wrapper module requiring k8s.io/kubernetes with one replace per staging
// module, derived from the replace block of kubernetes' own go.mod, and tidies it once for every
// command of k8sWrapperCommands.
func writeK8sWrapper(ctx context.Context, r runner, dir string, c Component) error {
	tools := toolsGo(k8sWrapperPackages()...)
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		have, rerr := os.ReadFile(filepath.Join(dir, "tools.go"))
		if rerr == nil && string(have) == tools {
			return nil // already tidied for every command
		}
		// A wrapper tidied for fewer commands lacks the modules only the others import (kubelet:
		// k8s.io/cri-streaming, otelrestful and more). Tidying it again with its go.mod kept adds
		// them at the versions k8s.io/kubernetes requires and leaves the selected versions as they
		// are, so the binaries built before are what a rebuild gives (kube-apiserver, checked:
		// byte for byte). Building with -mod=mod alone would also add them, but only as a side
		// effect of whichever build ran first.
		if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(tools), 0o644); err != nil {
			return err
		}
		if err := r.run(ctx, dir, modMod, "mod", "tidy"); err != nil {
			// The old tools.go back, so the next install tidies again rather than take the
			// wrapper for tidied.
			if rerr == nil {
				if werr := os.WriteFile(filepath.Join(dir, "tools.go"), have, 0o644); werr != nil {
					return errors.Join(err, werr)
				}
			}
			return err
		}
		return nil
	}
	kdir, err := ModuleDir(ctx, r.goBin, c.Module+"@"+c.Version)
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(kdir, "go.mod"))
	if err != nil {
		return err
	}
	staging := "v0." + strings.TrimPrefix(c.Version, "v1.")
	var replaces []string
	// The wrapper takes kubernetes' go and godebug lines: a main module's go line sets the
	// language version and the GODEBUG defaults its build links in.
	var header []string
	inReplace := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "go ") || strings.HasPrefix(line, "godebug "):
			header = append(header, line)
		case line == "replace (":
			inReplace = true
		case inReplace && line == ")":
			inReplace = false
		case inReplace && strings.Contains(line, "=>"):
			mod := strings.Fields(line)[0]
			replaces = append(replaces, fmt.Sprintf("%s => %s %s", mod, mod, staging))
		}
	}
	if len(replaces) == 0 {
		return fmt.Errorf("no replace block in %s/go.mod", kdir)
	}
	if len(header) == 0 {
		return fmt.Errorf("no go line in %s/go.mod", kdir)
	}
	return writeWrapper(ctx, r, dir, strings.Join(header, "\n\n"), c.Module+" "+c.Version, replaces, k8sWrapperPackages()...)
}

// writeWrapper writes go.mod and a tools.go importing pkgs, then tidies the wrapper module.
func writeWrapper(ctx context.Context, r runner, dir, goLine, require string, replaces []string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module kueuelab.local/%s\n\n%s\n\nrequire %s\n", filepath.Base(dir), goLine, require)
	if len(replaces) > 0 {
		b.WriteString("\nreplace (\n")
		for _, r := range replaces {
			b.WriteString("\t" + r + "\n")
		}
		b.WriteString(")\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tools.go"), []byte(toolsGo(pkgs...)), 0o644); err != nil {
		return err
	}
	return r.run(ctx, dir, modMod, "mod", "tidy")
}

// toolsGo is a wrapper module's tools.go: a file importing pkgs, so tidy keeps what they need.
func toolsGo(pkgs ...string) string {
	var t strings.Builder
	t.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&t, "\t_ %q\n", p)
	}
	t.WriteString(")\n")
	return t.String()
}

const modMod = "-mod=mod"

// runner runs the go command with an explicit environment and logs its output.
type runner struct {
	goBin    string
	log      io.Writer
	extraEnv []string
}

func (r runner) run(ctx context.Context, dir, goflags string, args ...string) error {
	cmd := exec.CommandContext(ctx, goCmd(r.goBin), args...)
	cmd.Dir = dir
	cmd.Env = append(goEnv(goflags), r.extraEnv...)
	cmd.Stdout, cmd.Stderr = r.log, r.log
	fmt.Fprintf(r.log, "$ (cd %s && go %s)\n", dir, strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", args[0], err)
	}
	return nil
}

func goCmd(g string) string {
	if g == "" {
		return "go"
	}
	return g
}

// goEnv is the caller's environment with the settings the builds rely on made explicit: the local
// toolchain (no automatic download), no workspace, static binaries, and the given GOFLAGS.
func goEnv(goflags string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "GOTOOLCHAIN", "GOFLAGS", "GOWORK", "CGO_ENABLED", "GOBIN":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0", "GOFLAGS="+goflags)
}

// ModuleDirEnv names a directory holding modules as <dir>/<module>@<version> (the runner image's
// copy of the manifest modules' YAML): where it is set, ModuleDir looks there and never runs go.
const ModuleDirEnv = "KUEUELAB_MODULE_DIR"

// ModuleDir downloads mod@version through the module proxy (a no-op when cached) and returns
// its directory in the module cache; with $KUEUELAB_MODULE_DIR set, its directory there.
func ModuleDir(ctx context.Context, goBin, modAtVersion string) (string, error) {
	if root := os.Getenv(ModuleDirEnv); root != "" {
		d := filepath.Join(root, filepath.FromSlash(modAtVersion))
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return "", fmt.Errorf("module %s: no directory %s ($%s=%s)", modAtVersion, d, ModuleDirEnv, root)
		}
		return d, nil
	}
	cmd := exec.CommandContext(ctx, goCmd(goBin), "mod", "download", "-json", modAtVersion)
	cmd.Env = goEnv("")
	cmd.Dir = os.TempDir() // outside any module, so the project's go.mod plays no part
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr == nil && info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %s", modAtVersion, info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s", modAtVersion, err, strings.TrimSpace(stderr.String()))
	}
	if info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: no Dir in output", modAtVersion)
	}
	return info.Dir, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	// Keep the mode (the binary stays executable), writable so a rebuild can replace it.
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, st.Mode().Perm()|0o200)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// tail returns the last n lines of a file (for build failures).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
