package render

import (
	"bytes"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/model/trace"
)

func TestStripStatus(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"kind":"A","status":{"x":[1,{"status":2}]}}`, `{"kind":"A"}`},
		{`{"status":{},"kind":"A"}`, `{"kind":"A"}`},
		{`{"status":"}{\"","kind":"A"}`, `{"kind":"A"}`},
		{`{"spec":{"status":1},"metadata":{"annotations":{"a":"\",\"status\":1"}}}`, `{"spec":{"status":1},"metadata":{"annotations":{"a":"\",\"status\":1"}}}`},
		{`{"a":1,"status":{"restarts":0}}`, `{"a":1}`},
		{`{"status":null}`, `{}`},
	} {
		got, err := stripStatus([]byte(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("stripStatus(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

// TestEncoderStreams checks the stream framing and that YAML and JSON say the same thing.
func TestEncoderStreams(t *testing.T) {
	reg := DefaultRegistry()
	r, err := NewRenderer(reg, DefaultMapping(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ybuf, jbuf bytes.Buffer
	ye, _ := NewEncoder(&ybuf, YAML)
	je, _ := NewEncoder(&jbuf, JSON)
	for i, w := range []string{"workload-1", "workload-2", "workload-3"} {
		wk := shapeOf(w, []trace.Family{trace.DistributedTraining, trace.HPOExperiment, trace.ParameterServerTraining}[i], 2)
		objs, err := r.Render(wk, nil, Placement{Queue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if err := ye.Encode(o); err != nil {
				t.Fatal(err)
			}
			if err := je.Encode(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ye.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := je.Flush(); err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(ybuf.String(), "---\n")
	lines := strings.Split(strings.TrimSuffix(jbuf.String(), "\n"), "\n")
	if len(docs) != 3 || len(lines) != 3 {
		t.Fatalf("%d YAML documents and %d JSON lines, want 3 each", len(docs), len(lines))
	}
	for i := range docs {
		if strings.Contains(docs[i], "status:") || strings.Contains(docs[i], "creationTimestamp") {
			t.Errorf("document %d has a status or creationTimestamp:\n%s", i, docs[i])
		}
		y, err := yaml.JSONToYAML([]byte(lines[i]))
		if err != nil || string(y) != docs[i] {
			t.Errorf("document %d: YAML and JSON differ (%v)", i, err)
		}
	}
	if _, err := NewEncoder(&ybuf, "xml"); err == nil {
		t.Error("xml accepted")
	}
}
