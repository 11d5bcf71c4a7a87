package runner

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// queueView counts, per ClusterQueue, the Workloads the API shows pending (in Kueue's queues) and
// reserving quota: what Kueue's kueue_pending_workloads and kueue_reserving_active_workloads
// gauges say once Kueue has caught up. It covers every Workload of the cluster, the run's and
// anyone else's.
type queueView struct {
	lqToCQ func(ns, lq string) (string, bool)

	mu        sync.Mutex
	by        map[types.UID]queueEntry
	pending   map[string]int
	reserving map[string]int
}

type queueEntry struct {
	cq        string
	reserving bool
}

func newQueueView(lqToCQ func(ns, lq string) (string, bool)) *queueView {
	return &queueView{lqToCQ: lqToCQ, by: map[types.UID]queueEntry{}, pending: map[string]int{}, reserving: map[string]int{}}
}

// update counts a Workload's new state (deleted: gone) and reports whether where Kueue keeps it
// changed: only then does Kueue owe a decision.
func (v *queueView) update(wl *kueue.Workload, deleted bool) bool {
	e, ok := v.entry(wl, deleted)
	v.mu.Lock()
	defer v.mu.Unlock()
	old, had := v.by[wl.UID]
	if had == ok && old == e {
		return false
	}
	if had {
		v.add(old, -1)
		delete(v.by, wl.UID)
	}
	if ok {
		v.by[wl.UID] = e
		v.add(e, 1)
	}
	return true
}

func (v *queueView) add(e queueEntry, d int) {
	if e.reserving {
		v.reserving[e.cq] += d
	} else {
		v.pending[e.cq] += d
	}
}

// entry is where Kueue keeps a Workload: ok is false when it keeps it nowhere (finished,
// deactivated, waiting out a requeue backoff, or queued to a LocalQueue that does not exist).
// A Workload evicted with a requeuing backoff (waitForPodsReady) has Requeued=False until the
// backoff ends: Kueue counts it in no queue gauge until then; the trace clock stops at the
// backoff's end as at any of Kueue's timers (runtime/kueueclock; on a Kueue that keeps wall time,
// the runner's Kueue timers).
func (v *queueView) entry(wl *kueue.Workload, deleted bool) (queueEntry, bool) {
	if deleted || meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
		return queueEntry{}, false
	}
	if meta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) && wl.Status.Admission != nil {
		return queueEntry{cq: string(wl.Status.Admission.ClusterQueue), reserving: true}, true
	}
	if wl.Spec.Active != nil && !*wl.Spec.Active {
		return queueEntry{}, false
	}
	if meta.IsStatusConditionFalse(wl.Status.Conditions, kueue.WorkloadRequeued) {
		return queueEntry{}, false
	}
	cq, ok := v.lqToCQ(wl.Namespace, string(wl.Spec.QueueName))
	return queueEntry{cq: cq}, ok
}

// anyPending reports whether any Workload waits in Kueue's queues: only then can Kueue owe a
// decision (an admission, a preemption, a Pending condition).
func (v *queueView) anyPending() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, n := range v.pending {
		if n > 0 {
			return true
		}
	}
	return false
}

// counts returns copies of the pending and reserving counts by ClusterQueue.
func (v *queueView) counts() (pending, reserving map[string]int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	pending, reserving = make(map[string]int, len(v.pending)), make(map[string]int, len(v.reserving))
	for k, n := range v.pending {
		pending[k] = n
	}
	for k, n := range v.reserving {
		reserving[k] = n
	}
	return pending, reserving
}

// Kueue's gauges the Kueue settler reads.
const (
	metricPending   = "kueue_pending_workloads"
	metricReserving = "kueue_reserving_active_workloads"
)

// kueueCheck compares Kueue's queues with the view's counts: Kueue has caught up when no
// ClusterQueue has a Workload waiting to be tried (status active) and every ClusterQueue holds the
// Workloads the API shows pending and reserving. counts must return the view as the watcher has
// handled it whole (watcher.queueCounts): the watcher updates the view first and places the holds
// of what it saw (a reservation's pods) after, and a read in between would agree with Kueue and
// end the settling before the hold that takes over exists.
func kueueCheck(src MetricsSource, counts func() (pending, reserving map[string]int)) func(ctx context.Context) (bool, string, error) {
	families := map[string][]string{metricPending: {"cluster_queue", "status"}, metricReserving: {"cluster_queue", "status"}}
	return func(ctx context.Context) (bool, string, error) {
		m, err := readMetrics(ctx, src, families)
		if err != nil {
			return false, "", fmt.Errorf("read Kueue metrics: %w", err)
		}
		pending, reserving := counts()
		var diffs []string
		for key, n := range m[metricPending] {
			cq, status, _ := strings.Cut(key, "/")
			if status == "active" && n != 0 {
				diffs = append(diffs, fmt.Sprintf("%s: %g to try", cq, n))
			}
		}
		seen := map[string]bool{}
		for key := range m[metricPending] {
			cq, _, _ := strings.Cut(key, "/")
			seen[cq] = true
		}
		for cq := range seen {
			kp := m[metricPending][cq+"/active"] + m[metricPending][cq+"/inadmissible"]
			if int(kp) != pending[cq] {
				diffs = append(diffs, fmt.Sprintf("%s: Kueue holds %g pending, the API shows %d", cq, kp, pending[cq]))
			}
			if kr := m[metricReserving][cq+"/"]; int(kr) != reserving[cq] {
				diffs = append(diffs, fmt.Sprintf("%s: Kueue has %g reserving, the API shows %d", cq, kr, reserving[cq]))
			}
		}
		sort.Strings(diffs)
		return len(diffs) == 0, strings.Join(diffs, "; "), nil
	}
}

// podView counts the pods waiting for kube-scheduler (unbound, not terminal, not being deleted,
// of the default scheduler) and the pods kube-scheduler's cache should hold (bound, not
// terminal: the selection of its informer of assigned pods). It watches every namespace, so pods
// that are not the run's count too.
type podView struct {
	mu      sync.Mutex
	unbound map[types.UID]bool
	bound   map[types.UID]bool
}

// startPodView runs an informer on the cluster's pods.
func startPodView(ctx context.Context, cs kubernetes.Interface) (*podView, error) {
	v := &podView{unbound: map[types.UID]bool{}, bound: map[types.UID]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0)
	inf := f.Core().V1().Pods().Informer()
	set := func(o any, deleted bool) {
		if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		waiting := !deleted && p.Spec.NodeName == "" && p.DeletionTimestamp == nil && !podTerminal(p) &&
			(p.Spec.SchedulerName == "" || p.Spec.SchedulerName == corev1.DefaultSchedulerName)
		v.mu.Lock()
		if waiting {
			v.unbound[p.UID] = true
		} else {
			delete(v.unbound, p.UID)
		}
		if !deleted && p.Spec.NodeName != "" && !podTerminal(p) {
			v.bound[p.UID] = true
		} else {
			delete(v.bound, p.UID)
		}
		v.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { set(o, false) }, UpdateFunc: func(_, o any) { set(o, false) }, DeleteFunc: func(o any) { set(o, true) },
	}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("watch unbound pods (%v): caches did not sync", typ)
		}
	}
	return v, nil
}

func (v *podView) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.unbound)
}

func (v *podView) isBound(uid types.UID) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.bound[uid]
}

func (v *podView) boundCount() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.bound)
}

const (
	metricSchedPending = "scheduler_pending_pods"
	// metricSchedCache is the size of kube-scheduler's cache by type (nodes, pods, assumed_pods);
	// kube-scheduler refreshes it once a second.
	metricSchedCache = "scheduler_scheduler_cache_size"
)

// schedulerCheck compares kube-scheduler's queues with the view: the scheduler has caught up when
// nothing waits to be tried (active, backoff) and every unbound pod is parked as unschedulable or
// gated (a pod being scheduled or bound is in no queue and still unbound). parked, when set,
// lists the pods the watcher last saw parked: one the view shows bound has not been seen bound by
// the watcher yet, which then owes its start a hold (the view and the watcher are two informers).
func schedulerCheck(src MetricsSource, v *podView, parked func() []types.UID) func(ctx context.Context) (bool, string, error) {
	families := map[string][]string{metricSchedPending: {"queue", "type"}, metricSchedCache: {"queue", "type"}}
	return func(ctx context.Context) (bool, string, error) {
		m, err := readMetrics(ctx, src, families)
		if err != nil {
			return false, "", fmt.Errorf("read kube-scheduler metrics: %w", err)
		}
		q := map[string]float64{}
		for k, n := range m[metricSchedPending] {
			q[strings.TrimSuffix(k, "/")] = n
		}
		unbound := v.count()
		if q["active"] != 0 || q["backoff"] != 0 {
			return false, fmt.Sprintf("%g pods to try, %g in backoff", q["active"], q["backoff"]), nil
		}
		if parked := q["unschedulable"] + q["gated"]; int(parked) != unbound {
			return false, fmt.Sprintf("%g pods parked, %d unbound", parked, unbound), nil
		}
		// A pod parked as unschedulable may have been tried against a cache that still held a
		// pod which had ended (the scheduler watches assigned pods on a watch of their own): it
		// is a decision only once the cache holds what the API shows; kube-scheduler then
		// re-tries the pod itself.
		if cache, ok := m[metricSchedCache]; ok && q["unschedulable"] > 0 {
			if n, bound := cache["/pods"], v.boundCount(); int(n) != bound {
				return false, fmt.Sprintf("kube-scheduler's cache holds %g pods, the API %d bound", n, bound), nil
			}
		}
		if parked != nil {
			for _, uid := range parked() {
				if v.isBound(uid) {
					return false, fmt.Sprintf("pod %s bound, the runner has not seen it yet", uid), nil
				}
			}
		}
		return true, "", nil
	}
}

// schedulerGaugePeriod bounds the age of kube-scheduler's scheduler_cache_size gauge: its cache
// updates the gauge every second (pkg/scheduler/backend/cache, cleanAssumedPeriod), plus a margin.
const schedulerGaugePeriod = 1100 * time.Millisecond

// waitSchedulerNodes waits until kube-scheduler's cache holds as many nodes as the API: a node
// the spec just added is schedulable in the API before kube-scheduler's node watch shows it, and
// the first pods, submitted at once on the event-driven clock, would all go to the nodes it
// already knew. A scheduler that does not publish its cache size is not waited for. The gauge is
// refreshed once a second (schedulerGaugePeriod); no reading before notBefore is trusted.
func waitSchedulerNodes(ctx context.Context, src MetricsSource, cs kubernetes.Interface, notBefore time.Time, timeout time.Duration) error {
	families := map[string][]string{metricSchedCache: {"type"}}
	var why string
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if time.Now().Before(notBefore) {
			why = "kube-scheduler's cache gauge has not refreshed since the nodes changed"
			return false, nil
		}
		m, err := readMetrics(ctx, src, families)
		if err != nil {
			why = err.Error()
			return false, nil
		}
		cache, ok := m[metricSchedCache]
		if !ok {
			return true, nil
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			why = err.Error()
			return false, nil
		}
		if int(cache["nodes"]) != len(nodes.Items) {
			why = fmt.Sprintf("kube-scheduler's cache holds %g nodes, the API %d", cache["nodes"], len(nodes.Items))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("kube-scheduler has not seen the spec's nodes: %s: %w", why, err)
	}
	return nil
}
