package sim

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kueuelab/kueuelab/runtime/controlplane"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// writes carries Kueue's Workload writes through the control-plane model: each waits for a token
// of Kueue's client and reaches the watchers (Kueue's own handlers, the lifecycle) when it is
// answered. The Store applies a write at once, as Kueue's cache assumes an admission at once;
// what waits is everyone else seeing it. The writes to one Workload are seen in the order they
// were made, as one watch stream delivers them.
type writes struct {
	s      *sim
	client *controlplane.Client
	// harness: the jobs are Kueue's harness's (Model.HarnessJobs): created by its generator,
	// finished and released by its runner's one worker, with no PodsReady to write.
	harness bool
	runner  *controlplane.Worker
	// pending is, per Workload with writes not yet seen, how many and when the last will be.
	pending map[types.NamespacedName]pendingWrites
}

type pendingWrites struct {
	n    int
	last float64
}

func newWrites(s *sim, m *controlplane.Model, c *controlplane.Client) *writes {
	return &writes{s: s, client: c, harness: m.HarnessJobs, runner: m.NewWorker(), pending: map[types.NamespacedName]pendingWrites{}}
}

// send issues changes at the current time. The scheduler's admission writes go first, at once,
// each from its own goroutine (in the cycle they precede the writes for the heads it could not
// admit); the writer makes its other writes one after the other, each when the one before is
// answered, as Kueue's scheduler does for the heads it requeues. It returns the changes to
// deliver now, in order, and when the writer's last write is answered.
func (w *writes) send(changes []kueuelib.Change) (now []kueuelib.Change, answered float64) {
	t := w.s.loop.Now()
	answered = t
	// Stable: each Workload's writes keep their order (one Workload's admission is never
	// preceded by another write of it in the same batch).
	slices.SortStableFunc(changes, func(a, b kueuelib.Change) int {
		switch {
		case a.Async == b.Async:
			return 0
		case a.Async:
			return -1
		}
		return 1
	})
	for _, c := range changes {
		var at float64
		switch {
		case w.harness && c.By == kueuelib.ByJobCreate:
			at = w.client.Seen(t) // the harness's generator
		case w.harness && c.By == kueuelib.ByJob:
			at = w.runner.Write(t)
		case w.harness && c.By == kueuelib.ByJobPodsReady:
			// The harness's Workloads have no pods; the sim's stand in for the runner's timer and
			// report ready at no cost, so that Kueue's waitForPodsReady (on by default) does not
			// evict a workload that runs longer than its timeout, which the harness's own
			// runtimes (at most seconds) never do.
			at = t
		case c.By == kueuelib.ByRestore:
			at = t
		case c.By == kueuelib.ByBooster:
			// The priority booster writes with a client of its own: Kueue sees its writes after
			// the watch latency, and they take nothing from Kueue's budget.
			at = w.client.Seen(t)
		case c.Async:
			at = w.client.Write(t)
		default:
			at = w.client.Write(answered)
			answered = at
		}
		key := c.Key()
		p, ok := w.pending[key]
		if ok {
			at = max(at, p.last)
		}
		if at <= t {
			now = append(now, c)
			continue
		}
		w.pending[key] = pendingWrites{n: p.n + 1, last: at}
		w.s.loop.At(at, func() {
			if p := w.pending[key]; p.n > 1 {
				w.pending[key] = pendingWrites{n: p.n - 1, last: p.last}
			} else {
				delete(w.pending, key)
			}
			w.s.pods.batch(func() { w.s.deliver(c) })
		})
	}
	return now, answered
}
