package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

const (
	ns       = "team-a"
	tick     = 200 * time.Millisecond
	speedup  = 10.0 // 2 trace seconds per tick
	duration = 100.0
)

func catalog(t *testing.T) *hw.Catalog {
	t.Helper()
	c, err := hw.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func makeNode(name string, gpus int64, labels map[string]string) *corev1.Node {
	l := map[string]string{"type": "kwok", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
	for k, v := range labels {
		l[k] = v
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"),
		"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Status: corev1.NodeStatus{Allocatable: res, Capacity: res}}
}

// podContract is a compute-bound GPU training pod of workload wl lasting duration trace seconds.
func podContract(wl string, gang int) *contract.Pod {
	return &contract.Pod{
		WorkloadID: wl, Family: trace.SingleGPUTraining, Role: "worker", GangSize: gang,
		Work: trace.Work{CPUUnits: 400, GPUUnits: 95}, DurationSec: duration,
		Sensitivity: &trace.Sensitivity{CPU: 0.3, GPU: 0.9},
		Profile:     trace.Profile{CPUUtilization: 0.5, GPUUtilization: 0.95, MemoryIntensity: 0.05},
		IntentClass: "standard",
	}
}

// makePod is a Running pod (Pending when node is "") asking for 4 cores and 1 GPU.
func makePod(name, node string, c *contract.Pod, extra map[string]string) *corev1.Pod {
	ann := c.Annotations()
	for k, v := range extra {
		ann[k] = v
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{contract.WorkloadLabel: c.WorkloadID}, Annotations: ann},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "train", Image: "fake/train",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), "nvidia.com/gpu": resource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node != "" {
		p.Status.Phase = corev1.PodRunning
	}
	return p
}

// harness runs one agent on a fake clientset. Trace time is a real event-driven simclock that the
// test stops where it wants with its own alarm (the gate): the clock moves to the earlier of the
// gate and the agent's next completion, and stays at a fired gate until the test moves it on. The
// agent's wall clock (progress writes) is fake and moves only when the test steps it.
type harness struct {
	t      *testing.T
	client kubernetes.Interface
	wall   *clocktesting.FakeClock
	clk    *simclock.Clock
	gate   *simclock.Alarm
	a      *Agent
	cfg    Config
	stop   func()
}

func start(t *testing.T, client kubernetes.Interface, cfg Config) *harness {
	t.Helper()
	return startOn(t, client, cfg, nil)
}

// startOn starts an agent on clk (nil: a new clock stopped at trace time 0).
func startOn(t *testing.T, client kubernetes.Interface, cfg Config, h0 *harness) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, client: client}
	if h0 != nil {
		h.wall, h.clk, h.gate = h0.wall, h0.clk, h0.gate
	} else {
		h.wall = clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		h.clk = simclock.New(simclock.Options{Settle: -1})
		h.gate = h.clk.NewAlarm("test", simclock.OrderSample)
		h.gate.Set(0)
	}
	cfg.Trace, cfg.Wall = h.clk, h.wall
	if cfg.CompleteVia == "" {
		cfg.CompleteVia = CompleteViaStage
	}
	a, err := New(cfg, client, catalog(t))
	if err != nil {
		t.Fatal(err)
	}
	h.a, h.cfg = a, a.cfg
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.Run(ctx); err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	h.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(h.stop)
	if h0 == nil {
		h.clk.Start(t.Context()) // outlives the agent: a test may start another on the same clock
		h.waitGate()
	}
	h.until("agent flush ticker", func() (bool, string) { return h.wall.HasWaiters(), "no ticker yet" })
	return h
}

// until polls cond with a wall-clock deadline.
func (h *harness) until(what string, cond func() (bool, string)) {
	h.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		ok, d := cond()
		last = d
		return ok, nil
	})
	if err != nil {
		h.t.Fatalf("%s: %v (last: %s)", what, err, last)
	}
}

func (h *harness) waitGate() {
	h.t.Helper()
	select {
	case <-h.gate.C():
	case <-time.After(20 * time.Second):
		h.t.Fatalf("trace clock never reached the test's gate (now %g; %s)", h.clk.Now(), h.clk.Blockers())
	}
}

// advance lets trace time run traceSec further and stops it there; the agent acts on everything
// due on the way (its completions stop the clock too).
func (h *harness) advance(traceSec float64) {
	h.t.Helper()
	target := h.clk.Now() + traceSec
	h.gate.Set(target)
	h.waitGate()
	if got := h.clk.Now(); got != target {
		h.t.Fatalf("trace clock at %g, want the gate's %g", got, target)
	}
}

// flush steps the agent's wall clock by a checkpoint interval: it writes progress and publishes
// node metrics, after bringing its pods to the clock's time.
func (h *harness) flush() {
	h.wall.Step(h.cfg.CheckpointInterval)
}

// started waits until the agent runs n pods.
func (h *harness) started(n int) {
	h.t.Helper()
	h.until(fmt.Sprintf("%d pods started", n), func() (bool, string) {
		s := h.a.Stats()
		return s.Started == n, fmt.Sprintf("%+v", s)
	})
}

func (h *harness) pod(name string) *corev1.Pod {
	h.t.Helper()
	p, err := h.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// completed waits for the pod's completion write and returns the pod.
func (h *harness) completed(name string) *corev1.Pod {
	h.t.Helper()
	var p *corev1.Pod
	h.until("completion of "+name, func() (bool, string) {
		p = h.pod(name)
		_, ok := p.Annotations[contract.Complete]
		return ok && h.a.Stats().Backlog == 0, fmt.Sprintf("annotations %v", p.Annotations)
	})
	return p
}

func annFloat(t *testing.T, p *corev1.Pod, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(p.Annotations[key], 64)
	if err != nil {
		t.Fatalf("pod %s: annotation %s: %v", p.Name, key, err)
	}
	return v
}

func create(t *testing.T, c kubernetes.Interface, objs ...any) {
	t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Node:
			_, err = c.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = c.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// predict runs the engine alone: one pod on one node, capW applied from trace time capAt.
func predict(t *testing.T, c *contract.Pod, capW, capAt float64) engine.Finished {
	t.Helper()
	cat := catalog(t)
	e := engine.New(cat)
	nid, err := e.AddNode(engine.NodeSpec{Name: "n", GPUFamily: "H100-SXM", GPUs: 8, CPUCores: 96})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := e.AddPod(engine.PodSpec{Key: "p", CPURequest: 4, GPURequest: 1, CPUUnits: c.Work.CPUUnits, GPUUnits: c.Work.GPUUnits,
		DurationSec: c.DurationSec, Sensitivity: engine.Sensitivity{CPU: c.Sensitivity.CPU, GPU: c.Sensitivity.GPU},
		Profile: hw.Profile{CPUUtilization: c.Profile.CPUUtilization, GPUUtilization: c.Profile.GPUUtilization, MemoryIntensity: c.Profile.MemoryIntensity}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(pid, nid); err != nil {
		t.Fatal(err)
	}
	step := tick.Seconds() * speedup
	for i := 0; i < 10000; i++ {
		if capW > 0 && e.Now() >= capAt-1e-9 {
			e.SetGPUCap(nid, capW)
			capW = 0
		}
		if f := e.Tick(step); len(f) > 0 {
			return f[0]
		}
	}
	t.Fatal("predicted pod never finished")
	return engine.Finished{}
}

func TestPodCompletes(t *testing.T) {
	for _, via := range []string{CompleteViaStage, CompleteViaStatus} {
		t.Run(via, func(t *testing.T) {
			c := podContract("wl-1", 0)
			client := fake.NewClientset()
			create(t, client, makeNode("n1", 8, nil), makePod("p1", "n1", c, nil))
			h := start(t, client, Config{CompleteVia: via})
			h.started(1)
			h.advance(duration - 2)
			if _, done := h.pod("p1").Annotations[contract.Complete]; done {
				t.Fatalf("pod completed before its duration")
			}
			h.advance(2)
			p := h.completed("p1")
			want := predict(t, c, 0, 0)
			if got := p.Annotations[contract.Complete]; got != "true" {
				t.Errorf("%s = %q, want true", contract.Complete, got)
			}
			if got := annFloat(t, p, contract.RunTraceSec); got != duration {
				t.Errorf("run time %g trace s, want exactly %g (alone on an uncapped node)", got, duration)
			}
			if got, w := annFloat(t, p, contract.EnergyJoules), want.EnergyJ; got < w-0.1 || got > w+0.1 {
				t.Errorf("energy %g J, engine predicts %g J", got, w)
			}
			h.until("completion metric", func() (bool, string) {
				got := gather(t, h.a, "kueuelab_completions_total")
				return got["succeeded"] == 1, fmt.Sprint(got)
			})
			h.flush()
			h.until("node energy metric", func() (bool, string) {
				e := gather(t, h.a, "kueuelab_node_energy_joules_total")["n1"]
				return e >= want.EnergyJ, fmt.Sprintf("node energy %g J, the pod's %g J", e, want.EnergyJ)
			})
			if got := annFloat(t, p, contract.FinishedTraceSec); got != duration {
				t.Errorf("finished at trace %g, want %g", got, duration)
			}
			if via == CompleteViaStatus {
				if p.Status.Phase != corev1.PodSucceeded {
					t.Errorf("phase %s, want Succeeded", p.Status.Phase)
				}
				if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil ||
					p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
					t.Errorf("container statuses %+v, want one terminated with exit code 0", p.Status.ContainerStatuses)
				}
			} else if p.Status.Phase != corev1.PodRunning {
				t.Errorf("phase %s: the stage, not the agent, ends the pod", p.Status.Phase)
			}
		})
	}
}

// TestClockDrivesProgress checks that the agent advances pods by the trace clock alone: while the
// runner holds the clock (the control plane owes a step), wall time passes and no work is done.
func TestClockDrivesProgress(t *testing.T) {
	c := podContract("wl-1", 0)
	client := fake.NewClientset()
	create(t, client, makeNode("n1", 8, nil), makePod("p1", "n1", c, nil))
	h := start(t, client, Config{CompleteVia: CompleteViaStatus})
	h.started(1)
	hold := simclock.Key{Kind: simclock.KindPods, ID: "test"}
	h.clk.Hold(hold)
	h.gate.Set(2 * duration) // armed past the pod's end: only the hold keeps the clock still
	for range 20 {
		h.flush() // wall time passes: progress writes, syncs
	}
	h.until("progress written", func() (bool, string) {
		pr, ok, err := parseProgress(h.pod("p1"))
		return ok && err == nil, fmt.Sprintf("%+v %v", pr, err)
	})
	if pr, _, _ := parseProgress(h.pod("p1")); pr.RunSec != 0 || h.clk.Now() != 0 {
		t.Fatalf("held clock: trace %g, pod ran %g s", h.clk.Now(), pr.RunSec)
	}
	h.clk.Release(hold)
	h.gate.Set(duration - 1)
	h.waitGate()
	if _, done := h.pod("p1").Annotations[contract.Complete]; done {
		t.Fatalf("pod completed at trace %g of its %g s", duration-1, duration)
	}
	h.advance(1.5)
	p := h.completed("p1")
	if got := annFloat(t, p, contract.RunTraceSec); got != duration {
		t.Errorf("run time %g trace s, want exactly %g", got, duration)
	}
}

// TestHandoff checks the holds the agent shares with a runner: it acknowledges a runner's hold on
// a pod's start once it runs the pod, and holds the clock from a completion until the runner
// releases it (the runner sees the pod end).
func TestHandoff(t *testing.T) {
	c := podContract("wl-1", 0)
	client := fake.NewClientset()
	pod := makePod("p1", "n1", c, nil)
	create(t, client, makeNode("n1", 8, nil), pod)
	h := startOnHandoff(t, client)
	start := simclock.PodStart(pod.UID)
	h.clk.Hold(start) // the runner's hold; the agent may have acknowledged it already
	h.started(1)
	h.until("start acknowledged", func() (bool, string) { return !h.clk.Held(start), "start held" })
	done := simclock.PodDone(pod.UID)
	h.gate.Set(2 * duration)
	h.until("completion held", func() (bool, string) { return h.clk.Held(done), fmt.Sprintf("trace %g", h.clk.Now()) })
	if got := h.clk.Now(); got != duration {
		t.Fatalf("clock at %g while the completion is owed, want %g", got, duration)
	}
	h.completed("p1")
	h.clk.Release(done) // what the runner does when it sees the pod Succeeded
	h.waitGate()
}

func startOnHandoff(t *testing.T, client kubernetes.Interface) *harness {
	t.Helper()
	return start(t, client, Config{CompleteVia: CompleteViaStatus, Handoff: func(*corev1.Pod) bool { return true }})
}

func TestGangWaitsForAllMembers(t *testing.T) {
	c := podContract("wl-gang", 2)
	client := fake.NewClientset()
	create(t, client, makeNode("n1", 8, nil), makePod("g-0", "n1", c, nil), makePod("g-1", "", c, nil))
	h := start(t, client, Config{GangBlockedAfter: 50})
	h.started(1)
	h.advance(2 * duration)
	if s := h.a.Stats(); s.Progressing != 0 || s.GangBlocked != 1 {
		t.Fatalf("stats %+v: want 0 progressing, 1 gang-blocked pod", s)
	}
	if _, done := h.pod("g-0").Annotations[contract.Complete]; done {
		t.Fatal("a gang member completed while its peer was pending")
	}
	h.until("GangBlocked event", func() (bool, string) {
		ev, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, e := range ev.Items {
			if e.Reason == "GangBlocked" && e.InvolvedObject.Name == "g-0" {
				n += int(max(e.Count, 1))
			}
		}
		return n == 1, fmt.Sprintf("%d GangBlocked events on g-0", n)
	})
	// The peer gets scheduled: the gang then runs for exactly its duration.
	p := h.pod("g-1")
	p.Spec.NodeName, p.Status.Phase = "n1", corev1.PodRunning
	if _, err := client.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.started(2)
	h.advance(duration)
	for _, name := range []string{"g-0", "g-1"} {
		p := h.completed(name)
		if got := p.Annotations[contract.Complete]; got != "true" {
			t.Errorf("%s: %s = %q", name, contract.Complete, got)
		}
	}
	if got := annFloat(t, h.pod("g-1"), contract.RunTraceSec); got != duration {
		t.Errorf("g-1 ran %g trace s, want %g", got, duration)
	}
}

func TestPowerCapSlowsPod(t *testing.T) {
	c := podContract("wl-cap", 0)
	client := fake.NewClientset()
	create(t, client, makeNode("fast", 8, nil), makeNode("slow", 8, nil),
		makePod("p-fast", "fast", c, nil), makePod("p-slow", "slow", podContract("wl-cap2", 0), nil))
	h := start(t, client, Config{})
	h.started(2)
	h.advance(20)
	n, err := client.CoreV1().Nodes().Get(context.Background(), "slow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[contract.PowerCap] = "eco"
	if _, err := client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("cap applied", func() (bool, string) { s := h.a.Stats(); return s.CapChanges == 1, fmt.Sprintf("%+v", s) })
	capAt := h.a.Stats().TraceSec
	h.advance(duration + 40 - capAt)
	fast, slow := h.completed("p-fast"), h.completed("p-slow")
	fr, sr := annFloat(t, fast, contract.RunTraceSec), annFloat(t, slow, contract.RunTraceSec)
	if !(sr > fr*1.05) {
		t.Errorf("capped pod ran %g trace s, uncapped %g: want the capped one measurably (> 5%%) slower", sr, fr)
	}
	g, _ := catalog(t).GPU("H100-SXM")
	capW, _ := catalog(t).ParseCap("eco", g)
	want := predict(t, c, capW, capAt)
	if d := sr - want.AtSec; d < -1e-3 || d > 1e-3 { // the annotation has millisecond precision
		t.Errorf("capped pod ran %g trace s, engine predicts %g", sr, want.AtSec)
	}
	if e, w := annFloat(t, slow, contract.EnergyJoules), want.EnergyJ; e < w-0.1 || e > w+0.1 {
		t.Errorf("capped pod energy %g J, engine predicts %g J", e, w)
	}
}

func TestRestartResumesFromProgress(t *testing.T) {
	c := podContract("wl-restart", 0)
	client := fake.NewClientset()
	create(t, client, makeNode("n1", 8, nil), makePod("p1", "n1", c, nil))
	cfg := Config{CheckpointInterval: time.Second}
	h := start(t, client, cfg)
	h.started(1)
	h.advance(36)
	h.flush()
	h.until("progress written", func() (bool, string) {
		pr, ok, err := parseProgress(h.pod("p1"))
		return ok && err == nil && pr.RunSec == 36, fmt.Sprintf("%+v %v", pr, err)
	})
	h.advance(10) // run on, but killed before the next progress write: these 10 s are lost
	h.stop()
	pr, _, _ := parseProgress(h.pod("p1"))
	h2 := startOn(t, client, cfg, h)
	h2.started(1)
	h2.advance(duration - pr.RunSec)
	p := h2.completed("p1")
	if got := annFloat(t, p, contract.RunTraceSec); got != duration {
		t.Errorf("run time over both agents %g trace s, want %g", got, duration)
	}
}

func TestFailureInjection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		rate    float64
		verdict string
		runSec  float64 // 0: any
	}{
		{name: "annotation true fails at the end", ann: map[string]string{contract.InjectFailure: "true"}, verdict: "fail", runSec: duration},
		{name: "annotation fraction fails midway", ann: map[string]string{contract.InjectFailure: "0.5"}, verdict: "fail", runSec: duration / 2},
		{name: "annotation false wins over rate", ann: map[string]string{contract.InjectFailure: "false"}, rate: 1, verdict: "true", runSec: duration},
		{name: "rate 1 fails", rate: 1, verdict: "fail"},
		{name: "rate 0 succeeds", verdict: "true", runSec: duration},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			create(t, client, makeNode("n1", 8, nil), makePod("p1", "n1", podContract("wl-f", 0), tc.ann))
			h := start(t, client, Config{FailureRate: tc.rate, Seed: 7})
			h.started(1)
			h.advance(duration)
			p := h.completed("p1")
			if got := p.Annotations[contract.Complete]; got != tc.verdict {
				t.Errorf("%s = %q, want %q", contract.Complete, got, tc.verdict)
			}
			got := annFloat(t, p, contract.RunTraceSec)
			if tc.runSec > 0 && (got < tc.runSec-1e-6 || got > tc.runSec+1e-6) {
				t.Errorf("ran %g trace s, want %g", got, tc.runSec)
			}
			if tc.runSec == 0 && !(got > 0 && got < duration) {
				t.Errorf("ran %g trace s, want a failure before the end", got)
			}
		})
	}
}

func TestEvictedPodRestarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ckpt   float64
		runSec float64 // of the replacement
	}{
		{name: "from zero", runSec: duration},
		{name: "from the workload checkpoint", ckpt: 30, runSec: duration - 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := podContract("wl-evict", 0)
			c.CheckpointIntervalSec = tc.ckpt
			client := fake.NewClientset()
			create(t, client, makeNode("n1", 8, nil), makePod("p-old", "n1", c, nil))
			h := start(t, client, Config{})
			h.started(1)
			h.advance(70)
			if err := client.CoreV1().Pods(ns).Delete(context.Background(), "p-old", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.until("evicted pod forgotten", func() (bool, string) { s := h.a.Stats(); return s.Tracked == 0, fmt.Sprintf("%+v", s) })
			create(t, client, makePod("p-new", "n1", c, nil))
			h.started(1)
			h.advance(tc.runSec)
			p := h.completed("p-new")
			if got := annFloat(t, p, contract.RunTraceSec); got != tc.runSec {
				t.Errorf("replacement ran %g trace s, want %g", got, tc.runSec)
			}
		})
	}
}

// TestEvictedTwiceResumesFromTheLaterCheckpoint: a pod checkpointing every 30 s is evicted after
// 40 s (checkpoint at 30); its replacement resumes from 30 and is evicted after 40 s more
// (checkpoint at 60); the third resumes from 60 and runs the 40 s left, not 70 from the first
// checkpoint.
func TestEvictedTwiceResumesFromTheLaterCheckpoint(t *testing.T) {
	c := podContract("wl-evict2", 0)
	c.CheckpointIntervalSec = 30
	client := fake.NewClientset()
	create(t, client, makeNode("n1", 8, nil), makePod("p-1", "n1", c, nil))
	h := start(t, client, Config{})
	for i, name := range []string{"p-1", "p-2"} {
		h.started(1)
		h.advance(40)
		if err := client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		h.until("evicted pod forgotten", func() (bool, string) { s := h.a.Stats(); return s.Tracked == 0, fmt.Sprintf("%+v", s) })
		create(t, client, makePod(fmt.Sprintf("p-%d", i+2), "n1", c, nil))
	}
	h.started(1)
	h.advance(duration - 60)
	p := h.completed("p-3")
	if got := annFloat(t, p, contract.RunTraceSec); got != duration-60 {
		t.Errorf("third pod ran %g trace s, want %g", got, duration-60)
	}
}

func TestProgressAnnotationRoundTrip(t *testing.T) {
	pr := Progress{Snapshot: engine.Snapshot{RemainingSec: 40, CheckpointSec: 40, EnergyJ: 12}, RunSec: 60, Fraction: 0.6}
	b, err := json.Marshal(pr)
	if err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{contract.Progress: string(b)}}}
	got, ok, err := parseProgress(p)
	if err != nil || !ok || got != pr {
		t.Fatalf("parseProgress(%s) = %+v, %v, %v", b, got, ok, err)
	}
	p.Annotations[contract.Progress] = "{"
	if _, _, err := parseProgress(p); err == nil || !strings.Contains(err.Error(), contract.Progress) {
		t.Errorf("bad JSON: error %v, want one naming %s", err, contract.Progress)
	}
}

func TestConfigErrors(t *testing.T) {
	clk := simclock.New(simclock.Options{})
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "trace clock"},
		{Config{Trace: clk, FailureRate: 2}, "failure rate"},
		{Config{Trace: clk, CompleteVia: "kubelet"}, "complete via"},
		{Config{Trace: clk, PodSelector: "a in (b"}, "pod selector"},
		{Config{Trace: clk, CheckpointInterval: -time.Second}, "checkpoint interval"},
	} {
		_, err := New(tc.cfg, fake.NewClientset(), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) error %v, want one mentioning %q", tc.cfg, err, tc.want)
		}
	}
}

func TestNodeSpec(t *testing.T) {
	cat := catalog(t)
	for _, tc := range []struct {
		name     string
		node     *corev1.Node
		family   string
		gpus     int
		replicas int
		err      bool
	}{
		{"product label", makeNode("a", 8, nil), "H100-SXM", 8, 0, false},
		{"family label wins", makeNode("b", 4, map[string]string{contract.GPUFamily: "L40S"}), "L40S", 4, 0, false},
		{"cpu node", makeNode("c", 0, nil), "", 0, 0, false},
		{"unknown family", makeNode("d", 2, map[string]string{"nvidia.com/gpu.product": "NVIDIA-GTX-1080"}), "", 2, 0, true},
		// GPU Feature Discovery's labels of GPUs the device plugin time-slices: 8 replicas are 2 GPUs.
		{"time-sliced", makeNode("e", 8, map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
			contract.GFDSharingStrategy: contract.SharingTimeSlicing, contract.GFDReplicas: "4"}), "H100-SXM", 2, 4, false},
		{"replicas that are no count", makeNode("f", 8, map[string]string{contract.GFDSharingStrategy: contract.SharingTimeSlicing, contract.GFDReplicas: "four"}), "", 0, 0, true},
		{"replicas that do not divide", makeNode("g", 6, map[string]string{contract.GFDSharingStrategy: contract.SharingTimeSlicing, contract.GFDReplicas: "4"}), "", 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := nodeSpec(tc.node, cat)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want error %v", err, tc.err)
			}
			if !tc.err && (s.GPUFamily != tc.family || s.GPUs != tc.gpus || s.GPUReplicas != tc.replicas || s.CPUCores != 96) {
				t.Errorf("spec %+v, want family %q, %d GPUs of %d replicas, 96 cores", s, tc.family, tc.gpus, tc.replicas)
			}
		})
	}
}

// gather returns a metric's values by their first label value.
func gather(t *testing.T, a *Agent, name string) map[string]float64 {
	t.Helper()
	mfs, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			if l := m.GetLabel(); len(l) > 0 {
				out[l[0].GetValue()] = v
			} else {
				out[""] = v
			}
		}
	}
	return out
}

// predictEnergy runs the engine alone for sec trace seconds, in the agent's ticks, with n pods of
// c (a gang when c says so) on one node, and returns the energy it attributes to the first.
func predictEnergy(t *testing.T, c *contract.Pod, n int, sec float64) float64 {
	t.Helper()
	e := engine.New(catalog(t))
	nid, err := e.AddNode(engine.NodeSpec{Name: "n", GPUFamily: "H100-SXM", GPUs: 8, CPUCores: 96})
	if err != nil {
		t.Fatal(err)
	}
	var first engine.PodID
	for i := range n {
		s := engine.PodSpec{Key: fmt.Sprintf("p%d", i), CPURequest: 4, GPURequest: 1, CPUUnits: c.Work.CPUUnits, GPUUnits: c.Work.GPUUnits,
			DurationSec: c.DurationSec, Sensitivity: engine.Sensitivity{CPU: c.Sensitivity.CPU, GPU: c.Sensitivity.GPU},
			Profile:               hw.Profile{CPUUtilization: c.Profile.CPUUtilization, GPUUtilization: c.Profile.GPUUtilization, MemoryIntensity: c.Profile.MemoryIntensity},
			CheckpointIntervalSec: c.CheckpointIntervalSec}
		if c.GangSize > 0 {
			s.GangID, s.GangSize = "g", c.GangSize
		}
		pid, err := e.AddPod(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(pid, nid); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = pid
		}
	}
	step := tick.Seconds() * speedup
	for n := int(sec/step + 0.5); n > 0; n-- {
		if f := e.Tick(step); len(f) > 0 {
			t.Fatalf("predicted pod finished at %g trace s, before %g", f[0].AtSec, sec)
		}
	}
	return e.PodEnergy(first)
}

// TestLostEnergy checks that the energy of a pod that leaves before finishing is kept for its
// workload (no energy annotation will ever report it), and that a pod that completes adds none.
func TestLostEnergy(t *testing.T) {
	const runSec = 70.0
	ctx := context.Background()
	del := func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) {
		if err := c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		gang int
		end  func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) // ends p before it finishes
	}{
		{name: "deleted", end: del},
		{name: "gang member deleted", gang: 2, end: del},
		{name: "failed by someone else", end: func(t *testing.T, c kubernetes.Interface, p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lost, done := podContract("wl-lost", tc.gang), podContract("wl-done", 0)
			lost.CheckpointIntervalSec = 30 // the checkpoint kept for a replacement must not change the energy
			client := fake.NewClientset()
			// wl-lost alone on n1, wl-done on n2: the engine alone on one node predicts the energy.
			create(t, client, makeNode("n1", 8, nil), makeNode("n2", 8, nil), makePod("p-done", "n2", done, nil))
			n := max(tc.gang, 1)
			for i := range n {
				create(t, client, makePod(fmt.Sprintf("p-lost-%d", i), "n1", lost, nil))
			}
			h := start(t, client, Config{})
			h.started(n + 1)
			h.advance(runSec)
			tc.end(t, client, h.pod("p-lost-0"))
			h.until("lost pod released", func() (bool, string) { s := h.a.Stats(); return s.Tracked == n, fmt.Sprintf("%+v", s) })
			want := predictEnergy(t, lost, n, runSec)
			got := h.a.LostEnergy()
			if j := got[ns+"/wl-lost"]; !(j > 0) || j < want-0.1 || j > want+0.1 {
				t.Errorf("lost energy of wl-lost %g J, engine accounted %g J", j, want)
			}
			if m := gather(t, h.a, "kueuelab_lost_energy_joules_total")[""]; m < want-0.1 || m > want+0.1 {
				t.Errorf("lost energy metric %g J, want %g J", m, want)
			}
			// The other pod completes, then goes: its energy is in its annotation, not lost.
			h.advance(duration - runSec)
			h.completed("p-done")
			if err := client.CoreV1().Pods(ns).Delete(ctx, "p-done", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.until("completed pod forgotten", func() (bool, string) { s := h.a.Stats(); return s.Tracked == n-1, fmt.Sprintf("%+v", s) })
			if got := h.a.LostEnergy(); len(got) != 1 {
				t.Errorf("lost energy %v after a completed pod left, want wl-lost alone", got)
			}
			// The result is a copy: the caller cannot change the agent's books.
			h.a.LostEnergy()[ns+"/wl-lost"] = -1
			if j := h.a.LostEnergy()[ns+"/wl-lost"]; j < want-0.1 || j > want+0.1 {
				t.Errorf("lost energy %g J after changing a returned map, want %g J", j, want)
			}
		})
	}
}

// TestUnrenderedPodRunsByDefaults: a pod kueuelab did not render (a user's own manifest) runs
// the trace seconds its kueuelab.io/duration-sec annotation says, alone on an idle node, and
// otherwise contract.DefaultDurationSec; its workload is its owner.
func TestUnrenderedPodRunsByDefaults(t *testing.T) {
	tests := []struct {
		name string
		ann  map[string]string
		want float64
	}{
		{"annotated", map[string]string{contract.DurationSec: "240"}, 240},
		{"default", nil, contract.DefaultDurationSec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := makePod("user-pod", "n1", podContract("ignored", 0), nil)
			p.Annotations, p.Labels = tc.ann, map[string]string{"app": "mine"}
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "my-job", UID: "j1", Controller: ptr.To(true)}}
			client := fake.NewClientset()
			create(t, client, makeNode("n1", 8, nil), p)
			h := start(t, client, Config{CompleteVia: CompleteViaStatus})
			h.started(1)
			h.advance(tc.want - 10)
			if _, done := h.pod("user-pod").Annotations[contract.Complete]; done {
				t.Fatalf("pod completed before its %g trace seconds", tc.want)
			}
			h.advance(10)
			got := h.completed("user-pod")
			if got.Status.Phase != corev1.PodSucceeded || annFloat(t, got, contract.RunTraceSec) != tc.want {
				t.Errorf("phase %s after %s trace s, want Succeeded after %g", got.Status.Phase, got.Annotations[contract.RunTraceSec], tc.want)
			}
		})
	}
	t.Run("bad run time", func(t *testing.T) {
		p := makePod("user-pod", "n1", podContract("ignored", 0), nil)
		p.Annotations = map[string]string{contract.DurationSec: "ten minutes"}
		client := fake.NewClientset()
		create(t, client, makeNode("n1", 8, nil), p)
		h := start(t, client, Config{})
		h.until("pod rejected", func() (bool, string) {
			got := gather(t, h.a, "kueuelab_bad_pods_total")[""]
			return got == 1, fmt.Sprint(got)
		})
	})
}

// TestServicePodServesUntilDeleted: a pod of a service selector (a Ray head or worker) gets its
// energy and run time written when its work is done, but stays Running; deleted afterwards, its
// energy is not counted as lost.
func TestServicePodServesUntilDeleted(t *testing.T) {
	c := podContract("wl-ray", 0)
	p := makePod("ray-worker", "n1", c, nil)
	p.Labels["ray.io/is-ray-node"] = "yes"
	client := fake.NewClientset()
	create(t, client, makeNode("n1", 8, nil), p)
	h := start(t, client, Config{CompleteVia: CompleteViaStatus})
	h.started(1)
	h.advance(duration)
	h.until("energy written", func() (bool, string) {
		got := h.pod("ray-worker")
		_, ok := got.Annotations[contract.EnergyJoules]
		return ok && h.a.Stats().Backlog == 0, fmt.Sprint(got.Annotations)
	})
	got := h.pod("ray-worker")
	if _, done := got.Annotations[contract.Complete]; done || got.Status.Phase != corev1.PodRunning {
		t.Errorf("service pod ended: phase %s, %s=%q", got.Status.Phase, contract.Complete, got.Annotations[contract.Complete])
	}
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "ray-worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("pod forgotten", func() (bool, string) { s := h.a.Stats(); return s.Tracked == 0, fmt.Sprintf("%+v", s) })
	if lost := h.a.LostEnergy(); len(lost) != 0 {
		t.Errorf("lost energy %v for a service pod deleted after its work", lost)
	}
}

// TestNodeCapacityArrivesAfterCreation: a node created without status (KWOK nodes get their
// capacity in a later status write, as runtime/cluster applies them) is modelled once the
// capacity is there, so a pod on it runs rather than being refused for lack of GPUs.
func TestNodeCapacityArrivesAfterCreation(t *testing.T) {
	client := fake.NewClientset()
	n := makeNode("n1", 8, nil)
	status := n.Status
	n.Status = corev1.NodeStatus{}
	create(t, client, n)
	h := start(t, client, Config{CompleteVia: CompleteViaStatus})
	create(t, client, makePod("p1", "n1", podContract("wl-late", 0), nil))
	h.advance(2 * tick.Seconds() * speedup)
	if s := h.a.Stats(); s.Nodes != 0 || s.Started != 0 {
		t.Fatalf("stats %+v before the node has capacity, want no node and no pod started", s)
	}
	n.Status = status
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.started(1)
	h.advance(duration)
	if p := h.completed("p1"); p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("phase %s, want Succeeded", p.Status.Phase)
	}
}
