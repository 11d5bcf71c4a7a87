package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/experiment"
	"github.com/kueuelab/kueuelab/runtime/report"
)

// quotaSweep is a 3-variant experiment on a small generated trace: team A's GPU quota at 8, 16
// and 32 (of 96 GPUs on the nodes), with borrowing and lending off so team A's admissions depend on its own
// quota only. Team A's 12 workloads of this 30-workload trace (26 GPU-hours submitted within 6 minutes)
// would use 24 GPUs at once at their peak, so 8 and 16 make it queue; each fits in 8 GPUs, so all
// finish. On the sim engine team A's mean time-to-admission is 3,667 s, 506 s and 0 s: each step
// of the sweep is far apart from the next compared with the test's 30 s tolerance.
const quotaSweep = `apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: e2e-quota-sweep}
generator:
  jobs: 30
  seed: 3
  overrides: {meanInterArrivalSec: 10}
cluster: CLUSTER
speedup: max
timeout: 8m
baseline: a-16
variants:
- name: a-8
  patch:
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, borrowingLimit: 0}
  - set: {queue: team-a, flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 8, lendingLimit: 0}
- name: a-16
  patch:
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, borrowingLimit: 0}
  - set: {queue: team-a, flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 16, lendingLimit: 0}
- name: a-32
  patch:
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, borrowingLimit: 0}
  - set: {queue: team-a, flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 32, lendingLimit: 0}
`

// TestExperimentQuotaSweep runs the sweep on the shared cluster (reset between variants, agent
// in-process), builds the report, and checks that more quota never gave team A a longer mean
// time-to-admission, and that the sweep binds: team A waits longer with 8 GPUs than with 32. The
// trace clock stands still while the control plane owes a step, so the comparison is exact up to
// which victim Kueue picks among equals.
func TestExperimentQuotaSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three replays of a 30-workload trace")
	}
	dir := t.TempDir()
	clusterSpec, err := filepath.Abs("../../examples/clusters/teams.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sweep.yaml")
	if err := os.WriteFile(file, []byte(strings.Replace(quotaSweep, "CLUSTER", clusterSpec, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := experiment.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cluster.RESTConfig(shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// An earlier spec's ClusterQueue on the same cluster still uses flavor cpu (as the other tests'
	// queues do): the reset must prune it, or Kueue's resource-in-use finalizer keeps the flavor.
	other := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "e2e-other-spec-cq"}, Spec: kueue.ClusterQueueSpec{
		NamespaceSelector: &metav1.LabelSelector{},
		ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
			Flavors: []kueue.FlavorQuotas{{Name: "cpu", Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse("1")}}}}}},
	}}
	if err := cluster.ApplyObjects(t.Context(), rc, []client.Object{other}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var progress bytes.Buffer
	t0 := time.Now()
	res, err := experiment.Run(t.Context(), e, experiment.Options{OutDir: out, REST: rc, State: shared.state, Out: &progress})
	t.Logf("experiment: %s\n%s", time.Since(t0).Round(time.Second), progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Ran != 3 {
		t.Fatalf("ran %d runs, want 3", res.Ran)
	}
	// A rerun finds every run done.
	res, err = experiment.Run(t.Context(), e, experiment.Options{OutDir: out, REST: rc, State: shared.state})
	if err != nil || res.Ran != 0 || res.Skipped != 3 {
		t.Fatalf("rerun: ran %d skipped %d, err %v", res.Ran, res.Skipped, err)
	}

	in, err := report.Load([]string{out}, "")
	if err != nil {
		t.Fatal(err)
	}
	r := report.Compute(in)
	plots, err := report.Plots(in, r)
	if err != nil {
		t.Fatal(err)
	}
	var html bytes.Buffer
	if err := report.WriteHTML(&html, r, plots, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(html.String(), "<img "); n != len(plots) || n < 5 {
		t.Errorf("report: %d <img> for %d plots", n, len(plots))
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", text.String())

	const tolerance = 30 // trace seconds
	for _, tb := range r.Tables {
		if tb.Metric != "time-to-admission mean" || tb.Scope != "queue team-a-cq" {
			continue
		}
		if len(tb.Rows) != 3 {
			t.Fatalf("rows %+v", tb.Rows)
		}
		for i := 1; i < 3; i++ {
			less, more := tb.Rows[i-1], tb.Rows[i]
			if less.Mean == nil || more.Mean == nil {
				t.Fatalf("no admitted team-a workload in %s or %s", less.Variant, more.Variant)
			}
			if *more.Mean > *less.Mean+tolerance {
				t.Errorf("team A's mean time-to-admission grew with quota: %s %.0fs, %s %.0fs", less.Variant, *less.Mean, more.Variant, *more.Mean)
			}
		}
		if first, last := tb.Rows[0], tb.Rows[2]; *first.Mean <= *last.Mean+tolerance {
			t.Errorf("the sweep does not bind: team A's mean time-to-admission %s %.0fs, %s %.0fs", first.Variant, *first.Mean, last.Variant, *last.Mean)
		}
		return
	}
	t.Fatal("no time-to-admission mean table for team-a-cq")
}
