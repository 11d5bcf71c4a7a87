package snapshot

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

const h100 = "NVIDIA-H100-80GB-HBM3"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The builders read as the objects they make (Kueue's testing wrappers' idea).

func node(name string, lbl map[string]string, cpu, mem string, gpus int64) *corev1.Node {
	a := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110")}
	if gpus > 0 {
		a["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}, Status: corev1.NodeStatus{Allocatable: a, Capacity: a}}
}

func flavor(name string, lbl map[string]string) *kueue.ResourceFlavor {
	return &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ResourceFlavorSpec{NodeLabels: lbl}}
}

func quota(name string, res map[corev1.ResourceName]string) kueue.FlavorQuotas {
	fq := kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(name)}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, "nvidia.com/gpu"} {
		if v, ok := res[r]; ok {
			fq.Resources = append(fq.Resources, kueue.ResourceQuota{Name: r, NominalQuota: resource.MustParse(v)})
		}
	}
	return fq
}

func group(fqs ...kueue.FlavorQuotas) kueue.ResourceGroup {
	g := kueue.ResourceGroup{Flavors: fqs}
	for _, r := range fqs[0].Resources {
		g.CoveredResources = append(g.CoveredResources, r.Name)
	}
	return g
}

func clusterQueue(name, cohort string, groups ...kueue.ResourceGroup) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueue.ClusterQueueSpec{
		CohortName: kueue.CohortReference(cohort), ResourceGroups: groups, NamespaceSelector: &metav1.LabelSelector{}}}
}

func localQueue(ns, name, cq string) *kueue.LocalQueue {
	return &kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)}}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}}}
}

type wlOpt func(*kueue.Workload)

func workload(ns, name, queue string, created time.Duration, gpus int64, opts ...wlOpt) *kueue.Workload {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	if gpus > 0 {
		req["nvidia.com/gpu"] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	wl := &kueue.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(t0.Add(created)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: name, UID: "u-" + "name", Controller: ptr.To(true)}}},
		Spec: kueue.WorkloadSpec{QueueName: kueue.LocalQueueName(queue), PodSets: []kueue.PodSet{{Name: "main", Count: 1,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}}}},
	}
	for _, o := range opts {
		o(wl)
	}
	return wl
}

func cond(typ, reason string, at time.Duration) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(t0.Add(at))}
}

func withPriority(class string, v int32) wlOpt {
	return func(w *kueue.Workload) {
		w.Spec.PriorityClassRef = kueue.NewWorkloadPriorityClassRef(class)
		w.Spec.Priority = &v
	}
}

func admitted(cq, flavor string, at time.Duration) wlOpt {
	return func(w *kueue.Workload) {
		w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadQuotaReserved, "QuotaReserved", at), cond(kueue.WorkloadAdmitted, "Admitted", at))
		fl := map[corev1.ResourceName]kueue.ResourceFlavorReference{}
		for r := range w.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests {
			fl[r] = kueue.ResourceFlavorReference(flavor)
		}
		w.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(cq),
			PodSetAssignments: []kueue.PodSetAssignment{{Name: "main", Count: ptr.To[int32](1), Flavors: fl}}}
	}
}

func duration(sec string) wlOpt {
	return func(w *kueue.Workload) {
		w.Spec.PodSets[0].Template.Annotations = map[string]string{contract.DurationSec: sec}
	}
}

func evicted(at time.Duration) wlOpt {
	return func(w *kueue.Workload) {
		w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadEvicted, kueue.WorkloadEvictedByPodsReadyTimeout, at))
	}
}

// finished ends an admitted Workload (status.admission and QuotaReserved stay, as Kueue leaves
// them) after Kueue evicted it evictions times.
func finished(end time.Duration, evictions int32) wlOpt {
	return func(w *kueue.Workload) {
		w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadFinished, kueue.WorkloadFinishedReasonSucceeded, end))
		if evictions > 0 {
			w.Status.SchedulingStats = &kueue.SchedulingStats{Evictions: []kueue.WorkloadSchedulingStatsEviction{
				{Reason: kueue.WorkloadEvictedByPodsReadyTimeout, Count: evictions}}}
		}
	}
}

// teamsCluster is a small cluster of two teams in one cohort: an H100 pool under a flavor named
// otherwise than kueuelab would, a CPU pool, two LocalQueues in one namespace, three priorities.
func teamsCluster() []client.Object {
	gpuNode := map[string]string{"nvidia.com/gpu.product": h100, "pool": "gpu"}
	cpuNode := map[string]string{"pool": "cpu"}
	cqA := clusterQueue("team-a", "org",
		group(quota("gpu-h100", map[corev1.ResourceName]string{"cpu": "256", "memory": "2Ti", "nvidia.com/gpu": "16"}),
			quota("cpu-nodes", map[corev1.ResourceName]string{"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "0"})))
	cqA.Spec.Preemption = &kueue.ClusterQueuePreemption{ReclaimWithinCohort: kueue.PreemptionPolicyAny, WithinClusterQueue: kueue.PreemptionPolicyLowerPriority,
		BorrowWithinCohort: &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority, MaxPriorityThreshold: ptr.To[int32](100)}}
	cqA.Spec.FairSharing = &kueue.FairSharing{Weight: ptr.To(resource.MustParse("2"))}
	cqA.Spec.FlavorFungibility = &kueue.FlavorFungibility{WhenCanBorrow: kueue.TryNextFlavor, WhenCanPreempt: kueue.MayStopSearch}
	cqA.Spec.ResourceGroups[0].Flavors[0].Resources[2].BorrowingLimit = ptr.To(resource.MustParse("8"))
	cqB := clusterQueue("team-b", "org", group(quota("gpu-h100", map[corev1.ResourceName]string{"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": "16"})))
	cqB.Spec.QueueingStrategy = kueue.StrictFIFO
	cqB.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "research"}}
	nsB := namespace("team-b")
	nsB.Labels["tier"] = "research"
	org := &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}, Spec: kueue.CohortSpec{FairSharing: &kueue.FairSharing{Weight: ptr.To(resource.MustParse("1"))}}}
	return []client.Object{
		node("gpu-0", gpuNode, "96", "1024Gi", 8), node("gpu-1", gpuNode, "96", "1024Gi", 8), node("gpu-2", gpuNode, "96", "1024Gi", 8),
		node("cpu-0", cpuNode, "32", "128Gi", 0),
		flavor("gpu-h100", map[string]string{"nvidia.com/gpu.product": h100}), flavor("cpu-nodes", cpuNode),
		org, cqA, cqB,
		namespace("team-a"), nsB,
		localQueue("team-a", "a-lq", "team-a"), localQueue("team-b", "b-lq", "team-b"), localQueue("team-b", "b-spill", "team-a"),
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "mid"}, Value: 500},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}, Value: 7},
		workload("team-a", "train", "a-lq", 10*time.Second, 8, withPriority("high", 1000), duration("600"), admitted("team-a", "gpu-h100", 20*time.Second),
			func(w *kueue.Workload) { // a 1 h limit, 10 min of it used by an earlier admission
				w.Spec.MaximumExecutionTimeSeconds, w.Status.AccumulatedPastExecutionTimeSeconds = ptr.To[int32](3600), ptr.To[int32](600)
			}),
		workload("team-b", "wait", "b-lq", 30*time.Second, 16, withPriority("low", 10)),
		workload("team-b", "spill", "b-spill", 40*time.Second, 4, withPriority("mid", 500), duration("120"), evicted(50*time.Second)),
		workload("team-a", "done", "a-lq", 0, 2, duration("50"), admitted("team-a", "gpu-h100", 5*time.Second), finished(65*time.Second, 2),
			func(w *kueue.Workload) { // requeued at 3 s after its second PodsReady timeout
				w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadRequeued, "Preempted", 3*time.Second))
			}),
		workload("team-a", "off", "a-lq", 5*time.Second, 2, func(w *kueue.Workload) { w.Spec.Active = ptr.To(false) }),
	}
}

// writeAndLoad writes s to a new directory and loads its state back with the state's own loader.
func writeAndLoad(t *testing.T, s *Snapshot) (string, *state.State) {
	t.Helper()
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	st, err := state.Load(filepath.Join(dir, state.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	return dir, st
}

func fakeClient(t *testing.T, objs []client.Object, fns *interceptor.Funcs) client.Client {
	t.Helper()
	scheme, err := cluster.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
	if fns != nil {
		b = b.WithInterceptorFuncs(*fns)
	}
	return b.Build()
}

func read(t *testing.T, objs []client.Object) *Snapshot {
	t.Helper()
	s, err := Read(context.Background(), fakeClient(t, objs, nil), Options{Now: func() time.Time { return t0.Add(100 * time.Second) }, KueueVersion: "v0.19.2"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSnapshotState: the state, the trace and the history of the teams cluster, written and read
// back by their own loaders.
func TestSnapshotState(t *testing.T) {
	s := read(t, teamsCluster())
	dir, st := writeAndLoad(t, s)
	// The clock's 0 is the oldest Workload's creation, the finished done's at t0 (the oldest live
	// one, train, was created at t0 + 10 s): now (t0 + 100 s) less nowSec.
	want := &state.State{APIVersion: state.APIVersion, Kind: state.Kind, KueueVersion: "v0.19.2", NowSec: 100, ClockOrigin: t0.Format(time.RFC3339Nano),
		Trace: state.TraceFile, Arrivals: state.ArrivalsNone, Cluster: state.ClusterFile, History: state.HistoryFile,
		Workloads: []state.Workload{
			{ID: "team-a-job-train", Phase: state.Admitted, CreatedSec: 10, AdmittedSec: ptr.To(20.0), RemainingSec: ptr.To(520.0), MaxExecutionSec: ptr.To(3000.0),
				Admission: &state.Admission{ClusterQueue: "team-a", PodSets: []state.PodSetFlav{{Name: "main", Count: 1,
					Flavors: map[string]string{"cpu": "h100-sxm", "memory": "h100-sxm", "nvidia.com/gpu": "h100-sxm"}}}}},
			{ID: "team-b-job-wait", Phase: state.Pending, CreatedSec: 30},
			{ID: "team-b-b-spill-job-spill", Phase: state.Pending, CreatedSec: 40, QueuedSec: ptr.To(50.0), RemainingSec: ptr.To(120.0)},
		},
		Finished: []state.Past{{ID: "team-a-job-done", CreatedSec: 0, AdmittedSec: ptr.To(5.0), FinishedSec: 65, DurationSec: ptr.To(50.0), Evictions: 2, RequeuedSec: ptr.To(3.0),
			Admission: &state.Admission{ClusterQueue: "team-a", PodSets: []state.PodSetFlav{{Name: "main", Count: 1,
				Flavors: map[string]string{"cpu": "h100-sxm", "memory": "h100-sxm", "nvidia.com/gpu": "h100-sxm"}}}}}},
	}
	if d := cmp.Diff(want, st); d != "" {
		t.Errorf("state (-want +got):\n%s", d)
	}
	r, err := trace.Open(filepath.Join(dir, state.TraceFile), trace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := map[string]*trace.Workload{}
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if w := rec.Workload; w != nil {
			got[w.WorkloadID] = w
		}
	}
	for _, c := range []struct {
		id, ns, intent string
		submit, dur    float64
		gpus           int
	}{
		{"team-a-job-train", "team-a", trace.IntentPerformance, 10, 600, 8},
		{"team-b-job-wait", "team-b", trace.IntentEco, 30, PlaceholderDurationSec, 16},
		{"team-b-b-spill-job-spill", "team-b-b-spill", trace.IntentStandard, 40, 120, 4},
	} {
		w := got[c.id]
		if w == nil {
			t.Errorf("trace has no workload %s (has %v)", c.id, got)
			continue
		}
		if w.Namespace != c.ns || w.Intent() != c.intent || w.SubmitTimeOffsetSec != c.submit || w.DurationSec != c.dur || w.Pods[0].Requests.Value(trace.ResourceGPU) != float64(c.gpus) {
			t.Errorf("%s: namespace %s intent %s submit %g duration %g gpus %g, want %s %s %g %g %d", c.id, w.Namespace, w.Intent(), w.SubmitTimeOffsetSec,
				w.DurationSec, w.Pods[0].Requests.Value(trace.ResourceGPU), c.ns, c.intent, c.submit, c.dur, c.gpus)
		}
	}
	if len(got) != 3 {
		t.Errorf("trace has %d workloads, want the 3 live ones", len(got))
	}
	if s.History == nil || len(s.History.Workloads) != 1 || s.History.Workloads[0].DurationSec != 60 {
		t.Errorf("history: %+v, want the one finished workload, 60 s", s.History)
	} else if h := s.History.Workloads[0]; h.SubmitTimeOffsetSec != 0 || h.Namespace != "team-a" || h.IntentClass != trace.IntentEco {
		// On the state's clock, at its 0: done was created at t0. It has no priority (0): the
		// live workloads' three take the spec's classes, and 0 is nearest low's 10, eco.
		t.Errorf("history workload submitted at %g in %s, intent %q, want 0 (on the state's clock) in team-a, eco", h.SubmitTimeOffsetSec, h.Namespace, h.IntentClass)
	}
	if _, err := os.Stat(filepath.Join(dir, state.HistoryFile)); err != nil {
		t.Error(err)
	}
	for _, w := range []string{"ResourceFlavor/gpu-h100: metadata.name", "LocalQueue/team-b/b-spill", "WorkloadPriorityClass/nobody",
		"ClusterQueue/team-b: spec.namespaceSelector tier=research: dropped", "1 deactivated", "1 of 3 live workloads carry no kueuelab.io/duration-sec",
		"the history's other priorities map to the nearest class"} {
		if !strings.Contains(strings.Join(s.Warnings, "\n"), w) {
			t.Errorf("no warning with %q in:\n%s", w, strings.Join(s.Warnings, "\n"))
		}
	}
}

// TestSnapshotRoundTrip: the written spec, loaded by render/cluster and rendered back into Kueue
// objects, has the input's ClusterQueues and Cohorts on the fields Kueue decides by (quotas,
// cohorts, flavors under the spec's names, preemption, fair sharing, fungibility, queueing
// strategy), its priorities' values, and nodes of the same allocatable per flavor.
func TestSnapshotRoundTrip(t *testing.T) {
	in := teamsCluster()
	s := read(t, in)
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	spec, err := rcluster.Load(filepath.Join(dir, state.ClusterFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := spec.Objects(rcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rename := map[kueue.ResourceFlavorReference]kueue.ResourceFlavorReference{"gpu-h100": "h100-sxm", "cpu-nodes": "cpu"}
	norm := func(spec kueue.ClusterQueueSpec) kueue.ClusterQueueSpec {
		spec.NamespaceSelector = nil // dropped on purpose (every LocalQueue's namespace matches)
		for i := range spec.ResourceGroups {
			for j := range spec.ResourceGroups[i].Flavors {
				if n, ok := rename[spec.ResourceGroups[i].Flavors[j].Name]; ok {
					spec.ResourceGroups[i].Flavors[j].Name = n
				}
			}
		}
		if spec.QueueingStrategy == "" {
			spec.QueueingStrategy = kueue.BestEffortFIFO
		}
		return spec
	}
	want, got := map[string]any{}, map[string]any{}
	gpus := func(objs []client.Object, m map[string]any) {
		for _, o := range objs {
			switch o := o.(type) {
			case *kueue.ClusterQueue:
				m["ClusterQueue/"+o.Name] = norm(o.Spec)
			case *kueue.Cohort:
				m["Cohort/"+o.Name] = o.Spec
			case *corev1.Node:
				fam, _ := nodeFamily(o)
				for r, q := range o.Status.Allocatable {
					k := "Node allocatable/" + rcluster.FlavorOf(fam) + "/" + string(r)
					sum, _ := m[k].(resource.Quantity)
					sum.Add(q)
					m[k] = sum
				}
			}
		}
	}
	gpus(in, want)
	gpus(out, got)
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); d != "" {
		t.Errorf("rendered back (-cluster +spec):\n%s", d)
	}
	values := map[string]int32{}
	for _, o := range out {
		if w, ok := o.(*kueue.WorkloadPriorityClass); ok {
			values[w.Name] = w.Value
		}
	}
	for name, v := range map[string]int32{"high": 1000, "mid": 500, "low": 10} {
		if values[name] != v {
			t.Errorf("WorkloadPriorityClass %s: value %d, want %d (rendered %v)", name, values[name], v, values)
		}
	}
}

func forbidden(resource string) *interceptor.Funcs {
	return &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		gvk, err := c.GroupVersionKindFor(list)
		if err != nil {
			return err
		}
		if strings.EqualFold(strings.TrimSuffix(gvk.Kind, "List")+"s", resource) {
			return apierrors.NewForbidden(schema.GroupResource{Group: gvk.Group, Resource: resource}, "", errors.New("RBAC: access denied"))
		}
		return c.List(ctx, list, opts...)
	}}
}

// TestSnapshotRefuses: what the spec cannot express, and what the user may not read, are errors
// that name it.
func TestSnapshotRefuses(t *testing.T) {
	base := teamsCluster()
	with := func(extra ...client.Object) []client.Object {
		return append(append([]client.Object{}, base...), extra...)
	}
	twoGroups := clusterQueue("split", "",
		group(quota("cpu-nodes", map[corev1.ResourceName]string{"cpu": "8", "memory": "8Gi"})),
		group(quota("gpu-h100", map[corev1.ResourceName]string{"nvidia.com/gpu": "8"})))
	for _, c := range []struct {
		name string
		objs []client.Object
		fns  *interceptor.Funcs
		want []string
	}{
		{"two resource groups", with(twoGroups), nil, []string{"ClusterQueue/split: spec.resourceGroups: 2 resource groups"}},
		{"four priorities", with(workload("team-a", "urgent", "a-lq", 60*time.Second, 1, withPriority("urgent", 5000))), nil,
			[]string{"the live workloads have 4 priorities, 5000 (urgent), 1000 (high), 500 (mid), 10 (low)"}},
		{"one flavor over two families", with(flavor("everything", nil)), nil,
			[]string{"ResourceFlavor/everything: spec.nodeLabels map[] select nodes of the families CPU, H100-SXM"}},
		{"stopped queue", with(func() client.Object {
			cq := clusterQueue("held", "", group(quota("cpu-nodes", map[corev1.ResourceName]string{"cpu": "8"})))
			cq.Spec.StopPolicy = ptr.To(kueue.Hold)
			return cq
		}()), nil, []string{"ClusterQueue/held: spec.stopPolicy: Hold"}},
		{"two flavors over the same nodes in one cohort tree", with(flavor("h100-again", map[string]string{"nvidia.com/gpu.product": h100}),
			clusterQueue("again", "org", group(quota("h100-again", map[corev1.ResourceName]string{"nvidia.com/gpu": "8"})))), nil,
			[]string{"cohort tree of Cohort/org: quotas on ResourceFlavors gpu-h100, h100-again, which select the same nodes"}},
		{"no ClusterQueue list", base, forbidden("clusterqueues"), []string{"list clusterqueues: forbidden", "verb list on resource clusterqueues in API group kueue.x-k8s.io"}},
		{"no Workload list", base, forbidden("workloads"), []string{"list workloads: forbidden", "verb list on resource workloads in API group kueue.x-k8s.io"}},
		{"no Node list", base, forbidden("nodes"), []string{"list nodes: forbidden", `verb list on resource nodes in API group "" (core)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(context.Background(), fakeClient(t, c.objs, c.fns), Options{Now: func() time.Time { return t0.Add(100 * time.Second) }})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestSnapshotFlavorAliases: two flavors over the same nodes are one spec flavor where no queue
// or cohort tree holds quota of both.
func TestSnapshotFlavorAliases(t *testing.T) {
	alone := clusterQueue("alone", "", group(quota("h100-alone", map[corev1.ResourceName]string{"nvidia.com/gpu": "8"})))
	alone.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "team-c"}}
	objs := append(teamsCluster(), flavor("h100-alone", map[string]string{"nvidia.com/gpu.product": h100}), alone,
		namespace("team-c"), localQueue("team-c", "c-lq", "alone"))
	s := read(t, objs)
	found := false
	for _, q := range s.Spec.ClusterQueues {
		if q.Name == "alone" {
			// Its selector selects its one team's namespace as the spec labels it: kept.
			found = len(q.Quotas) == 1 && q.Quotas[0].Flavor == "h100-sxm" &&
				q.NamespaceSelector != nil && q.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] == "team-c"
		}
	}
	if !found {
		t.Errorf("ClusterQueue alone: want its quota on h100-sxm and its selector kept: %+v", s.Spec.ClusterQueues)
	}
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "ResourceFlavor/h100-alone: metadata.name: selects the nodes of ResourceFlavor/gpu-h100") {
		t.Errorf("no alias warning in:\n%s", strings.Join(s.Warnings, "\n"))
	}
}

// TestSnapshotTraceClock: with a replay's published trace clock, times are trace seconds (Kueue's
// times less the epoch) and now is the clock's position.
func TestSnapshotTraceClock(t *testing.T) {
	epoch := t0
	pub := kueueclock.Published{Epoch: epoch, Running: true,
		Position: simclock.Position{Now: 500, Base: t0.Add(30 * time.Second), Rate: 2, Cap: 700}}
	objs := append(teamsCluster(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: kueueclock.PublishedNamespace, Name: kueueclock.PublishedName}, Data: pub.Data()},
		// Another run's: one created before this replay's start, one finished after where it stands.
		workload("team-a", "older", "a-lq", -100*time.Second, 2),
		workload("team-a", "ahead", "a-lq", 30*time.Second, 2, admitted("team-a", "gpu-h100", 40*time.Second), finished(900*time.Second, 0)),
		// This run's, evicted by a PodsReady timeout: its Requeued time is not on the replay's clock.
		workload("team-a", "requeued", "a-lq", 30*time.Second, 2, admitted("team-a", "gpu-h100", 40*time.Second), finished(60*time.Second, 1),
			func(w *kueue.Workload) {
				w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadRequeued, "BackoffFinished", 35*time.Second))
			}))
	s := read(t, objs) // wall now = t0+100s: 70 s after the position at rate 2, capped at 700
	if s.State.NowSec != 640 {
		t.Errorf("nowSec %g, want 500 + 70×2 = 640", s.State.NowSec)
	}
	w := s.State.Find("team-a-job-train")
	// It has run 620 of its 600 s: overdue, so its remaining time is left to the forecast.
	if w == nil || w.CreatedSec != 10 || w.AdmittedSec == nil || *w.AdmittedSec != 20 || w.RemainingSec != nil {
		t.Errorf("train on the trace clock: %+v, want created 10, admitted 20, no remainingSec", w)
	}
	if w := s.State.Find("team-b-b-spill-job-spill"); w == nil || w.QueuedSec == nil || *w.QueuedSec != 50 {
		t.Errorf("spill on the trace clock: %+v, want queued at 50", w)
	}
	if !strings.Contains(s.Clock, "trace seconds") {
		t.Errorf("clock %q", s.Clock)
	}
	if s.State.Find("team-a-job-older") != nil || len(s.State.Finished) != 2 || s.State.Finished[0].ID != "team-a-job-done" ||
		s.State.Finished[1].ID != "team-a-job-requeued" || s.State.Finished[1].Evictions != 1 || s.State.Finished[1].RequeuedSec != nil {
		t.Errorf("live %+v, finished %+v: want older and ahead, another run's, left out, and requeued without its requeue time", s.State.Workloads, s.State.Finished)
	}
	for _, w := range []string{"1 live ones created outside the published replay's clock", "1 finished Workloads outside the published replay's clock",
		"2 evicted workloads' Requeued condition is at the wall time"} {
		if !strings.Contains(strings.Join(s.Warnings, "\n"), w) {
			t.Errorf("no warning %q in:\n%s", w, strings.Join(s.Warnings, "\n"))
		}
	}
}

// The Kueue Configuration a snapshot found is kept beside the state, which names it; without one
// the state names none and the snapshot says why.
func TestSnapshotKeepsKueueConfig(t *testing.T) {
	parsed, err := kueuewl.ParseConfiguration([]byte("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := read(t, teamsCluster())
	warnings := s.kueueConfig(&cluster.RemoteKueue{Config: &cluster.KueueSettings{Parsed: parsed, FlagGates: map[string]bool{"PriorityBoost": true}},
		ConfigSource: "ConfigMap kueue-system/kueue-manager-config key controller_manager_config.yaml"}, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings %q", warnings)
	}
	dir, st := writeAndLoad(t, s)
	b, err := os.ReadFile(filepath.Join(dir, state.KueueConfigFile))
	if err != nil || st.KueueConfig != state.KueueConfigFile {
		t.Fatalf("state names %q; file: %v", st.KueueConfig, err)
	}
	for _, want := range []string{"# Read from ConfigMap kueue-system/kueue-manager-config", "fairSharing:", "PriorityBoost: true", "kind: Configuration"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q:\n%s", state.KueueConfigFile, want, b)
		}
	}
	none := read(t, teamsCluster())
	if w := none.kueueConfig(&cluster.RemoteKueue{}, nil); len(w) != 1 || !strings.Contains(w[0], "a forecast runs the release's defaults") || none.State.KueueConfig != "" {
		t.Errorf("without a Configuration: warnings %q, state names %q", w, none.State.KueueConfig)
	}
}

// A cluster whose GPUs NVIDIA's device plugin time-slices (GPU Feature Discovery's labels, the
// replicas in allocatable) becomes a time-sliced pool of the physical GPUs and its own flavor,
// beside the whole GPUs of the same family; rendered back, its nodes advertise the replicas again.
func TestSnapshotTimeSlicedGPUs(t *testing.T) {
	shared := map[string]string{"nvidia.com/gpu.product": h100 + "-SHARED", "nvidia.com/gpu.replicas": "4",
		"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.count": "8"}
	cq := clusterQueue("main", "",
		group(quota("gpu-h100", map[corev1.ResourceName]string{"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8"}),
			quota("ts", map[corev1.ResourceName]string{"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "32"})))
	s := read(t, []client.Object{
		node("gpu-0", map[string]string{"nvidia.com/gpu.product": h100}, "96", "1024Gi", 8),
		node("ts-0", shared, "96", "1024Gi", 32),
		flavor("gpu-h100", map[string]string{"nvidia.com/gpu.product": h100}), flavor("ts", map[string]string{"nvidia.com/gpu.product": h100 + "-SHARED"}),
		cq, namespace("team-a"), localQueue("team-a", "lq", "main"),
	})
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	spec, err := rcluster.Load(filepath.Join(dir, state.ClusterFile))
	if err != nil {
		t.Fatal(err)
	}
	var sliced *rcluster.NodePool
	for i := range spec.NodePools {
		if spec.NodePools[i].TimeSlicing != nil {
			sliced = &spec.NodePools[i]
		}
	}
	if sliced == nil || sliced.GPUsPerNode != 8 || sliced.TimeSlicing.Replicas != 4 || sliced.GPUFamily != "H100-SXM" {
		t.Fatalf("time-sliced pool %+v, want 8 H100s of 4 replicas", sliced)
	}
	if got := spec.FlavorNames(); !slices.Contains(got, "h100-sxm-shared") || !slices.Contains(got, "h100-sxm") {
		t.Errorf("flavors %v, want h100-sxm and h100-sxm-shared", got)
	}
	objs, err := spec.Objects(rcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && n.Labels["nvidia.com/gpu.replicas"] == "4" {
			if q := n.Status.Allocatable["nvidia.com/gpu"]; q.Value() != 32 {
				t.Errorf("rendered back, the time-sliced node advertises %s GPUs, want 32", q.String())
			}
		}
	}
}

// TestSnapshotHistoryPriorities: a cluster with nothing live keeps its finished workloads'
// priorities as the spec's classes, and the history's workloads take them, as a backtest of its
// past needs.
func TestSnapshotHistoryPriorities(t *testing.T) {
	var objs []client.Object
	for _, o := range teamsCluster() {
		if _, wl := o.(*kueue.Workload); !wl {
			objs = append(objs, o)
		}
	}
	objs = append(objs,
		workload("team-a", "f1", "a-lq", 0, 2, withPriority("high", 1000), admitted("team-a", "gpu-h100", 5*time.Second), finished(65*time.Second, 0)),
		workload("team-a", "f2", "a-lq", 10*time.Second, 2, withPriority("low", 10), admitted("team-a", "gpu-h100", 15*time.Second), finished(75*time.Second, 0)))
	s := read(t, objs)
	pc := s.Spec.PriorityClasses
	if pc.Performance == nil || pc.Performance.Name != "high" || *pc.Performance.Value != 1000 || pc.Standard == nil || pc.Standard.Name != "low" || *pc.Standard.Value != 10 {
		t.Errorf("priority classes %+v %+v, want high (1000) as performance and low (10) as standard", pc.Performance, pc.Standard)
	}
	intents := map[string]string{}
	for _, w := range s.History.Workloads {
		intents[w.WorkloadID] = w.Intent()
	}
	if want := map[string]string{"team-a-job-f1": trace.IntentPerformance, "team-a-job-f2": trace.IntentStandard}; !maps.Equal(intents, want) {
		t.Errorf("history intents %v, want %v", intents, want)
	}
}

// TestSnapshotRequeueOffTheClock: a Requeued condition dated before its Workload was created is
// not on Kueue's clock (a replay's Kueue writes it at the wall time): no requeuedSec, said so.
func TestSnapshotRequeueOffTheClock(t *testing.T) {
	objs := append(teamsCluster(), workload("team-a", "f1", "a-lq", 30*time.Second, 2, admitted("team-a", "gpu-h100", 40*time.Second),
		finished(70*time.Second, 1), func(w *kueue.Workload) {
			w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadRequeued, "BackoffFinished", 10*time.Second))
		}))
	s := read(t, objs)
	for _, p := range s.State.Finished {
		if p.ID == "team-a-job-f1" && (p.Evictions != 1 || p.RequeuedSec != nil) {
			t.Errorf("f1: %d evictions, requeued at %v, want 1 and no time", p.Evictions, p.RequeuedSec)
		}
	}
	if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, "1 evicted workloads' Requeued condition is outside their life") {
		t.Errorf("no warning of the requeue in:\n%s", w)
	}
}
