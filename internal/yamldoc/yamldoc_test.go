package yamldoc

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestRoot(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		wantKind          yaml.Kind
	}{
		{"mapping", "a: 1\nb: 2\n", "", yaml.MappingNode},
		{"empty", "", "f.yaml: empty spec", 0},
		{"two documents", "a: 1\n---\nb: 2\n", "f.yaml:2: a spec is a single YAML document", 0},
		{"syntax error", "a: [1\n", "f.yaml: yaml:", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Root("f.yaml", "spec", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n.Kind != tc.wantKind || n.Line != 1 {
				t.Fatalf("root kind %v line %d, want kind %v line 1", n.Kind, n.Line, tc.wantKind)
			}
		})
	}
}
