package testutil

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kueuelab/kueuelab/model/gen"
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

// WriteGenerated writes an n-workload trace of profile p with seed (workload records before their
// jobs) into a file of the test's and returns its path.
func WriteGenerated(tb testing.TB, p *gen.Profile, n int, seed uint64) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "trace.jsonl")
	fw, err := trace.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := gen.Write(context.Background(), fw.Writer, gen.New(p, seed), gen.Options{Workloads: n, EmitWorkloadRecords: true}); err != nil {
		tb.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}
