package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/cluster"
)

// TestRenderDryRun: everything `kueuelab render` emits for a generated trace of a few hundred
// workloads, under the default mapping and every alternative kind, is accepted by a server-side
// dry-run on the local cluster: the real CRD schemas and Kueue's, JobSet's and training-operator's
// admission webhooks all run, nothing is stored.
func TestRenderDryRun(t *testing.T) {
	prof, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(prof, 11)
	var ws []*trace.Workload
	jobs := map[string][]*trace.Job{}
	families := map[trace.Family]int{}
	for range 300 {
		w, js := g.Next()
		ws = append(ws, w)
		for i := range js {
			jobs[w.WorkloadID] = append(jobs[w.WorkloadID], &js[i])
		}
		families[w.WorkloadType]++
	}
	for _, f := range trace.Families {
		if families[f] == 0 {
			t.Fatalf("the generated trace has no %s workload; pick another seed", f)
		}
	}

	spec, err := cluster.Load(filepath.Join(repoRoot(t), "examples", "clusters", "teams.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clusterObjs, err := spec.Objects(cluster.Options{KueueAPI: "v1beta1"})
	if err != nil {
		t.Fatal(err)
	}
	// Namespaced objects can be dry-run only in namespaces that exist; namespaces are harmless
	// to create for real. Everything else of the cluster side is dry-run too.
	var rest []client.Object
	for _, o := range clusterObjs {
		if ns, ok := o.(*corev1.Namespace); ok {
			n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
			if err := shared.client.Create(t.Context(), n); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create namespace %s: %v", ns.Name, err)
			}
			continue
		}
		rest = append(rest, o)
	}
	if err := DryRun(t.Context(), shared.client, shared.scheme, rest); err != nil {
		t.Fatalf("cluster objects rejected:\n%v", err)
	}

	reg := render.DefaultRegistry()
	mappings := map[string]render.Mapping{"default": render.DefaultMapping()}
	alt := func(name string, f trace.Family, kind string) {
		m := render.DefaultMapping()
		m[f] = kind
		mappings[name] = m
	}
	alt("distributed-pytorchjob", trace.DistributedTraining, "PyTorchJob")
	alt("distributed-jobset", trace.DistributedTraining, "JobSet")
	alt("distributed-trainjob", trace.DistributedTraining, "TrainJob")
	alt("ps-tfjob", trace.ParameterServerTraining, "TFJob")
	alt("hpo-jobset", trace.HPOExperiment, "JobSet")
	m := render.DefaultMapping()
	for _, f := range []trace.Family{trace.SingleGPUTraining, trace.DebugEval, trace.CPUPreprocess, trace.CPUAnalytics} {
		m[f] = "JobSet"
	}
	mappings["single-pod-jobset"] = m

	placer := spec.Placer(7, false)
	for name, m := range mappings {
		t.Run(name, func(t *testing.T) {
			r, err := render.NewRenderer(reg, m, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			objs := render.TrainingRuntimes(r.Options())
			for _, w := range ws {
				p, err := placer.Place(w)
				if err != nil {
					t.Fatalf("place %s: %v", w.WorkloadID, err)
				}
				o, err := r.Render(w, jobs[w.WorkloadID], p)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, o...)
			}
			if err := DryRun(t.Context(), shared.client, shared.scheme, objs); err != nil {
				var n int
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					n = len(j.Unwrap())
				}
				t.Fatalf("%d of %d objects rejected, e.g.:\n%v", n, len(objs), first(err, 5))
			}
			t.Logf("%d objects of %d workloads accepted", len(objs), len(ws))
		})
	}
}

// first returns at most n of the errors joined in err.
func first(err error, n int) error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	errs := j.Unwrap()
	if len(errs) > n {
		errs = append(errs[:n:n], fmt.Errorf("... and %d more", len(errs)-n))
	}
	return errors.Join(errs...)
}

// repoRoot is the module root, two levels above this file.
func repoRoot(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
