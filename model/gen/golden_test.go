package gen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// goldenTrace is `kueuelab gen --jobs 50 --seed 7 --emit-workload-records`; cmd/kueuelab's test
// compares the command's output with the same file.
const goldenTrace = "testdata/jobs50-seed7-workloads.jsonl"

func TestGoldenTrace(t *testing.T) {
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := trace.NewWriter(&buf)
	if _, err := Write(context.Background(), w, New(p, 7), Options{Workloads: 50, EmitWorkloadRecords: true}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(goldenTrace), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenTrace, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenTrace)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("output differs from %s: the generator's bytes changed (if intended, rerun with -update)", goldenTrace)
	}
}

// goldenHash is the SHA-256 of a 200,000-workload trace with burst days: the bytes of every random
// draw, transcendental function and float formatting path. Running this test with GOARCH=386 or
// GOAMD64=v3 (where the compiler fuses multiply-adds unless told not to) checks portability.
const goldenHash = "testdata/seed99-200k-burst.sha256"

func TestGoldenHash(t *testing.T) {
	p, err := DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	p.Arrival.Burst.DayProbability = 0.3
	h := sha256.New()
	w := trace.NewWriter(h)
	if _, err := Write(context.Background(), w, New(p, 99), Options{Workloads: 200_000, EmitWorkloadRecords: true}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := hex.EncodeToString(h.Sum(nil)) + "\n"
	if *update {
		if err := os.WriteFile(goldenHash, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenHash)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("trace hash %s, golden %s", got, want)
	}
}
