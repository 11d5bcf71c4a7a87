package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// The metrics files are what Kueue v0.15.0 and kube-scheduler v1.34.2 served on kueuelab's local
// cluster with teams.yaml applied, after a replay.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGaugesReadsRealExpositions(t *testing.T) {
	m, err := gauges(bytes.NewReader(readTestdata(t, "kueue-v0.15.0.metrics")),
		map[string][]string{metricPending: {"cluster_queue", "status"}, metricReserving: {"cluster_queue", "status"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cq := range []string{"team-a-cq", "team-b-cq", "team-c-cq"} {
		for _, st := range []string{"active", "inadmissible"} {
			if v, ok := m[metricPending][cq+"/"+st]; !ok || v != 0 {
				t.Errorf("%s{%s,%s} = %v (present %v), want 0", metricPending, cq, st, v, ok)
			}
		}
		if v, ok := m[metricReserving][cq+"/"]; !ok || v != 0 {
			t.Errorf("%s{%s} = %v (present %v), want 0", metricReserving, cq, v, ok)
		}
	}
	s, err := gauges(bytes.NewReader(readTestdata(t, "kube-scheduler-v1.34.2.metrics")), map[string][]string{metricSchedPending: {"queue"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"active", "backoff", "unschedulable", "gated"} {
		if _, ok := s[metricSchedPending][q]; !ok {
			t.Errorf("%s{queue=%s} missing", metricSchedPending, q)
		}
	}
}

func TestGaugesErrors(t *testing.T) {
	fams := map[string][]string{"m": {"a"}}
	for _, tc := range []struct{ in, want string }{
		{`m{a="x"`, "unterminated"},
		{`m{a=x} 1`, `want name="value"`},
		{`m{a="x"} one`, "value"},
		{`m{a="x}`, "unterminated"},
		{"m", "no value"},
	} {
		if _, err := gauges(strings.NewReader(tc.in+"\n"), fams); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
	m, err := gauges(strings.NewReader("# HELP m x\nm{a=\"q\\\"x\",b=\"1\"} 2\nm{a=\"y\"} 3 1700000000\nother 9\n"), fams)
	if err != nil || m["m"][`q"x`] != 2 || m["m"]["y"] != 3 || len(m) != 1 {
		t.Errorf("gauges = %v, %v", m, err)
	}
}

// BenchmarkGauges reads the two expositions as a settler does, against the Prometheus text parser
// of github.com/prometheus/common (expfmt) on the same bytes: the baseline for keeping a small
// reader of our own.
func BenchmarkGauges(b *testing.B) {
	kq := readTestdata(b, "kueue-v0.15.0.metrics")
	sc := readTestdata(b, "kube-scheduler-v1.34.2.metrics")
	b.Run("gauges", func(b *testing.B) {
		b.SetBytes(int64(len(kq) + len(sc)))
		for b.Loop() {
			if _, err := gauges(bytes.NewReader(kq), map[string][]string{metricPending: {"cluster_queue", "status"}, metricReserving: {"cluster_queue", "status"}}); err != nil {
				b.Fatal(err)
			}
			if _, err := gauges(bytes.NewReader(sc), map[string][]string{metricSchedPending: {"queue"}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("expfmt", func(b *testing.B) {
		b.SetBytes(int64(len(kq) + len(sc)))
		for b.Loop() {
			if err := parseExpfmt(kq); err != nil {
				b.Fatal(err)
			}
			if err := parseExpfmt(sc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestSettlerReleasesAfterTwoAgreeingReads(t *testing.T) {
	clk := simclock.New(simclock.Options{})
	var mu sync.Mutex
	agree, reads := false, 0
	s := newSettler("x", clk, simclock.KindKueue, time.Millisecond, func(context.Context) (bool, string, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return agree, "", nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.run(ctx)
	s.poke()
	if !clk.Held(s.key) {
		t.Fatal("poke did not hold the clock")
	}
	await(t, "reads while the component disagrees", func() bool { mu.Lock(); defer mu.Unlock(); return reads >= 5 })
	if !clk.Held(s.key) {
		t.Fatal("released while the component disagrees")
	}
	mu.Lock()
	agree, reads = true, 0
	mu.Unlock()
	await(t, "release", func() bool { return !clk.Held(s.key) })
	mu.Lock()
	if reads < 2 {
		t.Errorf("released after %d agreeing reads, want 2", reads)
	}
	mu.Unlock()
	s.poke()
	await(t, "release after a second poke", func() bool { return !clk.Held(s.key) })
	if st := s.stats(); st.Errors != 0 || st.Polls < 7 {
		t.Errorf("stats %+v", st)
	}
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func staticMetrics(text string) MetricsSource {
	return func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(text)), nil }
}

func TestKueueCheck(t *testing.T) {
	v := newQueueView(func(ns, lq string) (string, bool) {
		return map[string]string{"a/lq": "cq"}[ns+"/"+lq], ns+"/"+lq == "a/lq"
	})
	pending := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", UID: "p"}, Spec: kueue.WorkloadSpec{QueueName: "lq"}}
	reserving := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", UID: "r"}, Spec: kueue.WorkloadSpec{QueueName: "lq"},
		Status: kueue.WorkloadStatus{Admission: &kueue.Admission{ClusterQueue: "cq"},
			Conditions: []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}}}}
	inactive := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", UID: "i"}, Spec: kueue.WorkloadSpec{QueueName: "lq", Active: ptr.To(false)}}
	noQueue := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "b", UID: "n"}, Spec: kueue.WorkloadSpec{QueueName: "lq"}}
	// Evicted by the PodsReady timeout and waiting out its requeue backoff: in no Kueue queue.
	backoff := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "a", UID: "b"}, Spec: kueue.WorkloadSpec{QueueName: "lq"},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadRequeued, Status: metav1.ConditionFalse,
			Reason: kueue.WorkloadEvictedByPodsReadyTimeout}}}}
	for _, wl := range []*kueue.Workload{pending, reserving, inactive, noQueue, backoff} {
		if !v.update(wl, false) && wl.UID != "i" && wl.UID != "n" && wl.UID != "b" {
			t.Errorf("new Workload %s: update reported no change", wl.UID)
		}
	}
	if v.update(pending, false) {
		t.Error("unchanged Workload: update reported a change")
	}
	gauge := func(active, inadmissible, res int) string {
		return fmt.Sprintf("kueue_pending_workloads{cluster_queue=\"cq\",status=\"active\"} %d\n"+
			"kueue_pending_workloads{cluster_queue=\"cq\",status=\"inadmissible\"} %d\n"+
			"kueue_reserving_active_workloads{cluster_queue=\"cq\"} %d\n", active, inadmissible, res)
	}
	for _, tc := range []struct {
		name     string
		metrics  string
		ok       bool
		contains string
	}{
		{"caught up", gauge(0, 1, 1), true, ""},
		{"one to try", gauge(1, 0, 1), false, "to try"},
		{"admission not written yet", gauge(0, 0, 2), false, "reserving"},
		{"new Workload not queued yet", gauge(0, 0, 1), false, "pending"},
	} {
		ok, why, err := kueueCheck(staticMetrics(tc.metrics), v.counts)(context.Background())
		if err != nil || ok != tc.ok || !strings.Contains(why, tc.contains) {
			t.Errorf("%s: ok %v why %q err %v; want ok %v, why containing %q", tc.name, ok, why, err, tc.ok, tc.contains)
		}
	}
	if _, _, err := kueueCheck(func(context.Context) (io.ReadCloser, error) { return nil, errors.New("down") }, v.counts)(context.Background()); err == nil {
		t.Error("a failed read must be an error")
	}
}

func TestSchedulerCheck(t *testing.T) {
	v := &podView{unbound: map[types.UID]bool{}, bound: map[types.UID]bool{}}
	v.unbound["a"], v.unbound["b"] = true, true
	v.bound["c"], v.bound["d"], v.bound["e"] = true, true, true
	sched := func(active, backoff, unsched, gated int) MetricsSource {
		return staticMetrics(fmt.Sprintf("scheduler_pending_pods{queue=\"active\"} %d\nscheduler_pending_pods{queue=\"backoff\"} %d\n"+
			"scheduler_pending_pods{queue=\"unschedulable\"} %d\nscheduler_pending_pods{queue=\"gated\"} %d\n"+
			"scheduler_scheduler_cache_size{type=\"nodes\"} 2\nscheduler_scheduler_cache_size{type=\"pods\"} 3\n", active, backoff, unsched, gated))
	}
	stale := staticMetrics("scheduler_pending_pods{queue=\"unschedulable\"} 2\nscheduler_scheduler_cache_size{type=\"pods\"} 4\n")
	staleNoneParked := staticMetrics("scheduler_pending_pods{queue=\"gated\"} 2\nscheduler_scheduler_cache_size{type=\"pods\"} 4\n")
	for _, tc := range []struct {
		name   string
		src    MetricsSource
		parked []types.UID // the pods the watcher last saw parked
		ok     bool
	}{
		{"every unbound pod parked", sched(0, 0, 1, 1), nil, true},
		{"one to try", sched(1, 0, 1, 0), nil, false},
		{"one in backoff", sched(0, 1, 1, 0), nil, false},
		{"one being scheduled or bound", sched(0, 0, 1, 0), nil, false},
		{"parked against a cache that still holds an ended pod", stale, nil, false},
		{"a stale cache decides nothing when no pod is parked unschedulable", staleNoneParked, nil, true},
		{"the watcher saw the parked pods parked", sched(0, 0, 1, 1), []types.UID{"a", "b"}, true},
		{"the watcher has not seen a parked pod bound yet", sched(0, 0, 1, 1), []types.UID{"a", "c"}, false},
		{"a pod the watcher saw parked is gone", sched(0, 0, 1, 1), []types.UID{"a", "x"}, true},
	} {
		if ok, why, err := schedulerCheck(tc.src, v, func() []types.UID { return tc.parked })(context.Background()); err != nil || ok != tc.ok {
			t.Errorf("%s: ok %v (%s) err %v, want %v", tc.name, ok, why, err, tc.ok)
		}
	}
}

// TestTimersHoldUntilKueueActs: a waitForPodsReady timeout stops the clock at its trace time and
// holds it there until the Workload shows Kueue's eviction.
func TestTimersHoldUntilKueueActs(t *testing.T) {
	clk := simclock.New(simclock.Options{Settle: -1})
	tm := newTimers(KueueTimers{PodsReadyTimeout: 300, BackoffBase: 60, BackoffMax: 3600}, clk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk.Start(ctx)
	u := &unit{key: "w", admitted: 100}
	wl := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}, {Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue}}}}
	tm.workload(u, wl, 100)
	hold := simclock.Key{Kind: simclock.KindTimer, ID: "w"}
	await(t, "timeout hold", func() bool { return clk.Held(hold) })
	if got := clk.Now(); got != 400 {
		t.Fatalf("clock at %g when the timeout is due, want 400 (admitted at 100 + 300)", got)
	}
	// Kueue evicts: not admitted any more, requeued after backoff (count 1 → base).
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPodsReadyTimeout},
		{Type: kueue.WorkloadRequeued, Status: metav1.ConditionFalse, Reason: kueue.WorkloadEvictedByPodsReadyTimeout}}
	wl.Status.RequeueState = &kueue.RequeueState{Count: ptr.To[int32](1), RequeueAt: &metav1.Time{}}
	tm.workload(u, wl, clk.Now())
	if clk.Held(hold) {
		t.Fatal("the timeout's hold outlived Kueue's eviction")
	}
	await(t, "backoff hold", func() bool { return clk.Held(hold) })
	if got := clk.Now(); got != 460 {
		t.Fatalf("clock at %g when the backoff ends, want 460", got)
	}
	wl.Status.Conditions[1].Status = metav1.ConditionTrue
	tm.workload(u, wl, clk.Now())
	if clk.Held(hold) {
		t.Fatal("requeued: the backoff hold must end")
	}
}

// parseExpfmt parses a whole exposition with the Prometheus text parser (BenchmarkGauges).
func parseExpfmt(b []byte) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	_, err := p.TextToMetricFamilies(bytes.NewReader(b))
	return err
}

// TestWaitSchedulerNodes: the wait ends when kube-scheduler's cache holds as many nodes as the
// API, and never on a reading taken before notBefore (the gauge may predate the nodes).
func TestWaitSchedulerNodes(t *testing.T) {
	nodes := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	cases := []struct {
		name      string
		gauge     string
		notBefore time.Time
		wantErr   string
	}{
		{"counts match", "scheduler_scheduler_cache_size{type=\"nodes\"} 2\n", time.Time{}, ""},
		{"counts differ", "scheduler_scheduler_cache_size{type=\"nodes\"} 1\n", time.Time{}, "cache holds 1 nodes, the API 2"},
		{"a matching reading too early", "scheduler_scheduler_cache_size{type=\"nodes\"} 2\n", time.Now().Add(time.Hour), "has not refreshed"},
		{"no gauge: not waited for", "scheduler_pending_pods{queue=\"active\"} 0\n", time.Time{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(nodes...)
			err := waitSchedulerNodes(t.Context(), staticMetrics(tc.gauge), cs, tc.notBefore, 200*time.Millisecond)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
