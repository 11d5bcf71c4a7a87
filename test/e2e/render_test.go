package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/cluster"
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
		next, js := g.Next()
		// The generator reuses its records for the next workload.
		w, js := cloneWorkload(next), slices.Clone(js)
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

	spec, err := rcluster.Load(filepath.Join(repoRoot(t), "examples", "clusters", "teams.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	clusterObjs, err := spec.Objects(rcluster.Options{})
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
	// The default mapping, and mappings that between them render every family with every kind.
	mappings := map[string]render.Mapping{"default": render.DefaultMapping()}
	for _, m := range kindMappings(reg) {
		mappings[strings.Join(slices.Compact(slices.Sorted(slices.Values(mappingKinds(m)))), "+")] = m
	}
	placer := spec.Placer(7, false)
	for name, m := range mappings {
		t.Run(name, func(t *testing.T) {
			r, err := render.NewRenderer(reg, m, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// What the kinds refer to must exist for their admission webhooks (Kueue's TrainJob
			// webhook reads the runtime); cluster-scoped and shared by these subtests.
			var objs []client.Object
			for _, o := range reg.ClusterObjects(m, r.Options()) {
				if err := cluster.ApplyObjects(t.Context(), restConfig(t), []client.Object{o}); err != nil {
					t.Fatalf("apply %s: %v", o.GetName(), err)
				}
			}
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

func restConfig(t *testing.T) *rest.Config {
	t.Helper()
	rc, err := cluster.RESTConfig(shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}
