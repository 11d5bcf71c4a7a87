package kueuelib

import (
	"context"
	"fmt"
	"reflect"
	"unsafe"

	"k8s.io/utils/clock"
	config "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/scheduler"
	"sigs.k8s.io/kueue/pkg/util/wait"
	"sigs.k8s.io/kueue/pkg/workload"
)

// Seam 1: one scheduling cycle. Kueue runs (*Scheduler).schedule in a loop behind a real-time
// backoff (Start → wait.UntilWithBackoff); its unit tests call schedule directly, from inside the
// package. The sim calls the same method, once per virtual cycle, through a linkname to its
// symbol, so that every cycle is Kueue's own code and the loop around it is virtual. schedule
// blocks in queue.Manager.Heads while no ClusterQueue has a head, so the sim calls it only when
// heads.any reports one (seam 2).
//
//go:linkname schedule sigs.k8s.io/kueue/pkg/scheduler.(*Scheduler).schedule
func schedule(s *scheduler.Scheduler, ctx context.Context) wait.SpeedSignal

// Seam 2: whether a cycle would find a head. The queue manager exposes pending counts that
// include the inadmissible workloads and the one in flight; a cycle pops only from each
// ClusterQueue's heap. heads holds, per ClusterQueue, a pointer to its heap's key slice (the
// manager's unexported hm hierarchy, each ClusterQueue's unexported heap.data.keys of type
// []workload.Reference), found once through reflection, so that asking costs a length per queue.
type heads struct {
	keys  []*[]workload.Reference
	names []kueue.ClusterQueueReference
	cqs   []*qcache.ClusterQueue
}

// newHeads binds to the heaps of the named ClusterQueues of m.
func newHeads(m *qcache.Manager, names []kueue.ClusterQueueReference) (*heads, error) {
	seam := func(format string, args ...any) error {
		return fmt.Errorf("kueue %s seam: "+format, append([]any{KueueVersion}, args...)...)
	}
	hmField := reflect.ValueOf(m).Elem().FieldByName("hm")
	if !hmField.IsValid() {
		return nil, seam("queue.Manager has no field hm")
	}
	hm := reflect.NewAt(hmField.Type(), unsafe.Pointer(hmField.UnsafeAddr()))
	getCQ := hm.MethodByName("ClusterQueue")
	if !getCQ.IsValid() {
		return nil, seam("queue.Manager.hm has no method ClusterQueue")
	}
	h := &heads{}
	for _, name := range names {
		out := getCQ.Call([]reflect.Value{reflect.ValueOf(name)})
		cq, ok := out[0].Interface().(*qcache.ClusterQueue)
		if !ok || cq == nil {
			return nil, seam("the queue manager has no ClusterQueue %s", name)
		}
		keysField := reflect.ValueOf(cq).Elem().FieldByName("heap")
		for _, f := range []string{"data", "keys"} {
			if keysField.IsValid() {
				keysField = keysField.FieldByName(f)
			}
		}
		if !keysField.IsValid() {
			return nil, seam("queue.ClusterQueue has no field heap.data.keys")
		}
		keys, ok := reflect.NewAt(keysField.Type(), unsafe.Pointer(keysField.UnsafeAddr())).Interface().(*[]workload.Reference)
		if !ok {
			return nil, seam("ClusterQueue.heap.data.keys is %s, not []workload.Reference", keysField.Type())
		}
		// The keys are the heap's content: check against Len, the heap's own count.
		if l := reflect.NewAt(reflect.ValueOf(cq).Elem().FieldByName("heap").Type(),
			unsafe.Pointer(reflect.ValueOf(cq).Elem().FieldByName("heap").UnsafeAddr())).MethodByName("Len"); !l.IsValid() ||
			l.Call(nil)[0].Int() != int64(len(*keys)) {
			return nil, seam("ClusterQueue.heap.data.keys does not hold the heap's items")
		}
		h.keys = append(h.keys, keys)
		h.names = append(h.names, name)
		h.cqs = append(h.cqs, cq)
	}
	return h, nil
}

// Seam 6: the inadmissible workloads a ClusterQueue keeps aside. A pending Workload Kueue tried and
// could not admit waits outside the heap until something in its ClusterQueue or cohort changes;
// only Kueue's memory says which. The queue's exported DumpInadmissible lists them; a restored
// Workload is put back there after the LocalQueue's adoption pushed it to the heap, by the
// version's unexported move (moveToInadmissible, in compat_*.go).

// parked lists the inadmissible Workloads of every ClusterQueue ("namespace/name").
func (h *heads) parked() map[string]bool {
	out := map[string]bool{}
	for _, cq := range h.cqs {
		keys, _ := cq.DumpInadmissible()
		for _, k := range keys {
			out[string(k)] = true
		}
	}
	return out
}

// park moves the Workload key from a heap to its ClusterQueue's inadmissible workloads; found is
// false when no heap holds it.
func (h *heads) park(key workload.Reference) (found bool, err error) {
	for _, cq := range h.cqs {
		if info := cq.Info(key); info != nil {
			return true, moveToInadmissible(cq, key, info)
		}
	}
	return false, nil
}

// any reports whether a ClusterQueue for which active is true has a workload in its heap.
func (h *heads) any(active func(kueue.ClusterQueueReference) bool) bool {
	for i, k := range h.keys {
		if len(*k) > 0 && active(h.names[i]) {
			return true
		}
	}
	return false
}

// active is the number of ClusterQueues for which active is true with a workload in their heap.
func (h *heads) active(active func(kueue.ClusterQueueReference) bool) int {
	n := 0
	for i, k := range h.keys {
		if len(*k) > 0 && active(h.names[i]) {
			n++
		}
	}
	return n
}

// count is the number of workloads in the heaps (for tests and progress).
func (h *heads) count() int {
	n := 0
	for _, k := range h.keys {
		n += len(*k)
	}
	return n
}

// Seam 3: the workload controller's clock. core.WorkloadReconciler keeps its clock in the
// unexported field clock, always the real clock in v0.19.2 (no option sets it); its event handlers
// read it when they account admission fair sharing usage (updateAfsConsumedUsage). The sim sets
// it to the virtual clock, so the handlers run Kueue's own code on virtual time.
func setReconcilerClock(r *core.WorkloadReconciler, c clock.Clock) error {
	f := reflect.ValueOf(r).Elem().FieldByName("clock")
	if !f.IsValid() || f.Type() != reflect.TypeFor[clock.Clock]() {
		return fmt.Errorf("kueue %s seam: core.WorkloadReconciler has no field clock of type clock.Clock", KueueVersion)
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(c))
	return nil
}

// Seam 5: waitForPodsReady in the workload controller. Kueue's core.SetupControllers gives the
// reconciler its waitForPodsReady settings through core.WithWaitForPodsReady, whose argument's
// type is unexported, built from the Configuration by the unexported core.waitForPodsReady. The
// sim calls that function (linknamed; its result is a pointer, taken here untyped) and sets the
// reconciler's unexported field waitForPodsReady to it, checked against the field's type.
//
//go:linkname waitForPodsReadySettings sigs.k8s.io/kueue/pkg/controller/core.waitForPodsReady
func waitForPodsReadySettings(cfg *config.WaitForPodsReady) unsafe.Pointer

func setReconcilerWaitForPodsReady(r *core.WorkloadReconciler, cfg *config.WaitForPodsReady) error {
	f := reflect.ValueOf(r).Elem().FieldByName("waitForPodsReady")
	if !f.IsValid() || f.Kind() != reflect.Pointer || f.Type().Elem().Name() != "waitForPodsReadyConfig" {
		return fmt.Errorf("kueue %s seam: core.WorkloadReconciler has no field waitForPodsReady of type *waitForPodsReadyConfig", KueueVersion)
	}
	p := waitForPodsReadySettings(cfg)
	if p == nil {
		return fmt.Errorf("kueue %s seam: waitForPodsReady is off (the DisableWaitForPodsReady gate?)", KueueVersion)
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.NewAt(f.Type().Elem(), p))
	return nil
}
