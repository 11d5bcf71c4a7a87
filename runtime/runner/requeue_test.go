package runner

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// TestRequeueBatchesAtTheirTraceTime: a batch seen waiting at trace 0 stops the clock at trace
// 1 (one batch period later) and the settler holds it there until Kueue has run the batch; one
// Kueue runs before its trace time counts as early, with its lead.
func TestRequeueBatchesAtTheirTraceTime(t *testing.T) {
	clk := simclock.New(simclock.Options{Settle: -1})
	hold := simclock.Key{Kind: simclock.KindKueue, ID: "test"}
	clk.Hold(hold) // the event that notified Kueue is being handled at trace 0
	clk.Start(t.Context())
	defer clk.Stop()
	settler := simclock.Key{Kind: simclock.KindKueue, ID: "kueue"}
	var pokes atomic.Int32
	b := newRequeueBatches(clk, 1)
	b.poke = func() { clk.Hold(settler); pokes.Add(1) }

	if why := b.observe(map[string]float64{"ClusterQueue/q": 1, "ClusterQueue/idle": 0}); why != "" {
		t.Fatalf("a batch not due yet: %q", why)
	}
	clk.Release(hold)
	deadline := time.Now().Add(10 * time.Second)
	for pokes.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if pokes.Load() != 1 || clk.Now() != 1 || !clk.Held(settler) {
		t.Fatalf("pokes %d, trace %g, settler holds %v: want the clock stopped at 1 with the settler holding it",
			pokes.Load(), clk.Now(), clk.Held(settler))
	}
	if why := b.observe(map[string]float64{"ClusterQueue/q": 1}); !strings.Contains(why, "ClusterQueue/q's requeue batch due at 1.000") {
		t.Errorf("a due batch Kueue has not run: %q", why)
	}
	if why := b.observe(map[string]float64{"ClusterQueue/q": 0}); why != "" {
		t.Errorf("the batch ran: %q", why)
	}

	// Seen at 1, run by Kueue while the clock is still there: a second early.
	if why := b.observe(map[string]float64{"Cohort/c": 1}); why != "" {
		t.Fatalf("%q", why)
	}
	b.observe(map[string]float64{"Cohort/c": 0})
	clk.Release(settler)
	if ran, early, lead := b.stats(); ran != 2 || early != 1 || lead != 1 {
		t.Errorf("ran %d, early %d (lead %g s), want 2, 1, 1", ran, early, lead)
	}
}
