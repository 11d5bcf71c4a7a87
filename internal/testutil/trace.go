package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

// WriteTrace writes the JSON lines of a trace into a file of the test's and loads it; it returns
// the file's path and the trace.
func WriteTrace(t testing.TB, lines ...string) (string, *trace.Trace) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := trace.LoadWorkloads(t.Context(), path, trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return path, tr
}
