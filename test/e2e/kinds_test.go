package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kueuelab/kueuelab/model/gen"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/runner"
)

// kindMappings covers every kind × family pair of the registry with as few mappings as there
// are kinds for the family that has the most: mapping i gives family f its (i mod n)-th kind.
func kindMappings(reg *render.Registry) []render.Mapping {
	fk := reg.FamilyKinds()
	n := 0
	for _, kinds := range fk {
		n = max(n, len(kinds))
	}
	out := make([]render.Mapping, n)
	for i := range out {
		out[i] = render.Mapping{}
		for _, f := range trace.Families {
			out[i][f] = fk[f][i%len(fk[f])]
		}
	}
	return out
}

// kindsTrace is a small trace of every family, n workloads each, that fits in 4 GPUs and runs
// 60 to 300 trace seconds, submitted 20 trace seconds apart (seeded).
func kindsTrace(t *testing.T, n int) *trace.Trace {
	t.Helper()
	prof, err := gen.DefaultProfile()
	if err != nil {
		t.Fatal(err)
	}
	g := gen.New(prof, 5)
	got := map[trace.Family]int{}
	tr := &trace.Trace{}
	for i := 0; len(tr.Workloads) < n*len(trace.Families); i++ {
		if i > 100000 {
			t.Fatalf("the generator gave only %v in 100000 workloads", got)
		}
		next, _ := g.Next()
		if got[next.WorkloadType] == n || next.TotalGPUs() > 4 {
			continue
		}
		w := cloneWorkload(next)
		got[w.WorkloadType]++
		w.DurationSec = 60 + float64(len(tr.Workloads)*37%241)
		w.SubmitTimeOffsetSec = 20 * float64(len(tr.Workloads))
		w.CheckpointIntervalSec = 0
		tr.Workloads = append(tr.Workloads, w)
	}
	return tr
}

// kindsFamily is the GPU family of TestEveryKindRunsItsFamilies' nodes: no other test that runs
// in parallel with it has nodes of this family (the default nodes and builders' flavor are H100-SXM,
// TestUpstreamSamplesRun's A100-SXM), so its pods go to its own nodes only.
const kindsFamily = "H100-NVL"

// TestEveryKindRunsItsFamilies replays, for each mapping of kindMappings, a small trace of every
// family on its own namespace and nodes, with the operators of every kind running: every
// workload must be submitted (no create rejected), admitted and succeed, whatever kind renders it.
// The mappings run one after the other: their specs' pools are of one family (and the CPU flavor
// is the same for every spec), so concurrent replays would place pods on each other's nodes,
// where only the other replay's agent drives them (a CI run saw a trial wait 4 min on one).
func TestEveryKindRunsItsFamilies(t *testing.T) {
	t.Parallel()
	reg := render.DefaultRegistry()
	tr := kindsTrace(t, 1)
	for i, m := range kindMappings(reg) {
		var kinds []string
		for _, f := range trace.Families {
			kinds = append(kinds, string(f)+"="+m[f])
		}
		t.Run(strings.Join(slices.Compact(slices.Sorted(slices.Values(mappingKinds(m)))), "+"), func(t *testing.T) {
			t.Logf("mapping %s", strings.Join(kinds, " "))
			team := fmt.Sprintf("e2e-kinds-%d", i)
			_, d := replayMapping(t, tr, team, m)
			checkAllSucceeded(t, tr, d)
		})
	}
}

func mappingKinds(m render.Mapping) []string {
	var out []string
	for _, k := range m {
		out = append(out, k)
	}
	return out
}

// replayMapping runs tr under mapping m on a familySpec cluster of its own namespace, with an
// in-process agent scoped to that namespace, so replays of parallel tests do not touch each
// other's pods.
func replayMapping(t *testing.T, tr *trace.Trace, team string, m render.Mapping) (*runner.Result, *results.Dir) {
	t.Helper()
	specPath := filepath.Join(t.TempDir(), team+".yaml")
	if err := os.WriteFile(specPath, []byte(familySpec(team, kindsFamily, 8)), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := rcluster.Load(specPath)
	if err != nil {
		t.Fatal(err)
	}
	// The run's agent simulates the pods of the spec's team namespace only: parallel replays on
	// the shared cluster never drive each other's pods.
	res, out, err := runInProcess(t, tr, team, spec, 4*time.Minute, func(c *runner.Config) { c.Mapping, c.Progress = m, nil })
	d, lerr := results.Load(out)
	if lerr == nil {
		// A rejected create leaves its workload unfinished; name it rather than only the count.
		for _, e := range d.Events {
			if e.Type == results.EvSubmitFailed {
				t.Errorf("workload %s: submission rejected: %s", e.Workload, e.Message)
			}
		}
	}
	if err != nil {
		if errors.Is(err, replay.ErrIncomplete) {
			t.Fatalf("replay %s: %v", team, err)
		}
		t.Fatal(err)
	}
	if lerr != nil {
		t.Fatalf("results do not parse: %v", lerr)
	}
	t.Logf("%s: %d workloads, %.0f trace s in %.1fs wall, setup %.1fs", team, res.Submitted, res.Summary.TraceSec, res.Summary.WallSec, res.SetupSec)
	return res, d
}

// checkAllSucceeded checks that every workload of tr was admitted and succeeded.
func checkAllSucceeded(t *testing.T, tr *trace.Trace, d *results.Dir) {
	t.Helper()
	if len(d.Workloads) != len(tr.Workloads) {
		t.Fatalf("workloads.csv has %d workloads, the trace %d", len(d.Workloads), len(tr.Workloads))
	}
	for _, r := range d.Workloads {
		if r.State != results.StateSucceeded || r.Admitted == nil || r.FirstPodRunning == nil {
			t.Errorf("workload %s (%s): state %q, admitted %v, first pod running %v", r.ID, r.Family, r.State, r.Admitted, r.FirstPodRunning)
		}
	}
}

// kindStatus reads an object's status through its kind's integration.
func kindStatus(t *testing.T, o client.Object) render.Status {
	t.Helper()
	gvk, err := apiutil.GVKForObject(o, shared.scheme)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range render.DefaultRegistry().Integrations() {
		if in.GVK == gvk {
			s, err := in.Status(o)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	t.Fatalf("no integration for %v", gvk)
	return render.Status{}
}

// cloneWorkload copies a generated workload: the generator reuses its record for the next one.
func cloneWorkload(w *trace.Workload) *trace.Workload {
	c := *w
	c.Pods = make([]trace.PodGroup, len(w.Pods))
	for i, g := range w.Pods {
		g.Requests = maps.Clone(g.Requests)
		c.Pods[i] = g
	}
	return &c
}

// operatorOf names the cluster component that runs kind: its first operator in the registry.
func operatorOf(kind string) string {
	in, ok := render.DefaultRegistry().Integration(kind)
	if !ok || len(in.Operators) == 0 {
		panic(fmt.Sprintf("no operator runs kind %q in the registry", kind))
	}
	return in.Operators[0].Name
}
