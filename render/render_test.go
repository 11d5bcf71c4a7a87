package render

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/kueuelab/kueuelab/model/trace"
)

var update = flag.Bool("update", false, "rewrite golden files")

// supported lists every family × kind the registry can render.
func supported(t testing.TB, reg *Registry) [][2]string {
	var out [][2]string
	want := 0
	for _, in := range reg.Integrations() {
		want += len(in.Families())
	}
	for _, f := range trace.Families {
		for _, k := range reg.FamilyKinds()[f] {
			out = append(out, [2]string{string(f), k})
		}
	}
	if len(out) != want || want == 0 {
		t.Fatalf("supported family × kind pairs = %d, the integrations declare %d", len(out), want)
	}
	return out
}

func TestGolden(t *testing.T) {
	reg := DefaultRegistry()
	type variant struct {
		suffix string
		opts   Options
		jobs   bool
	}
	variants := []variant{{"", Options{}, true}}
	for _, fk := range supported(t, reg) {
		f, kind := trace.Family(fk[0]), fk[1]
		vs := variants
		if kind == "MPIJob" || kind == "Experiment" || kind == "TrainJob" || kind == "RayJob" {
			vs = append(vs, variant{"__real", Options{Target: TargetReal, Speedup: 60}, false})
		}
		for _, v := range vs {
			name := string(f) + "__" + kind + v.suffix
			t.Run(name, func(t *testing.T) {
				w := shapeOf("workload-000042", f, 4)
				var jobs []*trace.Job
				if v.jobs {
					jobs = jobsOf(w)
				}
				k, _ := reg.Kind(kind)
				p, _ := testPlacer{topology: "cloud.provider.com/topology-block"}.Place(w)
				objs, err := k.Render(w, jobs, p, v.opts)
				if err != nil {
					t.Fatal(err)
				}
				var got []byte
				for i, o := range objs {
					b, err := Marshal(o, YAML)
					if err != nil {
						t.Fatal(err)
					}
					if i > 0 {
						got = append(got, "---\n"...)
					}
					got = append(got, b...)
				}
				compareGolden(t, filepath.Join("testdata", "golden", name+".yaml"), got)
			})
		}
	}
}

func TestTrainingRuntimesGolden(t *testing.T) {
	for _, target := range []Target{TargetKWOK, TargetReal} {
		var got []byte
		for _, o := range TrainingRuntimes(Options{Target: target}) {
			b, err := Marshal(o, YAML)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
		}
		compareGolden(t, filepath.Join("testdata", "golden", "training-runtimes__"+string(target)+".yaml"), got)
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the rendered output (go test -update rewrites it):\n%s", path, got)
	}
}
