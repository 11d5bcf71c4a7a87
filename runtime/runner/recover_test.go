package runner

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kueuelab/kueuelab/render/contract"
)

// TestWatcherHoldsRecovery: a pod of a running workload that fails (or is deleted) leaves its
// owner owing a replacement; the recover hold ends when the Workload again has all its live pods
// (for a JobSet, those of the new restart attempt: the old attempt's may not be deleted yet), or
// when the workload finishes.
func TestWatcherHoldsRecovery(t *testing.T) {
	for _, tc := range []struct {
		name    string
		attempt func(n int) map[string]string // extra labels of pod n's generation
	}{
		{"pods replaced one by one (Job, PyTorchJob)", func(int) map[string]string { return nil }},
		{"whole set recreated (JobSet)", func(gen int) map[string]string {
			return map[string]string{restartAttemptLabel: fmt.Sprint(gen)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _, p := watchFixture(t)
			top := batchJobs(t, p, 1)[0].objects[0]
			wl := kueueWorkload(top, "Job", 2, cond("QuotaReserved", "QuotaReserved", 1))
			w.onWorkload(wl, false)
			u := w.units[batchJobs(t, p, 1)[0].id]
			pod := func(name string, gen int, phase corev1.PodPhase) *corev1.Pod {
				l := map[string]string{contract.WorkloadLabel: top.GetName()}
				for k, v := range tc.attempt(gen) {
					l[k] = v
				}
				return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: top.GetNamespace(), UID: types.UID(name), Labels: l},
					Spec: corev1.PodSpec{NodeName: "h100-001", Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}}},
					Status: corev1.PodStatus{Phase: phase}}
			}
			a, b := pod("a", 0, corev1.PodRunning), pod("b", 0, corev1.PodRunning)
			w.onPod(a, false)
			w.onPod(b, false)
			if w.clk.Held(holdRecover(u)) {
				t.Fatal("recover held before any failure")
			}
			w.onPod(pod("a", 0, corev1.PodFailed), false)
			if !w.clk.Held(holdRecover(u)) {
				t.Fatal("a running workload lost a pod: no recover hold")
			}
			if tc.attempt(0) == nil {
				w.onPod(pod("a2", 0, corev1.PodPending), false) // the replacement
			} else {
				// The new attempt's first pod comes before the old attempt's b is deleted.
				w.onPod(pod("a2", 1, corev1.PodPending), false)
				if !w.clk.Held(holdRecover(u)) {
					t.Fatal("recover released with one pod of the new attempt")
				}
				gone := b.DeepCopy()
				now := metav1.Now()
				gone.DeletionTimestamp = &now
				w.onPod(gone, false)
				w.onPod(pod("b2", 1, corev1.PodPending), false)
			}
			if w.clk.Held(holdRecover(u)) {
				t.Error("recover still held with every pod replaced")
			}
			// A failure the owner answers by failing the workload: Finished ends the hold.
			gen := 0
			if tc.attempt(0) != nil {
				gen = 1
			}
			w.onPod(pod("a2", gen, corev1.PodFailed), false)
			if !w.clk.Held(holdRecover(u)) {
				t.Fatal("second failure: no recover hold")
			}
			wl.Status.Conditions = append(wl.Status.Conditions, cond("Finished", "Failed", 5))
			w.onWorkload(wl, false)
			if w.clk.Held(holdRecover(u)) {
				t.Error("recover held after the workload finished")
			}
		})
	}
}

// TestWatcherNewPodEndsFinishHold: a one-pod Job whose pod fails leaves no live pod (the finish
// hold: the Workload may be about to finish) and owes a replacement (recover); the replacement
// means the workload goes on, so it ends both holds, and the finish hold is placed afresh when
// the replacement ends.
func TestWatcherNewPodEndsFinishHold(t *testing.T) {
	w, _, p := watchFixture(t)
	top := batchJobs(t, p, 1)[0].objects[0]
	w.onWorkload(kueueWorkload(top, "Job", 1, cond("QuotaReserved", "QuotaReserved", 1)), false)
	u := w.units[batchJobs(t, p, 1)[0].id]
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: top.GetNamespace(), UID: types.UID(name),
			Labels: map[string]string{contract.WorkloadLabel: top.GetName()}},
			Spec: corev1.PodSpec{NodeName: "h100-001"}, Status: corev1.PodStatus{Phase: phase}}
	}
	w.onPod(pod("a", corev1.PodRunning), false)
	w.onPod(pod("a", corev1.PodFailed), false)
	if !w.clk.Held(holdFinish(u)) || !w.clk.Held(holdRecover(u)) {
		t.Fatalf("the only pod failed: finish held %v, recover held %v; want both", w.clk.Held(holdFinish(u)), w.clk.Held(holdRecover(u)))
	}
	w.onPod(pod("a2", corev1.PodPending), false)
	if w.clk.Held(holdFinish(u)) || w.clk.Held(holdRecover(u)) {
		t.Fatalf("replacement seen: finish held %v, recover held %v; want neither", w.clk.Held(holdFinish(u)), w.clk.Held(holdRecover(u)))
	}
	w.onPod(pod("a2", corev1.PodRunning), false)
	w.onPod(pod("a2", corev1.PodSucceeded), false)
	if !w.clk.Held(holdFinish(u)) {
		t.Error("the replacement ended: no finish hold")
	}
}
