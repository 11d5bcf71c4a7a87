package render

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/render/validate"
)

// TestJoulieFixturesRender renders every workload of the real Joulie traces (testdata/joulie) with
// every kind that supports its family, validates every object against the upstream CRDs, and
// checks the pods Kueue would see: each pod group's own requests where the kind has a template per
// group (JobSet), the role's envelope where it has one per role (the others, see build.roles).
func TestJoulieFixturesRender(t *testing.T) {
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := DefaultRegistry()
	files, _ := filepath.Glob("../testdata/joulie/*.jsonl")
	if len(files) < 4 {
		t.Fatalf("fixtures %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			tr, err := trace.LoadWorkloads(t.Context(), f, trace.Options{})
			if err != nil {
				t.Fatal(err)
			}
			rendered := map[string]int{}
			for i, w := range tr.Workloads {
				p, _ := testPlacer{}.Place(w)
				for _, kind := range reg.Names() {
					if !reg.Supports(kind, w.WorkloadType) {
						continue
					}
					k, _ := reg.Kind(kind)
					objs, err := k.Render(w, tr.Jobs[w.WorkloadID], p, Options{})
					if err != nil {
						t.Fatalf("%s as %s: %v", w.WorkloadID, kind, err)
					}
					rendered[kind]++
					// Schema validation is the slow part: every workload with the default kind, a
					// sample of the others.
					if kind == DefaultMapping()[w.WorkloadType] || i%5 == 0 {
						for _, o := range objs {
							if err := v.Validate(o); err != nil {
								t.Fatalf("%s as %s: %v", w.WorkloadID, kind, err)
							}
						}
					}
					if err := checkGroups(t, w, kind, objs); err != nil {
						t.Fatalf("%s as %s: %v", w.WorkloadID, kind, err)
					}
				}
			}
			t.Logf("%d workloads rendered as %v", len(tr.Workloads), rendered)
		})
	}
}

// shapeKey is one pod shape: a role and its requests (canonical).
type shapeKey struct{ role, requests string }

func canonical(rl corev1.ResourceList) string {
	var parts []string
	for name, q := range rl {
		parts = append(parts, fmt.Sprintf("%s=%d", name, q.MilliValue()))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// checkGroups compares the pods of the rendered objects with the trace's pod groups, per role and
// requests: JobSet keeps each group's requests, the other kinds give a role its envelope.
func checkGroups(t *testing.T, w *trace.Workload, kind string, objs []client.Object) error {
	env := map[string]trace.Requests{}
	for _, g := range w.Pods {
		env[g.Role] = envelope(env[g.Role], g.Requests)
	}
	want := map[shapeKey]int{}
	for _, g := range w.Pods {
		if dropped[kind] == g.Role {
			continue
		}
		req := g.Requests
		if kind != "JobSet" {
			req = env[g.Role]
		}
		rr, _, err := resources(req, "")
		if err != nil {
			return err
		}
		want[shapeKey{g.Role, canonical(rr.Requests)}] += g.Replicas
	}
	got := map[shapeKey]int{}
	for _, o := range objs {
		for _, s := range podSets(t, o) {
			c, err := contract.Parse(s.meta)
			if err != nil {
				return err
			}
			got[shapeKey{c.Role, canonical(s.requests)}] += s.count
		}
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("pods by role and requests %v, want %v", got, want)
	}
	return nil
}

// TestRepeatedGroupsByKind pins what each kind makes of an HPO workload whose trials ask for
// different requests, and of a distributed run written as workers only.
func TestRepeatedGroupsByKind(t *testing.T) {
	hpo := makeWorkload("hpo-1", trace.HPOExperiment).
		pods(trace.RoleController, 1, "1", "1Gi", 0).
		pods(trace.RoleTrial, 1, "2", "8Gi", 1).
		pods(trace.RoleTrial, 1, "4", "6Gi", 1).
		pods(trace.RoleTrial, 1, "2", "8Gi", 1).obj()
	jobs := jobsOf(hpo)
	jobs[2].Work.GPUUnits = 999 // the 4-CPU trial did other work: its group keeps it
	p, _ := testPlacer{}.Place(hpo)
	objs, err := JobSet{}.Render(hpo, jobs, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	js := objs[0].(*jobsetv1alpha2.JobSet)
	var names []string
	for _, rj := range js.Spec.ReplicatedJobs {
		names = append(names, fmt.Sprintf("%s×%d", rj.Name, rj.Replicas))
	}
	if got := strings.Join(names, " "); got != "controller×1 trial-1×2 trial-2×1" {
		t.Fatalf("replicatedJobs %s", got)
	}
	c, err := contract.Parse(js.Spec.ReplicatedJobs[2].Template.Spec.Template.Annotations)
	if err != nil || c.Work.GPUUnits != 999 {
		t.Fatalf("trial-2 contract %+v %v", c, err)
	}
	// Katib's one trialTemplate: the envelope (4 CPUs, 8Gi) for all three trials.
	objs, err = Experiment{}.Render(hpo, jobs, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sets := podSets(t, objs[0])
	if len(sets) != 1 || sets[0].count != 3 || canonical(sets[0].requests) != "cpu=4000,memory=8589934592000,nvidia.com/gpu=1000" {
		t.Fatalf("experiment pod sets %+v", sets)
	}

	for _, tc := range []struct {
		workers          int
		launcher, worker int32
	}{{1, 1, 0}, {3, 1, 2}} {
		d := makeWorkload("dist-1", trace.DistributedTraining).gang().pods(trace.RoleWorker, tc.workers, "16", "64Gi", 2).obj()
		objs, err := MPIJob{}.Render(d, nil, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		mj := objs[0].(*mpiv2beta1.MPIJob)
		specs := mj.Spec.MPIReplicaSpecs
		var w int32
		if s := specs[mpiv2beta1.MPIReplicaTypeWorker]; s != nil {
			w = *s.Replicas
		}
		if !ptr.Deref(mj.Spec.RunLauncherAsWorker, false) || *specs[mpiv2beta1.MPIReplicaTypeLauncher].Replicas != tc.launcher || w != tc.worker {
			t.Fatalf("%d workers: %+v", tc.workers, mj.Spec)
		}
		q := specs[mpiv2beta1.MPIReplicaTypeLauncher].Template.Spec.Containers[0].Resources.Requests[trace.ResourceGPU]
		if q.Cmp(resource.MustParse("2")) != 0 {
			t.Fatalf("launcher GPUs %v", q.String())
		}
	}
}

// labelPlacer is testPlacer on a cluster whose nodes carry the given label keys.
type labelPlacer struct{ keys map[string]bool }

func (l labelPlacer) Place(w *trace.Workload) (Placement, error) {
	p, err := testPlacer{}.Place(w)
	p.NodeLabelKeys = l.keys
	return p, err
}

// TestAffinityHints renders Joulie's node-affinity hints (joulie.io/power-profile NotIn [eco] on
// performance jobs): dropped and said once when no node carries the label, kept when nodes do.
func TestAffinityHints(t *testing.T) {
	tr, err := trace.LoadWorkloads(t.Context(), "../testdata/joulie/default-60.jsonl", trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		keys      map[string]bool
		warnings  int
		withHints bool
	}{
		{"unknown label", map[string]bool{"kueuelab.io/pool": true}, 1, false},
		{"label on the nodes", map[string]bool{"joulie.io/power-profile": true}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []string
			r, err := NewRenderer(DefaultRegistry(), DefaultMapping(), Options{Warn: func(m string) { warnings = append(warnings, m) }})
			if err != nil {
				t.Fatal(err)
			}
			hinted := 0
			err = r.RenderAll(t.Context(), tr.Workloads, tr.Jobs, labelPlacer{tc.keys}, nil, YAML, 2, func(res Result) error {
				if res.Err != nil {
					return res.Err
				}
				if strings.Contains(string(res.Manifest), "joulie.io/power-profile") {
					hinted++
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != tc.warnings || (tc.warnings > 0 && !strings.Contains(warnings[0], `"joulie.io/power-profile"`)) {
				t.Fatalf("warnings %q", warnings)
			}
			if (hinted > 0) != tc.withHints {
				t.Fatalf("%d workloads rendered with the hint", hinted)
			}
		})
	}
}
