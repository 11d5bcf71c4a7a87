// Package testutil is what tests share about their prerequisites. A test that needs something a
// developer's machine may lack (a binary of the tools cache, the Go module proxy, a host command)
// skips saying what is missing and how to get it, except under CI=true: CI provides all of them
// (`make test` builds the tools before the unit tests), so there a missing one means CI is broken,
// and the test fails naming it instead of passing without proving anything.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// CIEnv is the variable CI sets (CI=true); any value strconv.ParseBool reads as true counts.
const CIEnv = "CI"

// InCI reports whether the tests run in CI, where no prerequisite may be missing.
func InCI() bool {
	v, _ := strconv.ParseBool(os.Getenv(CIEnv))
	return v
}

// SkipMissing skips t because something it needs is missing, or fails it under CI=true. The
// message names the missing thing and how to get it.
func SkipMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s=%s, where this test must not be skipped: %s", CIEnv, os.Getenv(CIEnv), msg)
	}
	t.Skip(msg)
}

// ToolsBinary returns path, a binary of the tools cache the test runs. When it is not an
// executable file there, the test is skipped (failed under CI=true) with how to build the tools.
func ToolsBinary(t testing.TB, path string) string {
	t.Helper()
	st, err := os.Stat(path)
	if err == nil && (st.IsDir() || st.Mode().Perm()&0o111 == 0) {
		err = fmt.Errorf("%s is not an executable file", path)
	}
	if err != nil {
		SkipMissing(t, "no %s in the tools cache (%v): build the tools with `make tools` (`kueuelab tools install`)",
			filepath.Base(path), err)
	}
	return path
}

// Command returns the path of a host command the test runs (exec.LookPath); when there is none,
// the test is skipped (failed under CI=true, whose machine has every command the tools build needs).
func Command(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		SkipMissing(t, "no %s command on this machine: %v", name, err)
	}
	return p
}

// offlineSymptoms are the texts by which the go command, or the network stack under it, says the
// module proxy (or checksum database) cannot be reached, or that module lookups are turned off.
var offlineSymptoms = []string{
	"dial tcp", "no such host", "connection refused", "connection reset by peer", "i/o timeout",
	"TLS handshake timeout", "network is unreachable", "server misbehaving",
	"Temporary failure in name resolution", "GOPROXY=off",
}

// OfflineSymptom returns the symptom by which text (a go command's error or output) shows that
// the network is unreachable, or "" when it shows none: then the error is a real failure.
func OfflineSymptom(text string) string {
	for _, s := range offlineSymptoms {
		if strings.Contains(text, s) {
			return s
		}
	}
	return ""
}

// SkipIfOffline skips t (fails it under CI=true) when err, or the command output out, shows that
// what, a download the test needs, failed because the network is unreachable. It returns
// otherwise, and the caller fails the test on err: any other error is a real failure.
func SkipIfOffline(t testing.TB, what string, err error, out []byte) {
	t.Helper()
	text := string(out)
	if err != nil {
		text = err.Error() + "\n" + text
	}
	if s := OfflineSymptom(text); s != "" {
		SkipMissing(t, "%s: the Go module proxy is unreachable (%q): %s", what, s, strings.TrimSpace(text))
	}
}

// HelmVersion is the helm CLI the chart tests use, built from the Go module proxy (as
// hack/helm.sh does).
const HelmVersion = "v3.19.0"

// Helm returns $KUEUELAB_HELM, or helm from kueuelab's dev-tool cache, building it there with
// buildFlags from the module proxy when missing. It skips the test only when the proxy cannot be
// reached, and not under CI=true.
func Helm(t testing.TB, buildFlags ...string) string {
	t.Helper()
	if p := os.Getenv("KUEUELAB_HELM"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	dir := filepath.Join(cache, "kueuelab", "devtools", "helm-"+HelmVersion)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building helm %s into %s (once)", HelmVersion, dir)
	args := append(append([]string{"install"}, buildFlags...), "helm.sh/helm/v3/cmd/helm@"+HelmVersion)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		SkipIfOffline(t, "building helm "+HelmVersion, err, out)
		t.Fatalf("go install helm.sh/helm/v3/cmd/helm@%s: %v\n%s", HelmVersion, err, out)
	}
	return bin
}
