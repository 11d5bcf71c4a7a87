package kueuelib

import (
	"context"
	"slices"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/workload"
	"sigs.k8s.io/kueue/pkg/workload/finish"
	"sigs.k8s.io/kueue/pkg/workload/patching"

	"github.com/kueuelab/kueuelab/runtime/sim/des"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(s)
	for _, o := range cluster() {
		if err := st.AddObject(o); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func cond(wl *kueue.Workload, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(wl.Status.Conditions, typ)
}

// TestStoreAppliesKueueWrites checks the store against what the API server does with Kueue's own
// status writes: the admission manager's apply replaces the fields it owns (a condition it
// stops applying goes away), another manager's apply merges its condition, and every write is a
// Change with the old and new object.
func TestStoreAppliesKueueWrites(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	clk := des.New(10).Clock()
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w"}, Spec: kueue.WorkloadSpec{QueueName: "lq"}}
	if err := st.Create(ctx, wl); err != nil {
		t.Fatal(err)
	}
	if err := st.Create(ctx, wl.DeepCopy()); err == nil {
		t.Fatal("a second create of one name succeeded")
	}
	key := types.NamespacedName{Namespace: "a", Name: "w"}
	admission := &kueue.Admission{ClusterQueue: "qa"}
	// Admit, as the scheduler does.
	cur := st.Workload(key).DeepCopy()
	if err := patching.PatchAdmissionStatus(ctx, st, cur, clk, func(w *kueue.Workload) (bool, error) {
		workload.SetQuotaReservation(w, admission, clk)
		return workload.SyncAdmittedCondition(w, clk.Now()), nil
	}); err != nil {
		t.Fatal(err)
	}
	got := st.Workload(key)
	if !workload.IsAdmitted(got) || got.Status.Admission == nil || got.Status.Admission.ClusterQueue != "qa" {
		t.Fatalf("after admission: %+v", got.Status)
	}
	// Another manager's single condition merges.
	if err := workload.SetConditionAndUpdate(ctx, st, got, kueue.WorkloadPodsReady, metav1.ConditionTrue, "PodsReady", "ready", "job-controller", clk); err != nil {
		t.Fatal(err)
	}
	if c := cond(st.Workload(key), kueue.WorkloadPodsReady); c == nil || c.Status != metav1.ConditionTrue || !workload.IsAdmitted(st.Workload(key)) {
		t.Fatalf("PodsReady not merged or admission lost: %+v", st.Workload(key).Status.Conditions)
	}
	// Releasing quota: the admission manager's apply without Admitted removes it and the
	// admission, keeps PodsReady (another manager's).
	cur = st.Workload(key).DeepCopy()
	if err := patching.PatchAdmissionStatus(ctx, st, cur, clk, func(w *kueue.Workload) (bool, error) {
		return workload.UnsetQuotaReservationWithCondition(w, "Pending", "evicted", clk.Now()), nil
	}); err != nil {
		t.Fatal(err)
	}
	got = st.Workload(key)
	if workload.HasQuotaReservation(got) || workload.IsAdmitted(got) || got.Status.Admission != nil || cond(got, kueue.WorkloadPodsReady) == nil {
		t.Fatalf("after release: %+v", got.Status)
	}
	ch := st.TakeChanges()
	if len(ch) != 4 || ch[0].Old != nil || ch[1].Old == nil || workload.IsAdmitted(ch[1].Old) || !workload.IsAdmitted(ch[1].New) {
		t.Fatalf("changes: %d, want create, admit, PodsReady, release in order", len(ch))
	}
	if len(st.TakeChanges()) != 0 {
		t.Fatal("TakeChanges returned changes twice")
	}
	// Finish, then forget: gone without a Change.
	if err := finish.Finish(ctx, st, st.Workload(key).DeepCopy(), kueue.WorkloadFinishedReasonSucceeded, "done", clk); err != nil {
		t.Fatal(err)
	}
	if !IsFinished(st.Workload(key)) {
		t.Fatal("Finish did not set Finished")
	}
	st.Forget(key)
	if st.Workload(key) != nil || st.Workloads() != 0 || len(st.TakeChanges()) != 1 {
		t.Fatal("Forget")
	}
}

func TestStoreListsByKueuesIndexes(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	var lqs kueue.LocalQueueList
	if err := st.List(ctx, &lqs, client.MatchingFields{indexer.QueueClusterQueueKey: "qb"}); err != nil {
		t.Fatal(err)
	}
	if len(lqs.Items) != 1 || lqs.Items[0].Namespace != "b" {
		t.Fatalf("LocalQueues of qb: %+v", lqs.Items)
	}
	for _, n := range []string{"w1", "w2"} {
		if err := st.Create(ctx, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: n}, Spec: kueue.WorkloadSpec{QueueName: "lq"}}); err != nil {
			t.Fatal(err)
		}
	}
	var wls kueue.WorkloadList
	if err := st.List(ctx, &wls, client.InNamespace("a"), client.MatchingFields{indexer.WorkloadQueueKey: "lq"}); err != nil {
		t.Fatal(err)
	}
	if len(wls.Items) != 2 || wls.Items[0].Name != "w1" {
		t.Fatalf("Workloads of a/lq: %d", len(wls.Items))
	}
	wls = kueue.WorkloadList{}
	if err := st.List(ctx, &wls, client.MatchingFields{indexer.WorkloadClusterQueueKey: "qa"}); err != nil || len(wls.Items) != 0 {
		t.Fatalf("Workloads admitted by qa: %d (%v), want none", len(wls.Items), err)
	}
	var ns kueue.ClusterQueueList
	if err := st.List(ctx, &ns); err != nil || len(ns.Items) != 2 {
		t.Fatalf("ClusterQueues: %d (%v)", len(ns.Items), err)
	}
}

// TestStoreAnswersForAWorkloadsJob checks the metadata Get Kueue's orphan check makes (v0.17's
// workload controller, FinishOrphanedWorkloads): a Workload's job exists, with the UID of its
// controller reference, exactly as long as the Workload is stored.
func TestStoreAnswersForAWorkloadsJob(t *testing.T) {
	st := newStore(t)
	ctx := context.Background()
	ctrl := true
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "job-a-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "a", UID: "job-uid", Controller: &ctrl}}}}
	get := func(apiVersion, kind, name string) (*metav1.PartialObjectMetadata, error) {
		pm := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}}
		return pm, st.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: name}, pm)
	}
	if _, err := get("batch/v1", "Job", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("before the Workload: %v, want NotFound", err)
	}
	if err := st.Create(ctx, wl); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		apiVersion, kind, name string
		found                  bool
	}{
		{"batch/v1", "Job", "a", true},
		{"batch/v1", "Job", "b", false},
		{"jobset.x-k8s.io/v1alpha2", "JobSet", "a", false},
	} {
		pm, err := get(tc.apiVersion, tc.kind, tc.name)
		switch {
		case tc.found && (err != nil || pm.UID != "job-uid" || pm.Name != tc.name):
			t.Errorf("%s %s: %v, UID %q; want found with UID job-uid", tc.kind, tc.name, err, pm.UID)
		case !tc.found && !apierrors.IsNotFound(err):
			t.Errorf("%s %s: %v, want NotFound", tc.kind, tc.name, err)
		}
	}
	if err := st.Delete(ctx, wl); err != nil {
		t.Fatal(err)
	}
	if _, err := get("batch/v1", "Job", "a"); !apierrors.IsNotFound(err) {
		t.Errorf("after the Workload: %v, want NotFound", err)
	}
}

// TestStoreDRAObjects: the store serves what Kueue's DRA quota reads (dra.ResourceSliceCache lists
// ResourceSlices by the spec.driver index; claim templates are got by name), and a removed claim
// template is gone.
func TestStoreDRAObjects(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	slice := func(name, driver string) *resourcev1.ResourceSlice {
		return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{Driver: driver}}
	}
	tmpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w-mig"}}
	for _, o := range []client.Object{slice("n2-gpu-0", "gpu.nvidia.com"), slice("n1-gpu-0", "gpu.nvidia.com"),
		slice("n1-nic", "dra.net"), tmpl} {
		if err := st.AddObject(o); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		driver string
		want   []string
	}{
		{"gpu.nvidia.com", []string{"n1-gpu-0", "n2-gpu-0"}},
		{"dra.net", []string{"n1-nic"}},
		{"", []string{"n1-gpu-0", "n1-nic", "n2-gpu-0"}},
	} {
		var l resourcev1.ResourceSliceList
		var opts []client.ListOption
		if tc.driver != "" {
			opts = append(opts, client.MatchingFields{"spec.driver": tc.driver})
		}
		if err := st.List(ctx, &l, opts...); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range l.Items {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("slices of driver %q: %v, want %v", tc.driver, got, tc.want)
		}
	}
	key := types.NamespacedName{Namespace: "a", Name: "w-mig"}
	if err := st.Get(ctx, key, &resourcev1.ResourceClaimTemplate{}); err != nil {
		t.Fatalf("get claim template: %v", err)
	}
	if err := st.RemoveObject(tmpl); err != nil {
		t.Fatal(err)
	}
	if err := st.Get(ctx, key, &resourcev1.ResourceClaimTemplate{}); !apierrors.IsNotFound(err) {
		t.Errorf("get removed claim template: %v, want not found", err)
	}
	if err := st.RemoveObject(tmpl); !apierrors.IsNotFound(err) {
		t.Errorf("remove it again: %v, want not found", err)
	}
}
