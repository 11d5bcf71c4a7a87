package scenario

import (
	"context"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
)

// TestLibrary loads every scenario of examples/scenarios and checks what can be checked without a
// cluster: every variant's cluster spec builds, the trace loads and names the workloads the checks
// and faults name, and the faults fit the cluster's nodes.
func TestLibrary(t *testing.T) {
	entries, err := List(filepath.Join("..", "..", "examples", "scenarios"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 8 {
		t.Fatalf("%d scenarios, want one per challenge (8)", len(entries))
	}
	cat, err := hw.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		t.Run(en.Name, func(t *testing.T) {
			if en.Err != nil {
				t.Fatal(en.Err)
			}
			s, err := Load(en.Dir)
			if err != nil {
				t.Fatal(err)
			}
			e := s.Experiment
			ids := map[string]bool{}
			if e.Trace != "" {
				tr, err := trace.LoadWorkloads(context.Background(), filepath.Join(en.Dir, e.Trace), trace.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range tr.Workloads {
					ids[w.WorkloadID] = true
				}
			}
			for i := range e.Variants {
				v := &e.Variants[i]
				spec, _, err := e.Spec(v)
				if err != nil {
					t.Fatal(err)
				}
				objs, err := spec.Objects(cluster.Options{})
				if err != nil {
					t.Fatal(err)
				}
				var nodes []fault.Node
				for _, o := range objs {
					if n, ok := o.(*corev1.Node); ok {
						q := n.Status.Capacity["nvidia.com/gpu"]
						nodes = append(nodes, fault.Node{Name: n.Name, Pool: n.Labels[contract.Pool], GPUs: int(q.Value())})
					}
				}
				if f := e.FaultsOf(v); !f.Empty() {
					if _, err := fault.NewSchedule(f, nodes, cat.Faults); err != nil {
						t.Errorf("variant %s: %v", v.Name, err)
					}
					for _, ev := range f.Events {
						if ev.Workload != "" && !ids[ev.Workload] {
							t.Errorf("variant %s: a fault names workload %s, not in the trace", v.Name, ev.Workload)
						}
					}
				}
			}
			for _, c := range s.Checks {
				for _, w := range []string{c.Workload, otherWorkload(c)} {
					if w != "" && e.Trace != "" && !ids[w] {
						t.Errorf("check %q names workload %s, not in the trace", c.Name, w)
					}
				}
			}
		})
	}
}

func otherWorkload(c Check) string {
	if c.Than == nil {
		return ""
	}
	return c.other().Workload
}
