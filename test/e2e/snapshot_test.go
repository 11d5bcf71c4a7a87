package e2e

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/state"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/forecast"
	"github.com/kueuelab/kueuelab/runtime/snapshot"
)

// TestSnapshot applies a queue (a flavor named otherwise than kueuelab would) and four Jobs to the
// local cluster as kubectl would: one finishes, one runs with 4 GPUs of the quota's 4, two wait.
// The snapshot has the two pending and the one admitted (on the spec's flavor h100-sxm, with its
// remaining time from kueuelab.io/duration-sec), the finished one in the history, and a spec that
// loads with the queue's quota. A user allowed to list Kueue's objects but not Nodes gets an error
// naming that permission.
func TestSnapshot(t *testing.T) {
	ns := "e2e-snapshot"
	setup(t, ns, queueObjects(ns, ns, 4)...)
	done := makeJob(ns, "done", ns, 1)
	create(t, done)
	awaitWorkloadCondition(t, done, kueue.WorkloadAdmitted)
	complete(t, awaitPodsRunning(t, ns, map[string]string{"batch.kubernetes.io/job-name": done.Name}, 1, nil))
	awaitWorkloadCondition(t, done, kueue.WorkloadFinished)

	runs := makeJob(ns, "runs", ns, 4)
	runs.Spec.Template.Annotations = map[string]string{contract.DurationSec: "3600"}
	create(t, runs)
	awaitWorkloadCondition(t, runs, kueue.WorkloadAdmitted)
	for _, name := range []string{"waits-1", "waits-2"} {
		j := makeJob(ns, name, ns, 2)
		create(t, j)
		// The quota is full: its Workload waits (Kueue need not have tried it yet, so no
		// QuotaReserved=False is awaited).
		eventually(t, name+"'s Workload", func(ctx context.Context) (bool, string, error) {
			wl, err := workloadFor(ctx, ns, j.UID)
			if err != nil || wl == nil {
				return false, "no Workload yet", err
			}
			c := condition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
			if c != nil && c.Status == metav1.ConditionTrue {
				return false, "", fmt.Errorf("%s admitted over the quota: %s", name, condSummary(wl.Status.Conditions))
			}
			return true, "", nil
		})
	}

	rc, err := cluster.RESTConfig(shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, dir := snapshotShared(ctx, t, snapshot.Options{Source: "e2e"})
	t.Logf("warnings:\n%s", strings.Join(s.Warnings, "\n"))
	st, err := state.Load(filepath.Join(dir, state.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	mine := map[state.Phase][]state.Workload{}
	for _, w := range st.Workloads {
		if strings.HasPrefix(w.ID, ns+"-") {
			mine[w.Phase] = append(mine[w.Phase], w)
		}
	}
	if len(mine[state.Admitted]) != 1 || len(mine[state.Pending]) != 2 {
		t.Fatalf("state has %d admitted and %d pending of %s, want 1 and 2: %+v", len(mine[state.Admitted]), len(mine[state.Pending]), ns, st.Workloads)
	}
	a := mine[state.Admitted][0]
	if a.ID != ns+"-job-runs" || a.Admission == nil || a.Admission.ClusterQueue != ns || a.Admission.PodSets[0].Flavors["nvidia.com/gpu"] != "h100-sxm" {
		t.Errorf("admitted: %+v (admission %+v), want %s-job-runs on ClusterQueue %s, its GPUs on h100-sxm", a, a.Admission, ns, ns)
	}
	if a.RemainingSec == nil || *a.RemainingSec > 3600 || *a.RemainingSec < 3600-120 {
		t.Errorf("admitted: remainingSec %v, want 3600 less the seconds it has run", a.RemainingSec)
	}
	for _, p := range mine[state.Pending] {
		if p.CreatedSec < a.CreatedSec || p.RemainingSec != nil {
			t.Errorf("pending %+v: created before the admitted one, or a remaining time it has no duration for", p)
		}
	}
	if st.History != state.HistoryFile || s.History == nil {
		t.Errorf("state history %q, want %s with the finished Job", st.History, state.HistoryFile)
	}
	spec, err := rcluster.Load(filepath.Join(dir, state.ClusterFile))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range spec.ClusterQueues {
		if q.Name == ns {
			found = len(q.Quotas) == 1 && q.Quotas[0].Flavor == "h100-sxm" && q.Quotas[0].Resources["nvidia.com/gpu"].NominalQuota == "4"
		}
	}
	if !found {
		t.Errorf("spec has no ClusterQueue %s with 4 GPUs of h100-sxm: %+v", ns, spec.ClusterQueues)
	}

	// The forecast from it: both pending Jobs fit once the running one is done, which the state
	// knows to the second (its duration annotation), so every run admits them then.
	fctx, fcancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer fcancel()
	rep, err := forecast.Run(fctx, forecast.Options{Dir: dir, Repeats: 2, Seed: 1, Arrivals: state.ArrivalsNone})
	if err != nil {
		t.Fatal(err)
	}
	forecasts := 0
	for _, w := range rep.Workloads {
		if !strings.HasPrefix(w.ID, ns+"-") {
			continue
		}
		forecasts++
		if w.P10 == nil || w.P90 == nil || math.Abs(*w.P10-*a.RemainingSec) > 60 || math.Abs(*w.P90-*a.RemainingSec) > 60 {
			t.Errorf("forecast of %s: p10 %v p90 %v, want within 60 s of the running Job's %gs left", w.ID, w.P10, w.P90, *a.RemainingSec)
		}
	}
	if forecasts != 2 {
		t.Errorf("forecast names %d of the 2 pending Jobs of %s: %+v", forecasts, ns, rep.Workloads)
	}

	// The finished Job's record, as real Kueue left its Workload: admitted on h100-sxm, finished.
	var past *state.Past
	for i := range st.Finished {
		if st.Finished[i].ID == ns+"-job-done" {
			past = &st.Finished[i]
		}
	}
	if past == nil || past.AdmittedSec == nil || past.Admission == nil || past.Admission.PodSets[0].Flavors["nvidia.com/gpu"] != "h100-sxm" ||
		past.FinishedSec < *past.AdmittedSec || past.FinishedSec > a.CreatedSec+1 {
		t.Fatalf("finished record of %s-job-done: %+v, want its admission on h100-sxm and a finish before runs was created", ns, past)
	}

	// A user who may list Kueue's objects and nothing else.
	user := "e2e-snapshot-kueue-viewer"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{kueue.SchemeGroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		create(t, o)
		t.Cleanup(func() { _ = shared.client.Delete(context.Background(), o) })
	}
	limited := rest.CopyConfig(rc)
	limited.Impersonate = rest.ImpersonationConfig{UserName: user}
	eventually(t, "a snapshot as "+user+" fails naming the permission", func(ctx context.Context) (bool, string, error) {
		_, err := snapshot.FromConfig(ctx, limited, snapshot.Options{KueueVersion: "v0.19.2"})
		if err == nil {
			return false, "no error", nil
		}
		return strings.Contains(err.Error(), `verb list on resource nodes in API group "" (core)`), err.Error(), nil
	})
}

// snapshotShared snapshots the shared cluster into a new directory: the snapshot and where it is.
func snapshotShared(ctx context.Context, t *testing.T, o snapshot.Options) (*snapshot.Snapshot, string) {
	t.Helper()
	rc, err := cluster.RESTConfig(shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.FromConfig(ctx, rc, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	return s, dir
}
