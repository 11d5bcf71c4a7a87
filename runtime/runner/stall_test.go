package runner

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// TestStallEndsTheRunAndSaysWhy: a run in which nothing changes (no event, the trace clock held
// by a step the control plane owes) ends after --stall-timeout of wall time with a diagnosis that
// names the stuck workloads by state and what holds the clock, and the run stays incomplete.
func TestStallEndsTheRunAndSaysWhy(t *testing.T) {
	var recs []*results.Record
	for _, id := range []string{"stuck-a", "stuck-b"} {
		recs = append(recs, results.NewRecord(&trace.Workload{WorkloadID: id, Namespace: "team-a",
			SchemaVersion: trace.SchemaVersion, WorkloadType: trace.SingleGPUTraining, DurationSec: 60}, "lq", "cq"))
	}
	evlog, err := results.CreateEventLog(filepath.Join(t.TempDir(), results.EventsFile), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer evlog.Close()
	rec, err := results.NewRecorder(recs, evlog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Record(results.Event{T: 0, Workload: "stuck-a", Type: results.EvSubmitted, Object: "team-a/stuck-a"}); err != nil {
		t.Fatal(err)
	}
	clk := simclock.New(simclock.Options{Settle: -1})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	clk.Start(ctx)
	clk.Hold(simclock.Key{Kind: simclock.KindKueue, ID: "kueue"})
	cfg := &Config{StallTimeout: 300 * time.Millisecond}

	why, loopErr := waitDone(ctx, t.Context(), cfg, rec, nil, clk, nil, nil, nil, nil)
	if loopErr != nil || ctx.Err() != nil {
		t.Fatalf("waitDone: loop %v, context %v; want the stall to end it", loopErr, ctx.Err())
	}
	for _, want := range []string{"stalled: no workload changed state", "pending: stuck-a", "unsubmitted: stuck-b", "clock held by", "kueue"} {
		if !strings.Contains(why, want) {
			t.Errorf("diagnosis %q does not say %q", why, want)
		}
	}
	if err := replay.Outcome(results.Meta{Incomplete: why}, nil); !errors.Is(err, replay.ErrIncomplete) {
		t.Errorf("a stalled run's error %v does not wrap replay.ErrIncomplete", err)
	}
}
