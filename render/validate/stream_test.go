package validate

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestValidateStreamGolden pins the exact error lines (file, line, document, object, field) that
// `kueuelab validate` prints for broken YAML and JSON files.
func TestValidateStreamGolden(t *testing.T) {
	v := validator(t)
	inputs, err := filepath.Glob("testdata/stream/*.[jy][sa]*")
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) == 0 {
		t.Fatal("no inputs")
	}
	for _, in := range inputs {
		if strings.HasSuffix(in, ".golden") {
			continue
		}
		t.Run(filepath.Base(in), func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			res := v.ValidateStream(context.Background(), f, filepath.Base(in))
			var got bytes.Buffer
			for _, e := range res.Errors {
				fmt.Fprintln(&got, e)
			}
			fmt.Fprintf(&got, "%d objects, %d invalid\n", res.Objects, res.Invalid)
			golden := in + ".golden"
			if *update {
				if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if got.String() != string(want) {
				t.Errorf("got:\n%s\nwant:\n%s", got.String(), want)
			}
		})
	}
}

func TestValidateYAMLValid(t *testing.T) {
	v := validator(t)
	in := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata:\n  name: org\n"
	if errs := v.ValidateYAML(strings.NewReader(in), "ok.yaml"); len(errs) != 0 {
		t.Fatalf("errors: %v", errs)
	}
}

// A KWOK node manifest carries its capacity in status; any other kind's status is a mistake.
func TestValidateYAMLNodeStatus(t *testing.T) {
	v := validator(t)
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"node with capacity", "apiVersion: v1\nkind: Node\nmetadata:\n  name: h100-000\nstatus:\n  capacity:\n    nvidia.com/gpu: \"8\"\n  allocatable:\n    nvidia.com/gpu: \"8\"\n", ""},
		{"node with unknown status field", "apiVersion: v1\nkind: Node\nmetadata:\n  name: h100-000\nstatus:\n  capacityy: {}\n", "capacityy"},
		{"namespace with status", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\nstatus: {}\n", "must not be set"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := v.ValidateYAML(strings.NewReader(tc.in), "n.yaml")
			if tc.wantErr == "" {
				if len(errs) != 0 {
					t.Fatalf("errors: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(fmt.Sprint(errs), tc.wantErr) {
				t.Fatalf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}
