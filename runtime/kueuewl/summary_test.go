package kueuewl

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)) }

var ctrl = true

func workloadV1beta2() *kueue.Workload {
	return &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-x", CreationTimestamp: at(0),
			OwnerReferences: []metav1.OwnerReference{{Kind: "Pod", Name: "p"}, {Kind: "Job", Name: "x", Controller: &ctrl}}},
		Spec: kueue.WorkloadSpec{QueueName: "lq", PriorityClassRef: &kueue.PriorityClassRef{Name: "performance"},
			PodSets: []kueue.PodSet{{Name: "main", Count: 2}}},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: at(3)},
			{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: at(4)},
			{Type: kueue.WorkloadFinished, Status: metav1.ConditionTrue, Reason: kueue.WorkloadFinishedReasonSucceeded, LastTransitionTime: at(9)},
		}},
	}
}

func workloadV1beta1() *kueuev1beta1.Workload {
	return &kueuev1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job-y", CreationTimestamp: at(0),
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "y"}}},
		Spec: kueuev1beta1.WorkloadSpec{QueueName: "lq", PriorityClassName: "eco",
			PodSets: []kueuev1beta1.PodSet{{Name: "main", Count: 1}}},
		Status: kueuev1beta1.WorkloadStatus{Conditions: []metav1.Condition{
			// Admitted without QuotaReserved (a Kueue that predates the split) counts from Admitted.
			{Type: kueuev1beta1.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: at(5)},
			{Type: kueuev1beta1.WorkloadFinished, Status: metav1.ConditionTrue, Reason: "Failed", LastTransitionTime: at(8)},
		}},
	}
}

func checkSummary(t *testing.T, got Summary, name, owner, priority string, count, admitted, finished int, succeeded bool) {
	t.Helper()
	if got.Namespace != "ns" || got.Name != name || got.OwnerKind != "Job" || got.OwnerName != owner || got.Queue != "lq" ||
		got.Priority != priority || len(got.PodSets) != 1 || got.PodSets[0].Name != "main" || got.PodSets[0].Count != count ||
		got.Admitted == nil || !got.Admitted.Equal(at(admitted).Time) || got.Finished == nil || !got.Finished.Equal(at(finished).Time) ||
		got.Succeeded != succeeded || !got.Created.Equal(t0) {
		t.Errorf("summary of %s: %+v", name, got)
	}
}

func TestSummarize(t *testing.T) {
	checkSummary(t, Summarize(workloadV1beta2()), "job-x", "x", "performance", 2, 3, 9, true)
	checkSummary(t, summarizeV1beta1(workloadV1beta1()), "job-y", "y", "eco", 1, 5, 8, false)

	s := Summarize(&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "pending"}})
	if s.Admitted != nil || s.Finished != nil || s.OwnerKind != "" || s.Priority != "" {
		t.Errorf("a pending Workload without owner: %+v", s)
	}
}

// TestListWorkloadsFallsBackToV1beta1 lists from a cluster that serves v1beta2, then from one that
// serves only v1beta1: there a v1beta2 list fails as the REST mapper fails it, with no match.
func TestListWorkloadsFallsBackToV1beta1(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	v2 := fake.NewClientBuilder().WithScheme(scheme).WithObjects(workloadV1beta2()).Build()
	got, err := ListWorkloads(ctx, v2, "")
	if err != nil || len(got) != 1 {
		t.Fatalf("v1beta2 cluster: %v, %d summaries", err, len(got))
	}
	checkSummary(t, got[0], "job-x", "x", "performance", 2, 3, 9, true)

	onlyV1beta1 := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*kueue.WorkloadList); ok {
			return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: kueue.SchemeGroupVersion.Group, Kind: "Workload"}, SearchedVersions: []string{"v1beta2"}}
		}
		return c.List(ctx, list, opts...)
	}}
	v1 := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(onlyV1beta1).WithObjects(workloadV1beta1()).Build()
	got, err = ListWorkloads(ctx, v1, "ns")
	if err != nil || len(got) != 1 {
		t.Fatalf("v1beta1 cluster: %v, %d summaries", err, len(got))
	}
	checkSummary(t, got[0], "job-y", "y", "eco", 1, 5, 8, false)
}

// TestSummarizeEvictions: the evictions counted from schedulingStats (else an Evicted condition),
// and the Requeued condition's time taken as the last requeue only where every eviction was a
// PodsReady timeout (Kueue leaves Requeued True through a preemption).
func TestSummarizeEvictions(t *testing.T) {
	requeued := metav1.Condition{Type: kueue.WorkloadRequeued, Status: metav1.ConditionTrue, Reason: "BackoffFinished", LastTransitionTime: at(6)}
	evicted := metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionFalse, Reason: "QuotaReserved", LastTransitionTime: at(7)}
	stats := func(reasons ...string) *kueue.SchedulingStats {
		s := &kueue.SchedulingStats{}
		for _, r := range reasons {
			s.Evictions = append(s.Evictions, kueue.WorkloadSchedulingStatsEviction{Reason: r, Count: 2})
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		stats     *kueue.SchedulingStats
		conds     []metav1.Condition
		evictions int
		requeued  bool
	}{
		{"never evicted", nil, []metav1.Condition{requeued}, 0, false},
		{"PodsReady timeouts", stats(kueue.WorkloadEvictedByPodsReadyTimeout), []metav1.Condition{requeued, evicted}, 2, true},
		{"a preemption too", stats(kueue.WorkloadEvictedByPodsReadyTimeout, kueue.WorkloadEvictedByPreemption), []metav1.Condition{requeued, evicted}, 4, false},
		{"no stats, an Evicted condition", nil, []metav1.Condition{requeued, evicted}, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl := workloadV1beta2()
			wl.Status.SchedulingStats = tc.stats
			wl.Status.Conditions = append(wl.Status.Conditions, tc.conds...)
			s := Summarize(wl)
			if s.Evictions != tc.evictions || (s.Requeued != nil) != tc.requeued || (s.Requeued != nil && !s.Requeued.Equal(at(6).Time)) {
				t.Errorf("evictions %d, requeued %v; want %d, requeued %v (at 6 s)", s.Evictions, s.Requeued, tc.evictions, tc.requeued)
			}
		})
	}
}
