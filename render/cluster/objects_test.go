package cluster

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta1"

	"github.com/kueuelab/kueuelab/render/validate"
)

var update = flag.Bool("update", false, "rewrite golden files")

var examples = []string{"small", "teams", "mixed"}

func loadExample(t *testing.T, name string) *Spec {
	t.Helper()
	s, err := Load(filepath.Join("..", "..", "examples", "clusters", name+".yaml"))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return s
}

// manifest renders objects as multi-document YAML the way they are applied: no status blocks
// (except a Node's capacity and allocatable, which KWOK keeps) and no null creationTimestamp.
func manifest(t *testing.T, objs []client.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, node := o.(*corev1.Node); node {
			st := m["status"].(map[string]any)
			m["status"] = map[string]any{"capacity": st["capacity"], "allocatable": st["allocatable"]}
		} else {
			delete(m, "status")
		}
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes()
}

func TestObjectsGolden(t *testing.T) {
	for _, name := range examples {
		for _, api := range []string{KueueV1beta1, KueueV1beta2} {
			t.Run(name+"/"+api, func(t *testing.T) {
				objs, err := loadExample(t, name).Objects(Options{KueueAPI: api})
				if err != nil {
					t.Fatal(err)
				}
				got := manifest(t, objs)
				golden := filepath.Join("testdata", name+"."+api+".golden.yaml")
				if *update {
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("objects differ from %s (run with -update and review the diff)", golden)
				}
			})
		}
	}
}

func TestObjectsValidate(t *testing.T) {
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range examples {
		for _, api := range []string{KueueV1beta1, KueueV1beta2} {
			objs, err := loadExample(t, name).Objects(Options{KueueAPI: api})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := v.Validate(o); err != nil {
					t.Errorf("%s/%s: %s %s: %v", name, api, o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
				}
			}
		}
	}
}

// TestValidatorCatchesBadQueue guards TestObjectsValidate against a validator that accepts
// anything: a rendered ClusterQueue broken after the fact must be rejected (a CEL rule).
func TestValidatorCatchesBadQueue(t *testing.T) {
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := loadExample(t, "teams").Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if cq, ok := o.(*kueue.ClusterQueue); ok {
			cq.Spec.Preemption.ReclaimWithinCohort = kueue.PreemptionPolicyNever
			if err := v.Validate(cq); err == nil {
				t.Fatal("validator accepted reclaimWithinCohort=Never with borrowWithinCohort=LowerPriority")
			}
			return
		}
	}
	t.Fatal("no ClusterQueue rendered")
}

func TestObjectsShape(t *testing.T) {
	objs, err := loadExample(t, "teams").Objects(Options{})
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]int{"Namespace": 0, "WorkloadPriorityClass": 1, "ResourceFlavor": 2, "Topology": 3, "Cohort": 4, "ClusterQueue": 5, "LocalQueue": 6, "Node": 7}
	last, gpus, nodes := -1, int64(0), 0
	for _, o := range objs {
		k := o.GetObjectKind().GroupVersionKind().Kind
		if order[k] < last {
			t.Errorf("%s %s out of apply order", k, o.GetName())
		}
		last = order[k]
		if n, ok := o.(*corev1.Node); ok {
			nodes++
			q := n.Status.Allocatable["nvidia.com/gpu"]
			gpus += q.Value()
			if n.Annotations["kwok.x-k8s.io/node"] != "fake" || n.Spec.Taints[0].Key != "kwok.x-k8s.io/node" {
				t.Errorf("node %s lacks KWOK annotation or taint", n.Name)
			}
		}
	}
	if nodes != 16 || gpus != 96 {
		t.Errorf("teams.yaml: %d nodes, %d GPUs; want 16 and 96", nodes, gpus)
	}
	objs, err = loadExample(t, "teams").Objects(Options{OmitNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if _, ok := o.(*corev1.Node); ok {
			t.Fatal("OmitNodes rendered a Node")
		}
	}
}
