package sim

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/kueuelab/kueuelab/runtime/sim/des"
)

// lqController plays the controller-runtime side of Kueue's LocalQueue controller when admission
// fair sharing is on: the reconciler itself is Kueue's (kueuelib.ReconcileLocalQueue). A
// LocalQueue is reconciled once at the start, after every event whose workload writes Kueue
// reported to its watchers (the workqueue's deduplication: one reconcile per LocalQueue per
// instant), and when the reconciler asked to run again (RequeueAfter: a LocalQueue keeps its
// earliest pending requeue, as the delaying workqueue does).
type lqController struct {
	s      *sim
	timers map[types.NamespacedName]*des.Event
}

func newLQController(s *sim) *lqController {
	if !s.kq.AFS() {
		return nil
	}
	return &lqController{s: s, timers: map[types.NamespacedName]*des.Event{}}
}

// start reconciles every LocalQueue (the controller's initial list).
func (c *lqController) start() {
	if c == nil {
		return
	}
	for _, key := range c.s.kq.LocalQueues() {
		c.reconcile(key)
	}
}

// notified reconciles the LocalQueues Kueue notified since the last call.
func (c *lqController) notified() {
	if c == nil {
		return
	}
	for _, key := range c.s.kq.TakeNotifiedLocalQueues() {
		c.reconcile(key)
	}
}

func (c *lqController) reconcile(key types.NamespacedName) {
	after, err := c.s.kq.ReconcileLocalQueue(key)
	if err != nil {
		c.s.fail(err)
		return
	}
	if after <= 0 {
		return
	}
	at := c.s.loop.Now() + after.Seconds()
	if t := c.timers[key]; t != nil {
		if t.At() <= at {
			return
		}
		t.Cancel()
	}
	c.timers[key] = c.s.loop.At(at, func() {
		delete(c.timers, key)
		c.reconcile(key)
	})
}
