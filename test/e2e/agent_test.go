package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// e2eLabel scopes each test's agent to that test's pods.
const e2eLabel = "kueuelab.io/e2e"

func clientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", shared.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 200, 400
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// startAgent runs an agent in this process for the test's pods, on its own clock without holds
// (trace time = wall time × speedup from the agent's start), as the chart's agent runs in a
// cluster; stop (idempotent) kills it.
func startAgent(t *testing.T, cs kubernetes.Interface, test string, speedup float64, cfg agent.Config) (a *agent.Agent, stop func()) {
	t.Helper()
	cfg.PodSelector = e2eLabel + "=" + test
	cfg.Trace = simclock.New(simclock.Options{Disabled: true, MaxRate: speedup})
	a, err := agent.New(cfg, cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Trace.Start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return a, stop
}

// agentNode is a KWOK node with 8 H100 GPUs that carries kueuelab's family label but not the
// vendor product label, so the Kueue flavors of other tests never place pods on it.
func agentNode(t *testing.T, name string, labels, annotations map[string]string) *corev1.Node {
	t.Helper()
	n := cluster.DefaultNodes(1, 8)[0].(*corev1.Node)
	n.Name = name
	delete(n.Labels, gpuProduct)
	n.Labels["kubernetes.io/hostname"] = name
	n.Labels[contract.GPUFamily] = "H100-SXM"
	for k, v := range labels {
		n.Labels[k] = v
	}
	for k, v := range annotations {
		n.Annotations[k] = v
	}
	return n
}

func createNode(t *testing.T, n *corev1.Node) {
	t.Helper()
	create(t, n)
	t.Cleanup(func() { _ = shared.client.Delete(context.Background(), n) })
}

// trainContract is a compute-bound single-GPU training pod of durationSec trace seconds.
func trainContract(wl string, gang int, durationSec float64) *contract.Pod {
	return &contract.Pod{
		WorkloadID: wl, Family: trace.SingleGPUTraining, Role: "worker", GangSize: gang,
		Work: trace.Work{CPUUnits: durationSec * 0.5, GPUUnits: durationSec * 0.95}, DurationSec: durationSec,
		Sensitivity: &trace.Sensitivity{CPU: 0.3, GPU: 0.9},
		Profile:     trace.Profile{CPUUtilization: 0.5, GPUUtilization: 0.95, MemoryIntensity: 0.05},
		IntentClass: "standard",
	}
}

// contractTemplate is a pod template with the contract annotations, 1 core and 1 GPU, pinned to host.
func contractTemplate(test, host string, c *contract.Pod) corev1.PodTemplateSpec {
	tpl := podTemplate("train", 1)
	tpl.Labels = map[string]string{contract.WorkloadLabel: c.WorkloadID, e2eLabel: test}
	tpl.Annotations = c.Annotations()
	tpl.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": host}
	return tpl
}

func contractPod(ns, name, test, host string, c *contract.Pod) *corev1.Pod {
	tpl := contractTemplate(test, host, c)
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tpl.Labels, Annotations: tpl.Annotations}, Spec: tpl.Spec}
}

func annotation(t *testing.T, p *corev1.Pod, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(p.Annotations[key], 64)
	if err != nil {
		t.Fatalf("pod %s: annotation %s=%q: %v", p.Name, key, p.Annotations[key], err)
	}
	return v
}

// awaitPhase waits until every pod reaches phase and returns them re-read.
func awaitPhase(t *testing.T, pods []*corev1.Pod, phase corev1.PodPhase) {
	t.Helper()
	eventually(t, fmt.Sprintf("%d pods %s", len(pods), phase), func(ctx context.Context) (bool, string, error) {
		for _, p := range pods {
			if err := get(ctx, p); err != nil {
				return false, "", err
			}
			if p.Status.Phase != phase {
				return false, fmt.Sprintf("%s is %s", p.Name, p.Status.Phase), nil
			}
		}
		return true, "", nil
	})
}

// predictRun is what the engine alone says for one such pod on an 8-GPU H100 node with capW.
func predictRun(t *testing.T, c *contract.Pod, capW float64) engine.Finished {
	t.Helper()
	cat, err := hw.DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(cat)
	nid, err := e.AddNode(engine.NodeSpec{Name: "n", GPUFamily: "H100-SXM", GPUs: 8, CPUCores: 96, GPUCapW: capW})
	if err != nil {
		t.Fatal(err)
	}
	pid, err := e.AddPod(engine.PodSpec{Key: "p", CPURequest: 1, GPURequest: 1, CPUUnits: c.Work.CPUUnits, GPUUnits: c.Work.GPUUnits,
		DurationSec: c.DurationSec, Sensitivity: engine.Sensitivity{CPU: c.Sensitivity.CPU, GPU: c.Sensitivity.GPU},
		Profile: hw.Profile{CPUUtilization: c.Profile.CPUUtilization, GPUUtilization: c.Profile.GPUUtilization, MemoryIntensity: c.Profile.MemoryIntensity}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(pid, nid); err != nil {
		t.Fatal(err)
	}
	if f := e.Tick(10 * c.DurationSec); len(f) == 1 {
		return f[0]
	}
	t.Fatal("engine: pod did not finish")
	return engine.Finished{}
}

// TestAgentGang: a 2-pod gang makes no progress while one pod cannot be scheduled, then finishes
// in its trace duration ÷ speedup once both run (tolerance: 2 ticks early, 1.5 s late for the
// completion write, KWOK or status, and the test's 250 ms polling).
func TestAgentGang(t *testing.T) {
	const (
		test, ns = "gang", "e2e-agent-gang"
		speedup  = 20.0
		duration = 60.0 // 3 s of wall time
	)
	setup(t, ns)
	createNode(t, agentNode(t, "kwok-agent-gang-a", nil, nil))
	cs := clientset(t)
	// Progress writes every second also bring the agent's trace time up to date for the test.
	a, _ := startAgent(t, cs, test, speedup, agent.Config{GangBlockedAfter: 20, CheckpointInterval: time.Second})
	c := trainContract("gang-wl", 2, duration)
	p0 := contractPod(ns, "gang-0", test, "kwok-agent-gang-a", c)
	p1 := contractPod(ns, "gang-1", test, "kwok-agent-gang-b", c) // its node does not exist yet
	create(t, p0)
	create(t, p1)
	awaitPhase(t, []*corev1.Pod{p0}, corev1.PodRunning)
	var t0 float64
	eventually(t, "agent tracks gang-0", func(context.Context) (bool, string, error) {
		s := a.Stats()
		t0 = s.TraceSec
		return s.Started == 1, fmt.Sprintf("%+v", s), nil
	})
	// Blocked for twice the duration: a pod of its own would have finished twice over.
	eventually(t, "gang-0 blocked for 2× its duration", func(ctx context.Context) (bool, string, error) {
		s := a.Stats()
		if s.Progressing != 0 || (s.Ticks > 1 && s.GangBlocked != 1) {
			return false, "", fmt.Errorf("gang progressed while a member is pending: %+v", s)
		}
		if err := get(ctx, p0); err != nil {
			return false, "", err
		}
		if _, done := p0.Annotations[contract.Complete]; done {
			return false, "", fmt.Errorf("gang-0 completed while gang-1 was pending")
		}
		return s.TraceSec-t0 >= 2*duration, fmt.Sprintf("%+v", s), nil
	})
	if err := get(t.Context(), p1); err != nil || p1.Status.Phase != corev1.PodPending {
		t.Fatalf("gang-1 phase %s (%v), want Pending", p1.Status.Phase, err)
	}
	eventually(t, "GangBlocked event on gang-0", func(ctx context.Context) (bool, string, error) {
		evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=gang-0,reason=GangBlocked"})
		if err != nil {
			return false, "", err
		}
		return len(evs.Items) == 1, fmt.Sprintf("%d events", len(evs.Items)), nil
	})

	createNode(t, agentNode(t, "kwok-agent-gang-b", nil, nil))
	awaitPhase(t, []*corev1.Pod{p1}, corev1.PodRunning)
	start := time.Now()
	var end time.Time
	eventually(t, "gang Succeeded", func(ctx context.Context) (bool, string, error) {
		for _, p := range []*corev1.Pod{p0, p1} {
			if err := get(ctx, p); err != nil {
				return false, "", err
			}
			if p.Status.Phase != corev1.PodSucceeded {
				return false, p.Name + " " + string(p.Status.Phase), nil
			}
		}
		end = time.Now()
		return true, "", nil
	})
	// Wall time is logged, not checked: when the test sees a pod Running depends on its 250 ms
	// polling and on the machine's load. The trace run times say it deterministically: gang-1 ran
	// exactly its work, and gang-0, Running but blocked for 2× its duration first, finished with it.
	wall, want := end.Sub(start), time.Duration(duration/speedup*float64(time.Second))
	t.Logf("gang: %.0f trace s at speedup %g finished %s after both pods ran (ideal %s)", duration, speedup, wall.Round(time.Millisecond), want)
	if got := annotation(t, p1, contract.RunTraceSec); got != duration {
		t.Errorf("gang-1 ran %g trace s, want exactly %g", got, duration)
	}
	if got := annotation(t, p0, contract.RunTraceSec); got < 3*duration {
		t.Errorf("gang-0 ran %g trace s, want ≥ %g: blocked 2× its duration, then its work", got, 3*duration)
	}
}

// TestAgentPowerCap: the same work on a node capped to the eco profile finishes measurably later,
// with the run time and energy the engine predicts.
func TestAgentPowerCap(t *testing.T) {
	const (
		test, ns = "cap", "e2e-agent-cap"
		speedup  = 40.0
		duration = 120.0
	)
	setup(t, ns)
	createNode(t, agentNode(t, "kwok-agent-uncapped", nil, nil))
	createNode(t, agentNode(t, "kwok-agent-capped", nil, map[string]string{contract.PowerCap: "eco"}))
	cs := clientset(t)
	startAgent(t, cs, test, speedup, agent.Config{CompleteVia: agent.CompleteViaStage})
	fast := contractPod(ns, "uncapped", test, "kwok-agent-uncapped", trainContract("cap-a", 0, duration))
	slow := contractPod(ns, "capped", test, "kwok-agent-capped", trainContract("cap-b", 0, duration))
	create(t, fast)
	create(t, slow)
	awaitPhase(t, []*corev1.Pod{fast, slow}, corev1.PodSucceeded)

	cat, _ := hw.DefaultCatalog()
	g, _ := cat.GPU("H100-SXM")
	capW, err := cat.ParseCap("eco", g)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		capW float64
	}{{fast, 0}, {slow, capW}} {
		want := predictRun(t, trainContract("x", 0, duration), tc.capW)
		run, energy := annotation(t, tc.pod, contract.RunTraceSec), annotation(t, tc.pod, contract.EnergyJoules)
		t.Logf("%s (cap %g W): ran %.3f trace s, %.0f J; engine predicts %.3f s, %.0f J", tc.pod.Name, tc.capW, run, energy, want.AtSec, want.EnergyJ)
		if d := run - want.AtSec; d < -1e-3 || d > 1e-3 {
			t.Errorf("%s ran %g trace s, engine predicts %g", tc.pod.Name, run, want.AtSec)
		}
		if d := energy - want.EnergyJ; d < -0.001*want.EnergyJ || d > 0.001*want.EnergyJ {
			t.Errorf("%s used %g J, engine predicts %g J", tc.pod.Name, energy, want.EnergyJ)
		}
	}
	if fr, sr := annotation(t, fast, contract.RunTraceSec), annotation(t, slow, contract.RunTraceSec); !(sr > 1.05*fr) {
		t.Errorf("capped pod ran %g trace s, uncapped %g: want the capped one measurably (> 5%%) slower", sr, fr)
	}
}

// TestAgentRestart: killing the agent mid-run and starting another loses no workload and at most
// one checkpoint interval of progress.
func TestAgentRestart(t *testing.T) {
	const (
		test, ns = "restart", "e2e-agent-restart"
		speedup  = 20.0
		duration = 160.0 // 8 s of wall time
		interval = time.Second
	)
	setup(t, ns)
	createNode(t, agentNode(t, "kwok-agent-restart", nil, nil))
	c := trainContract("restart-wl", 0, duration)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart"}, Spec: batchv1.JobSpec{
		Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
		Template: contractTemplate(test, "kwok-agent-restart", c)}}
	create(t, job)
	var pod *corev1.Pod
	eventually(t, "job pod Running", func(ctx context.Context) (bool, string, error) {
		pods, err := podsOf(ctx, ns, map[string]string{"batch.kubernetes.io/job-name": job.Name})
		if err != nil || len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods)), err
		}
		pod = &pods[0]
		return pod.Status.Phase == corev1.PodRunning, string(pod.Status.Phase), nil
	})
	// The pod runs before the first agent starts, so its run time is that agent's trace time.
	cs := clientset(t)
	cfg := agent.Config{CheckpointInterval: interval}
	a1, kill := startAgent(t, cs, test, speedup, cfg)
	eventually(t, "progress past 40%", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, pod); err != nil {
			return false, "", err
		}
		return a1.Stats().TraceSec >= 0.4*duration && pod.Annotations[contract.Progress] != "", pod.Annotations[contract.Progress], nil
	})
	kill()
	ran := a1.Stats().TraceSec
	if err := get(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	var pr agent.Progress
	if err := json.Unmarshal([]byte(pod.Annotations[contract.Progress]), &pr); err != nil {
		t.Fatalf("progress annotation %s: %v", pod.Annotations[contract.Progress], err)
	}
	saved := pr.RemainingSec
	lost := saved - (duration - ran) // trace seconds of work the next agent redoes
	limit := interval.Seconds() * speedup
	t.Logf("restart: killed after %.1f trace s; progress annotation had %.1f s left, %.1f s of work lost (limit %.1f)", ran, saved, lost, limit)
	if lost < -1e-6 || lost > limit {
		t.Errorf("lost %g trace s of progress, more than one checkpoint interval (%g)", lost, limit)
	}
	startAgent(t, cs, test, speedup, cfg)
	eventually(t, "Job Complete after the restart", func(ctx context.Context) (bool, string, error) {
		if err := get(ctx, job); err != nil {
			return false, "", err
		}
		for _, c := range job.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("conditions %v", job.Status.Conditions), nil
	})
	if err := get(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	if got := annotation(t, pod, contract.RunTraceSec); got < duration-1e-3 || got > duration+limit {
		t.Errorf("pod ran %g trace s over both agents, want %g + at most %g redone", got, duration, limit)
	}
}

// TestAgentCompletionLatency measures, for both completion modes, the wall time from the agent's
// completion decision (annotation kueuelab.io/finished-at) to the pod phase Succeeded and the Job
// condition Complete as seen by watches. It reports numbers and asserts only that all complete.
func TestAgentCompletionLatency(t *testing.T) {
	const n = 8
	for _, via := range []string{agent.CompleteViaStage, agent.CompleteViaStatus} {
		t.Run(via, func(t *testing.T) {
			test, ns, host := "latency-"+via, "e2e-agent-latency-"+via, "kwok-agent-latency-"+via
			setup(t, ns)
			createNode(t, agentNode(t, host, nil, nil))
			cs := clientset(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var mu sync.Mutex
			podSeen, jobSeen := map[string]time.Time{}, map[string]time.Time{}
			finished := map[string]time.Time{}
			watchAll := func(w watch.Interface, werr error, on func(e watch.Event)) {
				if werr != nil {
					t.Fatal(werr)
				}
				go func() {
					defer w.Stop()
					for {
						select {
						case <-ctx.Done():
							return
						case e, ok := <-w.ResultChan():
							if !ok {
								return
							}
							on(e)
						}
					}
				}()
			}
			pw, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
			watchAll(pw, err, func(e watch.Event) {
				p, ok := e.Object.(*corev1.Pod)
				if !ok || p.Status.Phase != corev1.PodSucceeded {
					return
				}
				now := time.Now()
				mu.Lock()
				defer mu.Unlock()
				job := p.Labels["batch.kubernetes.io/job-name"]
				if _, seen := podSeen[job]; !seen {
					podSeen[job] = now
					if ts, err := time.Parse(time.RFC3339Nano, p.Annotations[contract.FinishedAt]); err == nil {
						finished[job] = ts
					}
				}
			})
			jw, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
			watchAll(jw, err, func(e watch.Event) {
				j, ok := e.Object.(*batchv1.Job)
				if !ok {
					return
				}
				for _, c := range j.Status.Conditions {
					if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
						mu.Lock()
						if _, seen := jobSeen[j.Name]; !seen {
							jobSeen[j.Name] = time.Now()
						}
						mu.Unlock()
					}
				}
			})
			a, _ := startAgent(t, cs, test, 20, agent.Config{CompleteVia: via})
			for i := range n {
				// Staggered durations (20, 22, ... trace s) so completions do not share a tick.
				c := trainContract(fmt.Sprintf("lat-%d", i), 0, 20+2*float64(i))
				create(t, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("lat-%d", i)}, Spec: batchv1.JobSpec{
					Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](0),
					Template: contractTemplate(test, host, c)}})
			}
			eventually(t, "all Jobs Complete", func(context.Context) (bool, string, error) {
				mu.Lock()
				defer mu.Unlock()
				return len(jobSeen) == n && len(podSeen) == n, fmt.Sprintf("%d pods Succeeded, %d Jobs Complete; agent %+v", len(podSeen), len(jobSeen), a.Stats()), nil
			})
			mu.Lock()
			defer mu.Unlock()
			var toPod, toJob []time.Duration
			for job, f := range finished {
				toPod = append(toPod, podSeen[job].Sub(f))
				toJob = append(toJob, jobSeen[job].Sub(f))
			}
			if len(toPod) != n {
				t.Fatalf("%d of %d Succeeded pods carry %s", len(toPod), n, contract.FinishedAt)
			}
			slices.Sort(toPod)
			slices.Sort(toJob)
			ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }
			logTicks(t, a)
			t.Logf("completion via %s, %d pods: decision→pod Succeeded median %s max %s; decision→Job Complete median %s max %s",
				via, n, ms(toPod[n/2]), ms(toPod[n-1]), ms(toJob[n/2]), ms(toJob[n-1]))
		})
	}
}

// logTicks reports the agent's mean sync time from its tick-duration histogram.
func logTicks(t *testing.T, a *agent.Agent) {
	t.Helper()
	mfs, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kueuelab_tick_duration_seconds" && len(mf.GetMetric()) == 1 {
			h := mf.GetMetric()[0].GetHistogram()
			if n := h.GetSampleCount(); n > 0 {
				t.Logf("agent: %d syncs, mean sync %s", n, time.Duration(h.GetSampleSum()/float64(n)*float64(time.Second)).Round(time.Microsecond))
			}
		}
	}
}
