package fielderr

import (
	"errors"
	"fmt"
	"testing"
)

func TestError(t *testing.T) {
	tests := []struct {
		e    *Error
		want string
	}{
		{New("t.jsonl", 3, "pods[1].replicas", "must be >= 1, got %d", 0), "t.jsonl:3: pods[1].replicas: must be >= 1, got 0"},
		{New("t.jsonl", 3, "", "invalid JSON"), "t.jsonl:3: invalid JSON"},
		{New("spec.yaml", 0, "teams", "needs a team"), "spec.yaml: teams: needs a team"},
		{&Error{File: "x"}, "x: invalid"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestListAndAll(t *testing.T) {
	a, b := New("f", 9, "b", "x"), New("f", 2, "a", "y")
	l := List{a, b}
	l.Sort()
	if l[0] != b || l.Error() != "f:2: a: y\nf:9: b: x" {
		t.Fatalf("sorted list %q", l.Error())
	}
	if (List{}).Err() != nil || l.Err() == nil {
		t.Fatal("Err")
	}
	wrapped := fmt.Errorf("load: %w", errors.Join(l, errors.New("other"), fmt.Errorf("w: %w", a)))
	if got := All(wrapped); len(got) != 3 || got[0] != b || got[1] != a || got[2] != a {
		t.Fatalf("All = %v", got)
	}
	if e, ok := As(wrapped); !ok || e != b {
		t.Fatalf("As = %v", e)
	}
}

func TestPaths(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/durationSec", "durationSec"},
		{"/pods/1/replicas", "pods[1].replicas"},
		{"/pods/0/requests/nvidia.com~1gpu", "pods[0].requests.nvidia.com/gpu"},
		{"/tags/a~0b/3", "tags.a~b[3]"},
	} {
		if got := FromPointer(tc.in); got != tc.want {
			t.Errorf("FromPointer(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if Join("pods", "[1]") != "pods[1]" || Join("pods[1]", "role") != "pods[1].role" || Join("", "x") != "x" || Join("x", "") != "x" || Index("p", 2) != "p[2]" {
		t.Fatal("Join/Index")
	}
}
