package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records a skip or a failure instead of ending the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	if r.skipped == "" && r.failed == "" {
		r.skipped = fmt.Sprint(args...)
	}
}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.skipped == "" && r.failed == "" {
		r.failed = fmt.Sprintf(format, args...)
	}
}

func TestSkipMissingFailsInCI(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kube-scheduler")
	for _, ci := range []string{"", "false", "true", "1"} {
		t.Setenv(CIEnv, ci)
		r := &recorder{TB: t}
		ToolsBinary(r, missing)
		inCI := ci == "true" || ci == "1"
		if got := r.failed != ""; got != inCI || (r.failed == "") == (r.skipped == "") {
			t.Errorf("CI=%q: skipped %q, failed %q; want a failure only in CI", ci, r.skipped, r.failed)
		}
		if msg := r.skipped + r.failed; !strings.Contains(msg, "no kube-scheduler in the tools cache") || !strings.Contains(msg, "make tools") {
			t.Errorf("CI=%q: %q does not name the binary and how to build it", ci, msg)
		}
	}
}

func TestToolsBinaryAcceptsAnExecutable(t *testing.T) {
	t.Setenv(CIEnv, "true")
	bin := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	ToolsBinary(r, bin)
	if !strings.Contains(r.failed, "not an executable file") {
		t.Errorf("a non-executable file: failed %q", r.failed)
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	r = &recorder{TB: t}
	if got := ToolsBinary(r, bin); got != bin || r.failed != "" || r.skipped != "" {
		t.Errorf("an executable: %q, failed %q, skipped %q", got, r.failed, r.skipped)
	}
}

func TestSkipIfOfflineOnlyForNetworkErrors(t *testing.T) {
	t.Setenv(CIEnv, "")
	for _, tc := range []struct {
		err     string
		skipped bool
	}{
		{`go: sigs.k8s.io/kwok@v0.7.0: Get "https://proxy.golang.org/sigs.k8s.io/kwok/@v/v0.7.0.info": dial tcp: lookup proxy.golang.org: no such host`, true},
		{"go: module lookup disabled by GOPROXY=off", true},
		{`go: sigs.k8s.io/kwok@v0.99.0: reading https://proxy.golang.org/sigs.k8s.io/kwok/@v/v0.99.0.info: 404 Not Found`, false},
		{"go: module sigs.k8s.io/nothing: not a known dependency", false},
	} {
		r := &recorder{TB: t}
		SkipIfOffline(r, "the CRDs", errors.New(tc.err), nil)
		if (r.skipped != "") != tc.skipped || r.failed != "" {
			t.Errorf("%s: skipped %q, failed %q; want skipped %v", tc.err, r.skipped, r.failed, tc.skipped)
		}
	}
	t.Setenv(CIEnv, "true")
	r := &recorder{TB: t}
	SkipIfOffline(r, "helm", errors.New("exit status 1"), []byte("dial tcp 127.0.0.1:1: connect: connection refused"))
	if !strings.Contains(r.failed, "helm: the Go module proxy is unreachable") {
		t.Errorf("offline in CI: failed %q, skipped %q; want a failure", r.failed, r.skipped)
	}
}
