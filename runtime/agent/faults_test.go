package agent

import (
	"context"
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kueuelab/kueuelab/model/fault"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// checkpointed is a gang member of a 100 s workload that checkpoints every 30 s of work at 5 s a
// checkpoint and takes 20 s to restart.
func checkpointed(wl string, gang int) *contract.Pod {
	c := podContract(wl, gang)
	c.CheckpointIntervalSec, c.CheckpointCostSec, c.RestartOverheadSec = 30, 5, 20
	return c
}

func (h *harness) setPhase(name string, phase corev1.PodPhase) {
	h.t.Helper()
	p := h.pod(name)
	p.Status.Phase = phase
	if _, err := h.client.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// workLeft waits until the agent's progress annotation of the pod says want seconds of work are
// left (it writes progress on its wall-clock ticker, which the harness steps).
func (h *harness) workLeft(name string, want float64) {
	h.t.Helper()
	h.flush()
	h.until(fmt.Sprintf("%s with %g s of work left", name, want), func() (bool, string) {
		pr, ok, err := parseProgress(h.pod(name))
		return ok && err == nil && math.Abs(pr.RemainingSec-want) < 1e-9, fmt.Sprintf("%+v %v", pr, err)
	})
}

// TestFailedGangMemberStopsGangAndRestartResumesFromCheckpoint: a gang of two checkpoints at 30 s
// of work (paused 5 s each: checkpoints count at trace 35 and 70, 40 s of work left). At trace 80
// one member fails: its peer stops at once and rolls back to the checkpoint (10 s of work lost by
// each), then waits. The failed member's replacement starts at trace 100: both pause 20 s for the
// restart, do the 40 s left with one more checkpoint (at 30 s, 5 s), and finish together at
// 100 + 20 + 40 + 5 = 165.
func TestFailedGangMemberStopsGangAndRestartResumesFromCheckpoint(t *testing.T) {
	c := checkpointed("wl-ft", 2)
	client := fake.NewClientset()
	create(t, client, makeNode("n1", 8, nil), makeNode("n2", 8, nil), makePod("g-0", "n1", c, nil), makePod("g-1", "n2", c, nil))
	h := start(t, client, Config{CompleteVia: CompleteViaStatus})
	h.started(2)
	h.advance(80)
	h.workLeft("g-0", 30)
	h.setPhase("g-1", corev1.PodFailed)
	h.until("g-0 rolled back", func() (bool, string) { s := h.a.Stats(); return s.Started == 1, fmt.Sprintf("%+v", s) })
	h.advance(20)
	h.workLeft("g-0", 40) // the checkpoint's
	if s := h.a.Stats(); s.Progressing != 0 || s.GangBlocked != 1 {
		t.Errorf("stats %+v: the gang must stop while a member is missing", s)
	}
	// The owner replaces the failed member (JobSet recreates, the operator recreates the pod).
	if err := client.CoreV1().Pods(ns).Delete(context.Background(), "g-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, client, makePod("g-1b", "n2", c, nil))
	h.started(2)
	want := 100 + 20 + 40 + float64(fault.Checkpoints(40, 30))*5
	h.advance(want - 100 - 1)
	if _, done := h.pod("g-0").Annotations[contract.Complete]; done {
		t.Fatalf("gang finished before trace %g", want)
	}
	h.advance(2)
	for _, name := range []string{"g-0", "g-1b"} {
		if got := annFloat(t, h.completed(name), contract.FinishedTraceSec); math.Abs(got-want) > 1e-6 {
			t.Errorf("%s finished at trace %g, want %g", name, got, want)
		}
	}
	h.until("fault accounting", func() (bool, string) {
		f := h.a.Faults()[ns+"/wl-ft"]
		// Lost: 10 s of work by each member. Restart: 20 s paused by each. Checkpoints: g-0 took 3
		// (5 s each), the replacement 1, the failed member 2.
		ok := f.Restarts == 1 && math.Abs(f.LostGPUSec-20) < 1e-6 && math.Abs(f.RestartGPUSec-40) < 1e-6 &&
			f.Checkpoints == 6 && math.Abs(f.CheckpointGPUSec-30) < 1e-6
		return ok, fmt.Sprintf("%+v", f)
	})
}

// TestContainerRestartRollsBack: a pod whose container restarts in place (restart policy
// OnFailure: the kubelet restarts it, the pod stays Running) loses the work since its checkpoint
// and pays the restart overhead: at trace 50 (checkpoint counted at 35, 15 s since), it goes back
// to 70 s left and finishes at 50 + 20 + 70 + 2·5 = 150.
func TestContainerRestartRollsBack(t *testing.T) {
	c := checkpointed("wl-rs", 0)
	client := fake.NewClientset()
	p := makePod("p1", "n1", c, nil)
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "train"}}
	create(t, client, makeNode("n1", 8, nil), p)
	h := start(t, client, Config{CompleteVia: CompleteViaStatus})
	h.started(1)
	h.advance(50)
	restart := simclock.PodRestart(p.UID, 1)
	h.clk.Hold(restart) // what the runner's fault injector places before it writes the restart
	p = h.pod("p1")
	p.Status.ContainerStatuses[0].RestartCount = 1
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.until("restart acknowledged", func() (bool, string) { return !h.clk.Held(restart), "held" })
	h.workLeft("p1", 70) // the checkpoint's
	want := 50 + 20 + 70 + float64(fault.Checkpoints(70, 30))*5
	h.gate.Set(2 * want)
	if got := annFloat(t, h.completed("p1"), contract.FinishedTraceSec); math.Abs(got-want) > 1e-6 {
		t.Errorf("finished at trace %g, want %g", got, want)
	}
	h.waitGate()
	h.until("fault accounting (1 restart, 15 GPU-s lost, 20 GPU-s restarting)", func() (bool, string) {
		f := h.a.Faults()[ns+"/wl-rs"]
		return f.Restarts == 1 && math.Abs(f.LostGPUSec-15) < 1e-6 && math.Abs(f.RestartGPUSec-20) < 1e-6, fmt.Sprintf("%+v", f)
	})
}

// TestNotReadyNodeStopsItsPods: a pod on a node gone NotReady makes no progress (the agent
// acknowledges the fault injector's hold once it stopped it) and goes on where it stopped when the
// node is Ready again.
func TestNotReadyNodeStopsItsPods(t *testing.T) {
	c := podContract("wl-node", 0)
	client := fake.NewClientset()
	node := makeNode("n1", 8, nil)
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	create(t, client, node, makePod("p1", "n1", c, nil))
	h := start(t, client, Config{CompleteVia: CompleteViaStatus})
	h.started(1)
	h.advance(30)
	setReady := func(s corev1.ConditionStatus, down simclock.Key) {
		t.Helper()
		h.clk.Hold(down)
		n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Status.Conditions[0].Status = s
		if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		h.until(down.ID+" acknowledged", func() (bool, string) { return !h.clk.Held(down), "held" })
	}
	setReady(corev1.ConditionFalse, simclock.NodeDown("n1"))
	h.advance(500)
	if s := h.a.Stats(); s.Started != 0 {
		t.Errorf("stats %+v: the pod of a NotReady node still runs", s)
	}
	h.workLeft("p1", duration-30)
	setReady(corev1.ConditionTrue, simclock.NodeUp("n1"))
	h.started(1)
	h.gate.Set(1000)
	if got := annFloat(t, h.completed("p1"), contract.FinishedTraceSec); math.Abs(got-(530+duration-30)) > 1e-6 {
		t.Errorf("finished at trace %g, want %g", got, 530+duration-30)
	}
}
