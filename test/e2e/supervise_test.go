package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/localcluster"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// superviseEnv makes this test binary the supervisor daemon of a test's own cluster (root and
// name, separated by the path list separator), as `kueuelab cluster supervise` is for the CLI.
const superviseEnv = "KUEUELAB_E2E_SUPERVISE"

// superviseMain is the daemon's body; TestMain runs it instead of the tests.
func superviseMain(spec string) int {
	root, name, ok := strings.Cut(spec, string(filepath.ListSeparator))
	if !ok {
		fmt.Fprintf(os.Stderr, "%s=%q: want ROOT%cNAME\n", superviseEnv, spec, filepath.ListSeparator)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := localcluster.Supervise(ctx, root, name); err != nil {
		fmt.Fprintln(os.Stderr, "supervise:", err)
		return 1
	}
	return 0
}

// testDaemon re-executes this test binary as the supervisor daemon.
func testDaemon(root, name string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), superviseEnv+"="+root+string(filepath.ListSeparator)+name)
	return cmd, nil
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// supCluster is the test's own cluster.
type supCluster struct {
	t    *testing.T
	opts localcluster.Options
	dir  string
	c    client.Client
}

func (sc *supCluster) health() *localcluster.Health {
	sc.t.Helper()
	h, err := localcluster.ReadHealth(sc.dir)
	if err != nil {
		sc.t.Fatal(err)
	}
	return h
}

// await polls the supervisor's status until cond holds.
func (sc *supCluster) await(what string, timeout time.Duration, cond func(h *localcluster.Health) (bool, string)) *localcluster.Health {
	sc.t.Helper()
	var last *localcluster.Health
	var detail string
	err := wait.PollUntilContextTimeout(sc.t.Context(), 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		h, err := localcluster.ReadHealth(sc.dir)
		if err != nil {
			return false, err
		}
		last = h
		ok, d := cond(h)
		detail = d
		return ok, nil
	})
	if err != nil {
		sc.t.Fatalf("%s: %v (last: %s)\n%s", what, err, detail, sc.dump(last))
	}
	return last
}

func (sc *supCluster) dump(h *localcluster.Health) string {
	if h == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range h.Components {
		fmt.Fprintf(&b, "  %s %s pid=%d restarts=%d %s\n", c.Name, c.State, c.PID, c.Restarts, c.Message)
	}
	fmt.Fprintf(&b, "--- supervisor log ---\n%s", localcluster.LogTail(filepath.Join(sc.dir, "logs", "supervisor.log"), 30))
	return b.String()
}

func allReady(h *localcluster.Health) (bool, string) {
	var not []string
	for _, c := range h.NotReady() {
		not = append(not, c.Name+"="+string(c.State))
	}
	if !h.Supervisor.Alive {
		not = append(not, "supervisor not alive")
	}
	return len(not) == 0, strings.Join(not, " ")
}

// supShared is the supervised cluster (its supervisor a daemon, as the CLI's) of the tests that
// kill its components, TestRunSurvivesControlPlaneFaults and TestSupervisedComponentsRecover: the
// kills must not disturb the shared cluster, and one cluster for both saves a cluster start
// (about 25 s) per run. Every test that uses it ends with every component ready (or, the last,
// with the cluster down, which the next Up starts again); its restart counts carry over from one
// test to the next, so the tests compare counts before and after a kill, never absolute ones.
// The tests run one after the other (neither is parallel). stopSupCluster takes it down after
// the last test.
var supShared struct {
	opts   localcluster.Options // Out is the current test's log
	failed bool                 // a test that used it failed: its state dir is kept
}

// startSupCluster gives t the supervised cluster, brought up at its first use and otherwise
// adopted as it runs (Up starts what is not running, and restarts nothing that is).
func startSupCluster(t *testing.T) (*supCluster, *localcluster.Cluster) {
	t.Helper()
	if supShared.opts.Root == "" {
		set := tools.Pinned()
		bin, err := tools.BinDir("", set)
		if err != nil {
			t.Fatal(err)
		}
		root, err := os.MkdirTemp("", "kueuelab-e2e-sup-")
		if err != nil {
			t.Fatal(err)
		}
		base, err := freePortBlock(29400, 17)
		if err != nil {
			t.Fatal(err)
		}
		supShared.opts = localcluster.Options{Root: root, Name: fmt.Sprintf("sup-%d", os.Getpid()), BinDir: bin, PortBase: base,
			Timeout: 3 * time.Minute, Daemon: testDaemon}
	}
	opts := supShared.opts
	opts.Out = logWriter{t}
	sc := &supCluster{t: t, dir: filepath.Join(opts.Root, opts.Name), opts: opts}
	t.Cleanup(func() {
		if t.Failed() {
			supShared.failed = true
			t.Logf("state (logs, status.json) kept in %s", sc.dir)
		}
	})
	cl, err := localcluster.Up(t.Context(), sc.opts)
	if err != nil {
		t.Fatalf("cluster up: %v", err)
	}
	scheme, err := cluster.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if sc.c, err = client.New(cl.Config, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	return sc, cl
}

// stopSupCluster takes the supervised cluster down if a test brought it up, and removes its
// state unless a test that used it failed.
func stopSupCluster() error {
	o := supShared.opts
	if o.Root == "" {
		return nil
	}
	if err := localcluster.Down(context.Background(), o.Root, o.Name, false, os.Stdout); err != nil {
		return fmt.Errorf("supervised cluster down: %w", err)
	}
	if supShared.failed {
		fmt.Printf("e2e: the supervised cluster's state (logs, status.json) kept in %s\n", filepath.Join(o.Root, o.Name))
		return nil
	}
	return os.RemoveAll(o.Root)
}

// TestSupervisedComponentsRecover takes the supervised cluster (startSupCluster; the kills must
// not disturb the shared one), whose supervisor runs as a daemon, SIGKILLs every component in turn and sees
// each restarted and ready with its restart counted; checks that the restarted Kueue rebuilt its
// quota accounting from the API and that the restarted operators run their kinds; kills the
// supervisor itself and sees the next Up adopt the running components; and makes JobSet
// crash-loop with a broken config.
func TestSupervisedComponentsRecover(t *testing.T) {
	sc, _ := startSupCluster(t)
	h := sc.health()
	if sv := h.Supervisor; !sv.Alive || sv.InProcess || sv.PID == os.Getpid() {
		t.Fatalf("supervisor %+v, want a live daemon", sv)
	}
	if ok, detail := allReady(h); !ok {
		t.Fatalf("after Up: %s", detail)
	}

	// A Job holds the ClusterQueue's whole quota before anything is killed.
	ns := "sup"
	for _, o := range append([]client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}, queueObjects(ns, ns, 8)...) {
		sc.create(o)
	}
	holder := makeJob(ns, "holds-quota", ns, 8)
	sc.create(holder)
	sc.awaitWorkload(holder, kueue.WorkloadAdmitted)
	holderPods := sc.awaitPodsRunning(ns, map[string]string{"batch.kubernetes.io/job-name": holder.Name}, 1)

	t.Run("KillEachComponent", func(t *testing.T) {
		for _, victim := range sc.health().Components {
			before, _ := sc.health().Component(victim.Name)
			// The leases a killed KWOK or mpi-operator held must not hold their successor back.
			leases := map[string]string{localcluster.KWOK: corev1.NamespaceNodeLease}
			for _, op := range render.DefaultRegistry().Operators() {
				if op.StaleLease != "" {
					leases[op.Name] = op.Namespace
				}
			}
			var held []coordinationv1.Lease
			if ns, ok := leases[victim.Name]; ok {
				held = sc.leases(ns)
			}
			killed := time.Now()
			if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
				t.Fatalf("kill %s (pid %d): %v", before.Name, before.PID, err)
			}
			h := sc.await(victim.Name+" restarted and every component ready", 2*time.Minute, func(h *localcluster.Health) (bool, string) {
				c, _ := h.Component(victim.Name)
				if c.PID == before.PID || c.Restarts <= before.Restarts {
					return false, fmt.Sprintf("%s %s pid %d restarts %d", c.Name, c.State, c.PID, c.Restarts)
				}
				return allReady(h)
			})
			c, _ := h.Component(victim.Name)
			if c.Restarts != before.Restarts+1 || c.LastExit == nil || c.LastExit.Signal != "SIGKILL" {
				t.Errorf("%s after one SIGKILL: restarts %d (before %d), last exit %+v", c.Name, c.Restarts, before.Restarts, c.LastExit)
				continue
			}
			t.Logf("%-24s SIGKILL → ready again in %s (exit seen → ready %s; restarts %d)", c.Name,
				time.Since(killed).Round(10*time.Millisecond), c.ReadySince.Sub(c.LastExit.Time).Round(10*time.Millisecond), c.Restarts)
			if len(held) > 0 {
				sc.awaitTakeover(victim.Name, killed, held)
			}
		}
		if err := sc.nodesReady(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("StalledKWOKRestartedByLiveness", func(t *testing.T) {
		// A KWOK process that is there but no longer holds any node's lease: stopped, its leases
		// gone. Its liveness probe fails three times in a row; the supervisor sends SIGQUIT (a
		// stopped process takes it only when continued) and SIGKILL after the quit grace, then
		// restarts it, and the new process takes the leases again.
		before, _ := sc.health().Component(localcluster.KWOK)
		if err := syscall.Kill(before.PID, syscall.SIGSTOP); err != nil {
			t.Fatalf("stop kwok (pid %d): %v", before.PID, err)
		}
		stopped := time.Now()
		held := sc.leases(corev1.NamespaceNodeLease)
		for i := range held {
			if err := sc.c.Delete(t.Context(), &held[i]); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		h := sc.await("kwok restarted by its liveness probe and every component ready", 2*time.Minute, func(h *localcluster.Health) (bool, string) {
			c, _ := h.Component(localcluster.KWOK)
			if c.PID == before.PID || c.Restarts <= before.Restarts {
				return false, fmt.Sprintf("%s pid %d restarts %d: %s", c.State, c.PID, c.Restarts, c.Message)
			}
			return allReady(h)
		})
		c, _ := h.Component(localcluster.KWOK)
		if c.Restarts != before.Restarts+1 || c.LastExit == nil || c.LastExit.Signal != "SIGKILL" ||
			!strings.Contains(c.LastExit.Reason, "liveness probe failed 3 times in a row: none of the") {
			t.Errorf("kwok after its liveness kill: restarts %d (before %d), last exit %+v", c.Restarts, before.Restarts, c.LastExit)
		}
		t.Logf("kwok stopped, leases deleted → %s → ready again %s after the stop", c.LastExit, time.Since(stopped).Round(10*time.Millisecond))
		for _, old := range held {
			sc.eventually("lease "+old.Namespace+"/"+old.Name+" held again", func(ctx context.Context) (bool, string, error) {
				var l coordinationv1.Lease
				if err := sc.c.Get(ctx, client.ObjectKeyFromObject(&old), &l); err != nil {
					return false, err.Error(), client.IgnoreNotFound(err)
				}
				return ptrString(l.Spec.HolderIdentity) != "", "no holder", nil
			})
		}
		if err := sc.nodesReady(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("RestartedControllersWork", func(t *testing.T) {
		// The restarted Kueue counted the holder's quota from the API: a new Job waits for quota.
		blocked := makeJob(ns, "over-quota", ns, 1)
		sc.create(blocked)
		sc.awaitWorkloadPending(blocked, "insufficient unused quota")
		sc.complete(holderPods)
		sc.awaitWorkload(holder, kueue.WorkloadFinished)
		sc.awaitWorkload(blocked, kueue.WorkloadAdmitted)
		// The restarted operators (behind restarted webhooks) run their kinds.
		mpi := makeMPIJob(ns, "mpi", ns, 2, 1)
		pt := makePyTorchJob(ns, "pytorch", ns, 1, 1)
		sc.create(mpi)
		sc.create(pt)
		sc.awaitWorkload(mpi, kueue.WorkloadAdmitted)
		sc.awaitWorkload(pt, kueue.WorkloadAdmitted)
		sc.awaitPodsRunning(ns, map[string]string{"training.kubeflow.org/job-name": mpi.Name}, 3)
		sc.awaitPodsRunning(ns, map[string]string{"training.kubeflow.org/job-name": pt.Name}, 2)
	})

	t.Run("SupervisorRestartAdopts", func(t *testing.T) {
		before := sc.health()
		if err := syscall.Kill(before.Supervisor.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		sc.await("supervisor gone", time.Minute, func(h *localcluster.Health) (bool, string) { return !h.Supervisor.Alive, "alive" })
		if _, err := localcluster.Up(t.Context(), sc.opts); err != nil {
			t.Fatalf("cluster up after the supervisor died: %v", err)
		}
		after := sc.health()
		if after.Supervisor.PID == before.Supervisor.PID || !after.Supervisor.Alive {
			t.Fatalf("supervisor %+v after Up", after.Supervisor)
		}
		for _, b := range before.Components {
			a, _ := after.Component(b.Name)
			if a.PID != b.PID || a.Restarts != b.Restarts || a.State != localcluster.StateReady {
				t.Errorf("%s: pid %d restarts %d %s, want the running process %d adopted with its %d restarts", b.Name, a.PID, a.Restarts, a.State, b.PID, b.Restarts)
			}
		}
	})

	t.Run("CrashLoop", func(t *testing.T) {
		// JobSet's operator reads its configuration from config/jobset.yaml (render/kind_jobset.go).
		victim := "jobset"
		before, _ := sc.health().Component(victim)
		killed := time.Now()
		if err := os.WriteFile(filepath.Join(sc.dir, "config", "jobset.yaml"), []byte("apiVersion: [broken\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		h := sc.await(victim+" crash-looping", time.Minute, func(h *localcluster.Health) (bool, string) {
			c, _ := h.Component(victim)
			return c.State == localcluster.StateCrashLooping, fmt.Sprintf("%s restarts %d", c.State, c.Restarts)
		})
		c, _ := h.Component(victim)
		if want := before.Restarts + localcluster.DefaultPolicy.CrashLoopRestarts; c.Restarts != want || c.PID != 0 || c.LastExit == nil || c.LastExit.Code == 0 {
			t.Errorf("crash-looping %s: restarts %d (want %d), pid %d, last exit %+v", victim, c.Restarts, want, c.PID, c.LastExit)
		}
		err := h.CrashLooping(sc.dir, 10)
		var cle *localcluster.CrashLoopError
		if !errors.As(err, &cle) || cle.Component.Name != victim || !strings.Contains(cle.Tail, "jobset.yaml") {
			t.Errorf("CrashLooping() = %v, want jobset named with its log's last lines (the config error)", err)
		}
		t.Logf("%s crash-looping %s after the kill, %d restarts", victim, c.LastExit.Time.Sub(killed).Round(10*time.Millisecond), c.Restarts)
		if ok, _ := allReady(h); ok {
			t.Errorf("Ready() with a crash-looping component")
		}
		// Up writes the config again and asks for the component: it leaves crash-looping.
		if _, err := localcluster.Up(t.Context(), sc.opts); err != nil {
			t.Fatalf("cluster up after the crash loop: %v", err)
		}
		sc.await("all ready after Up", time.Minute, allReady)
	})

	t.Run("Down", func(t *testing.T) {
		last := sc.health()
		if err := localcluster.Down(t.Context(), sc.opts.Root, sc.opts.Name, false, logWriter{t}); err != nil {
			t.Fatal(err)
		}
		h := sc.health()
		if h.Supervisor.Alive {
			t.Fatalf("supervisor alive after Down")
		}
		for _, c := range last.Components {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d/cmdline", c.PID)); err == nil {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c.PID)); strings.Contains(string(b), sc.dir) {
					t.Errorf("%s (pid %d) still runs after Down", c.Name, c.PID)
				}
			}
			if now, _ := h.Component(c.Name); now.State != localcluster.StateStopped {
				t.Errorf("%s: %s after Down", c.Name, now.State)
			}
		}
	})
}

func (sc *supCluster) create(o client.Object) {
	sc.t.Helper()
	if err := sc.c.Create(sc.t.Context(), o); err != nil {
		sc.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func (sc *supCluster) eventually(what string, cond func(ctx context.Context) (bool, string, error)) {
	sc.t.Helper()
	var detail string
	err := wait.PollUntilContextTimeout(sc.t.Context(), 250*time.Millisecond, deadline, true, func(ctx context.Context) (bool, error) {
		ok, d, err := cond(ctx)
		detail = d
		return ok, err
	})
	if err != nil {
		sc.t.Fatalf("%s: %v (last: %s)", what, err, detail)
	}
}

func (sc *supCluster) workload(ctx context.Context, o client.Object) (*kueue.Workload, error) {
	if o.GetUID() == "" {
		if err := sc.c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			return nil, err
		}
	}
	var wls kueue.WorkloadList
	if err := sc.c.List(ctx, &wls, client.InNamespace(o.GetNamespace())); err != nil {
		return nil, err
	}
	for i := range wls.Items {
		for _, ref := range wls.Items[i].OwnerReferences {
			if ref.UID == o.GetUID() {
				return &wls.Items[i], nil
			}
		}
	}
	return nil, nil
}

func (sc *supCluster) awaitWorkload(o client.Object, typ string) {
	sc.t.Helper()
	sc.eventually(fmt.Sprintf("%T %s: Workload %s", o, o.GetName(), typ), func(ctx context.Context) (bool, string, error) {
		wl, err := sc.workload(ctx, o)
		if err != nil || wl == nil {
			return false, "no Workload yet", err
		}
		c := condition(wl.Status.Conditions, typ)
		return c != nil && c.Status == metav1.ConditionTrue, condSummary(wl.Status.Conditions), nil
	})
}

func (sc *supCluster) awaitWorkloadPending(o client.Object, message string) {
	sc.t.Helper()
	sc.eventually(fmt.Sprintf("%s: Workload pending with %q", o.GetName(), message), func(ctx context.Context) (bool, string, error) {
		wl, err := sc.workload(ctx, o)
		if err != nil || wl == nil {
			return false, "no Workload yet", err
		}
		c := condition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if c == nil {
			return false, condSummary(wl.Status.Conditions), nil
		}
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, message), c.Message, nil
	})
}

func (sc *supCluster) awaitPodsRunning(ns string, labels map[string]string, want int) []corev1.Pod {
	sc.t.Helper()
	var pods corev1.PodList
	sc.eventually(fmt.Sprintf("%d pods %v Running", want, labels), func(ctx context.Context) (bool, string, error) {
		if err := sc.c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, "", err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == want && len(pods.Items) == want, fmt.Sprintf("%d pods, %d running", len(pods.Items), running), nil
	})
	return pods.Items
}

func (sc *supCluster) complete(pods []corev1.Pod) {
	sc.t.Helper()
	for i := range pods {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+contract.Complete+`":"true"}}}`))
		if err := sc.c.Patch(sc.t.Context(), &pods[i], patch); err != nil {
			sc.t.Fatalf("annotate pod %s: %v", pods[i].Name, err)
		}
	}
}

func (sc *supCluster) leases(ns string) []coordinationv1.Lease {
	sc.t.Helper()
	var l coordinationv1.LeaseList
	if err := sc.c.List(sc.t.Context(), &l, client.InNamespace(ns)); err != nil {
		sc.t.Fatal(err)
	}
	if len(l.Items) == 0 {
		sc.t.Fatalf("no leases in %s", ns)
	}
	return l.Items
}

// awaitTakeover waits until a new holder renewed each lease, and checks that it took over before
// the killed holder's lease would have expired: the restart deleted the stale lease rather than
// waiting it out (which would stall KWOK's pods or mpi-operator's MPIJobs while both report ready).
// A successor that stalled and was restarted by its liveness probe (KWOK's) took over after that
// restart, later by construction; the log says so.
func (sc *supCluster) awaitTakeover(victim string, killed time.Time, held []coordinationv1.Lease) {
	sc.t.Helper()
	for _, old := range held {
		var now coordinationv1.Lease
		sc.eventually("lease "+old.Namespace+"/"+old.Name+" taken over", func(ctx context.Context) (bool, string, error) {
			if err := sc.c.Get(ctx, client.ObjectKeyFromObject(&old), &now); err != nil {
				return false, "", client.IgnoreNotFound(err)
			}
			return ptrString(now.Spec.HolderIdentity) != ptrString(old.Spec.HolderIdentity), "holder " + ptrString(now.Spec.HolderIdentity), nil
		})
		if old.Spec.RenewTime == nil || old.Spec.LeaseDurationSeconds == nil || now.Spec.RenewTime == nil {
			sc.t.Fatalf("lease %s/%s without renew time or duration", old.Namespace, old.Name)
		}
		expiry := old.Spec.RenewTime.Add(time.Duration(*old.Spec.LeaseDurationSeconds) * time.Second)
		if c, _ := sc.health().Component(victim); c.LastExit != nil && strings.Contains(c.LastExit.Reason, "liveness probe failed") {
			// The successor stalled and its liveness probe replaced it: the takeover is then
			// bounded by the probe's schedule (delay, failures, the quit grace) and a restart.
			p := localcluster.DefaultPolicy
			bound := localcluster.KWOKLivenessDelay + time.Duration(p.LivenessFailureThreshold)*p.LivenessPeriod + p.QuitGrace + 15*time.Second
			sc.t.Logf("%s stalled after its restart and its liveness probe restarted it (%s); lease %s/%s taken over at %s",
				victim, c.LastExit, old.Namespace, old.Name, now.Spec.RenewTime.Format(time.RFC3339Nano))
			if limit := killed.Add(bound); !now.Spec.RenewTime.Time.Before(limit) {
				sc.t.Errorf("lease %s/%s: taken over at %s, later than the liveness probe's bound %s after the kill (%s)",
					old.Namespace, old.Name, now.Spec.RenewTime.Format(time.RFC3339Nano), bound, limit.Format(time.RFC3339Nano))
			}
			continue
		}
		if !now.Spec.RenewTime.Time.Before(expiry) {
			sc.t.Errorf("lease %s/%s: new holder %s renewed it first at %s, after the killed holder's lease expired (%s)",
				old.Namespace, old.Name, ptrString(now.Spec.HolderIdentity), now.Spec.RenewTime.Format(time.RFC3339Nano), expiry.Format(time.RFC3339Nano))
		}
	}
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (sc *supCluster) nodesReady() error {
	var nodes corev1.NodeList
	if err := sc.c.List(sc.t.Context(), &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		c := nodeCondition(n.Status.Conditions, corev1.NodeReady)
		if c == nil || c.Status != corev1.ConditionTrue {
			return fmt.Errorf("node %s not Ready after the restarts: %+v", n.Name, c)
		}
	}
	if len(nodes.Items) == 0 {
		return errors.New("no nodes")
	}
	return nil
}

func nodeCondition(conds []corev1.NodeCondition, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
