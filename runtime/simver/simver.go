// Package simver gives the sim engine any supported Kueue release. A Go binary links one version
// of a module, and each Kueue release brings its own code for the packages the sim calls, so the
// sim for a release other than the one this binary links is another kueuelab binary: built from
// this binary's own source tree, in a wrapper module that replaces sigs.k8s.io/kueue with the
// release (and selects its compat files by build tag), into kueuelab's cache. A command asked of
// another release runs through that binary as a child process and writes the same results.
//
// The Kubernetes libraries stay this module's: the child links the release's scheduling, queueing
// and workload code against kueuelab's client-go and controller-runtime.
package simver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kueuelab/kueuelab/runtime/kueuever"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// Module is kueuelab's module path.
const Module = "github.com/kueuelab/kueuelab"

// SourceDir is the root of the source tree this binary was built from, found through the path
// the compiler recorded for this file; it must still hold kueuelab's go.mod.
func SourceDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("simver: no source path recorded in this binary")
	}
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(b, []byte("module "+Module+"\n")) {
		return "", fmt.Errorf("the sim for another Kueue release is built from kueuelab's source, which this binary was built from at %s; it is not there (build kueuelab from a checkout with `make build` and run it there)", root)
	}
	return root, nil
}

// wrapperMod is the wrapper module's go.mod for release v of source tree src, with Kueue from the
// module proxy, or from the directory kueueDir when the release needs patches.
func wrapperMod(src string, v kueuever.Version, kueueDir string) []byte {
	kueue := "sigs.k8s.io/kueue " + v.Name
	if kueueDir != "" {
		kueue = kueueDir
	}
	return fmt.Appendf(nil, `// Written by kueuelab: its sim engine linking Kueue %[3]s.
module kueuelab.local/sim

go 1.26

require %[1]s v0.0.0

replace %[1]s => %[2]s

replace sigs.k8s.io/kueue => %[4]s
`, Module, src, v.Name, kueue)
}

// patchedKueue prepares, in dir/kueue-<sum>, Kueue v's source with its SimPatches applied (once
// per patch set) and returns the directory; "" when v needs none.
func patchedKueue(ctx context.Context, dir string, v kueuever.Version, log io.Writer) (string, error) {
	if len(v.SimPatches) == 0 {
		return "", nil
	}
	sum, err := tools.PatchSum(v.SimPatches)
	if err != nil {
		return "", err
	}
	kdir := filepath.Join(dir, "kueue-"+sum)
	done := filepath.Join(dir, "kueue-"+sum+".done")
	if _, err := os.Stat(done); err == nil {
		return kdir, nil
	}
	if err := tools.PatchedModule(ctx, "", "sigs.k8s.io/kueue@"+v.Name, kdir, v.SimPatches, log); err != nil {
		return "", fmt.Errorf("sim for Kueue %s: %w", v.Name, err)
	}
	return kdir, os.WriteFile(done, nil, 0o644)
}

// Dir is the wrapper module's directory for release v of source tree src: one per source tree, so
// two checkouts never build over each other.
func Dir(src string, v kueuever.Version) (string, error) {
	cache, err := tools.CacheDir()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(src))
	return filepath.Join(cache, "sims", hex.EncodeToString(h[:6]), "kueue-"+v.Name), nil
}

// Binary returns a kueuelab binary whose sim links release v, building it first when it is
// missing or older than the source (go build's own staleness check: about 2 s when nothing
// changed; the first build of a release compiles its graph, a few minutes). Builds of one
// release are serialised by a lock in its directory. log hears that a build starts and ends.
func Binary(ctx context.Context, v kueuever.Version, log io.Writer) (string, error) {
	if v.Tag == "" {
		return "", fmt.Errorf("simver: Kueue %s is the release this binary links; run it in this process", v.Name)
	}
	src, err := SourceDir()
	if err != nil {
		return "", err
	}
	dir, err := Dir(src, v)
	if err != nil {
		return "", err
	}
	// The sims of checkouts that are gone (a CI clone, a deleted worktree) go with them.
	PruneStale(filepath.Dir(filepath.Dir(dir)), log)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("sim for Kueue %s: %w", v.Name, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("sim for Kueue %s: %w", v.Name, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("sim for Kueue %s: lock %s: %w", v.Name, lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too
	var patchLog bytes.Buffer
	kdir, err := patchedKueue(ctx, dir, v, &patchLog)
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, patchLog.Bytes())
	}
	mod := wrapperMod(src, v, kdir)
	gomod := filepath.Join(dir, "go.mod")
	// go build adds the requirements and sums it needs to the wrapper's files (-mod=mod); only a
	// different header starts them over.
	if cur, err := os.ReadFile(gomod); err != nil || !bytes.HasPrefix(cur, mod) {
		if err := os.WriteFile(gomod, mod, 0o644); err != nil {
			return "", err
		}
		_ = os.Remove(filepath.Join(dir, "go.sum"))
	}
	bin := filepath.Join(dir, "kueuelab")
	_, statErr := os.Stat(bin)
	t0 := time.Now()
	if statErr != nil {
		fmt.Fprintf(log, "building kueuelab's sim for Kueue %s into %s (first use: compiles Kueue %s and its graph, a few minutes)\n", v.Name, dir, v.Name)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", v.Tag, "-o", bin, Module+"/cmd/kueuelab")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", fmt.Errorf("sim for Kueue %s: it is built from source with the Go toolchain, and go is not on PATH", v.Name)
		}
		return "", fmt.Errorf("sim for Kueue %s: go build in %s: %w\n%s", v.Name, dir, err, out.Bytes())
	}
	if statErr != nil {
		fmt.Fprintf(log, "built kueuelab's sim for Kueue %s in %s\n", v.Name, time.Since(t0).Round(time.Second))
	}
	return bin, nil
}

// Run runs bin with args, its standard streams this process's, and returns its error: an
// *exec.ExitError carries the child's exit code. The child has a process group of its own, so a
// terminal's Ctrl-C reaches it once, through this process: every interrupt or termination this
// process gets is passed on (the first makes the child flush its results, as it would on its own;
// a second kills it as it would), and Run waits for the child. ctx only starts it: a caller's
// cancellation comes from those same signals.
func Run(ctx context.Context, bin string, args []string, stdout, stderr io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			return err
		case s := <-sig:
			_ = cmd.Process.Signal(s)
		}
	}
}

// PruneStale removes, under sims (the cache's sims directory), the sims of source trees that no
// longer exist: each source tree's directory goes when every wrapper in it names a source
// directory without kueuelab's go.mod and no build of it holds its lock. What it removes it
// names on log.
func PruneStale(sims string, log io.Writer) {
	trees, err := os.ReadDir(sims)
	if err != nil {
		return
	}
	for _, tree := range trees {
		dir := filepath.Join(sims, tree.Name())
		wrappers, _ := filepath.Glob(filepath.Join(dir, "kueue-*", "go.mod"))
		if len(wrappers) == 0 {
			continue
		}
		gone := true
		var src string
		for _, w := range wrappers {
			if src = replacedSource(w); src == "" || sourceExists(src) || locked(filepath.Join(filepath.Dir(w), "lock")) {
				gone = false
				break
			}
		}
		if gone && os.RemoveAll(dir) == nil {
			fmt.Fprintf(log, "removed the sims of %s (that source tree is gone) from %s\n", src, dir)
		}
	}
}

// replacedSource is the source directory a wrapper go.mod replaces kueuelab with, or "".
func replacedSource(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	prefix := "replace " + Module + " => "
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(strings.TrimPrefix(line, prefix))
		}
	}
	return ""
}

func sourceExists(src string) bool {
	b, err := os.ReadFile(filepath.Join(src, "go.mod"))
	return err == nil && bytes.HasPrefix(b, []byte("module "+Module+"\n"))
}

// locked says whether a build holds the lock file path.
func locked(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
