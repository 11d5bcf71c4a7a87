package yamldoc

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/kueuelab/kueuelab/model/fielderr"
)

func TestRoot(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
		wantKind          yaml.Kind
	}{
		{"mapping", "a: 1\nb: 2\n", "", yaml.MappingNode},
		{"empty", "", "f.yaml: empty spec", 0},
		{"two documents", "a: 1\n---\nb: 2\n", "f.yaml:2: a spec is a single YAML document", 0},
		{"syntax error", "a: [1\n", "f.yaml:1: did not find expected", 0},
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

func TestPathString(t *testing.T) {
	tests := []struct {
		p    Path
		want string
	}{
		{nil, ""},
		{Path{"nodePools", 1, "gpusPerNode"}, "nodePools[1].gpusPerNode"},
		{Path{"resources", "nvidia.com/gpu"}, `resources["nvidia.com/gpu"]`},
	}
	for _, tc := range tests {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestLineFollowsAliases(t *testing.T) {
	in := "base: &b\n  x: 1\n  y:\n    z: 2\nuse: *b\nlist:\n- a\n- b\n"
	root, err := Root("f.yaml", "spec", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		p    Path
		want int
	}{
		{Path{"base", "y", "z"}, 4},
		{Path{"use", "y", "z"}, 4}, // through the alias, to the anchored node
		{Path{"list", 1}, 8},
		{Path{"list", 5}, 7}, // past the end: the deepest node reached, the list
		{Path{"missing", "deeper"}, 1},
	}
	for _, tc := range tests {
		if got := Line(root, tc.p); got != tc.want {
			t.Errorf("Line(%v) = %d, want %d", tc.p, got, tc.want)
		}
	}
	if got := Line(nil, Path{"a"}); got != 0 {
		t.Errorf("Line(nil) = %d, want 0", got)
	}
}

func TestUnknownFields(t *testing.T) {
	type inner struct {
		A int `yaml:"a"`
	}
	type spec struct {
		Items []inner          `yaml:"items"`
		ByKey map[string]inner `yaml:"byKey"`
		Ptr   *inner           `yaml:"ptr"`
	}
	in := "items:\n- a: 1\n  b: 2\nbyKey:\n  k: {c: 3}\nptr: {a: 1}\nextra: 4\n"
	root, err := Root("f.yaml", "spec", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	UnknownFields(root, reflect.TypeOf(spec{}), func(key *yaml.Node, p Path, known []string) {
		got = append(got, fmt.Sprintf("%d %s %v", key.Line, p, known))
	})
	want := []string{"3 items[0].b [a]", "5 byKey.k.c [a]", "7 extra [byKey items ptr]"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reports %q, want %q", got, want)
	}
}

func TestErrorsAreFieldErrors(t *testing.T) {
	root, err := Root("f.yaml", "spec", []byte("a: 1\nb: x\nc: y\n"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		A int `yaml:"a"`
		B int `yaml:"b"`
		C int `yaml:"c"`
	}
	err = Errors("f.yaml", root.Decode(&v))
	all := fielderr.All(err)
	if len(all) != 2 || all[0].Line != 2 || all[1].Line != 3 || !strings.HasPrefix(err.Error(), "f.yaml:2: cannot unmarshal") {
		t.Fatalf("%v (%d errors)", err, len(all))
	}
}

func TestStrict(t *testing.T) {
	type inner struct {
		B int `yaml:"b"`
	}
	type doc struct {
		A string `yaml:"a"`
		I inner  `yaml:"i"`
	}
	for _, tc := range []struct {
		name, data, want string
	}{
		{"not a mapping", "- 1\n", "f.yaml:1: a test file is a mapping (a, i)"},
		{"unknown nested field", "a: x\ni:\n  c: 1\n", "f.yaml:3: i.c: unknown field (known fields: b)"},
		{"wrong type", "a: x\ni:\n  b: many\n", "f.yaml:3: "},
		{"fine", "a: x\ni:\n  b: 2\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			root, err := Strict("f.yaml", "test file", "a, i", []byte(tc.data), &d)
			switch {
			case tc.want == "" && (err != nil || root == nil || d.I.B != 2):
				t.Errorf("error %v, decoded %+v", err, d)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestErrorsInNameTheField: a type error names the field whose value it is about, in block and
// flow style, for a scalar cut short in the message and for a mapping where a number goes; a line
// with two values the message could be about names none.
func TestErrorsInNameTheField(t *testing.T) {
	doc := "a:\n- {x: 1, y: 2}\n- {x: abc, y: 3}\n- x: 4\n  y: {k: v}\n- x: abcdefghijklmnop\n- {x: same, z: same}\n"
	root, err := Root("f.yaml", "spec", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		A []struct {
			X float64 `yaml:"x"`
			Y int     `yaml:"y"`
			Z int     `yaml:"z"`
		} `yaml:"a"`
	}
	all := fielderr.All(ErrorsIn("f.yaml", root, root.Decode(&v)))
	want := []struct {
		line  int
		field string
	}{{3, "a[1].x"}, {5, "a[2].y"}, {6, "a[3].x"}, {7, ""}, {7, ""}}
	if len(all) != len(want) {
		t.Fatalf("%d errors %v, want %d", len(all), all, len(want))
	}
	for i, w := range want {
		if all[i].Line != w.line || all[i].Field != w.field {
			t.Errorf("error %d: line %d field %q (%v), want line %d field %q", i, all[i].Line, all[i].Field, all[i], w.line, w.field)
		}
	}
}
