package runner

import (
	"sort"
	"sync"

	batchv1 "k8s.io/api/batch/v1"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// Katib on KWOK: the runner plays Katib's part through replay.Experiment, as the sim engine
// does; this file adds what the cluster engine needs around it: the watcher and the submitter
// share the experiments, a trial Job maps back to its workload, and the clock holds from a
// trial's end until the next trials are created.

// trials tracks every experiment of a run. The watcher reports finished trials; the submitter
// creates the next ones (through more), so every create goes through one rate limiter.
type trials struct {
	// clk, when set, is held from a trial's end until the next trials are created (trialsHold).
	clk   *simclock.Clock
	mu    sync.Mutex
	sets  map[string]*replay.Experiment // by workload id
	byJob map[string]trialRef           // "namespace/job name" → trial
	// pending holds the experiments that may start more trials; wake tells the submitter.
	pending map[string]bool
	wake    chan struct{}
}

type trialRef struct {
	id string
	n  int
}

func newTrials() *trials {
	return &trials{sets: map[string]*replay.Experiment{}, byJob: map[string]trialRef{}, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// takePending returns the experiments that may start more trials, sorted, and clears the set.
func (t *trials) takePending() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]string, 0, len(t.pending))
	for id := range t.pending {
		ids = append(ids, id)
	}
	clear(t.pending)
	sort.Strings(ids)
	return ids
}

// add prepares the trials of an experiment.
func (t *trials) add(id string, e *katibv1beta1.Experiment, seed uint64) (*replay.Experiment, error) {
	x, err := replay.NewExperiment(e, seed)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.sets[id] = x
	t.mu.Unlock()
	return x, nil
}

// next returns the trial Jobs to create now (room under parallelTrialCount and maxTrialCount)
// and registers them.
func (t *trials) next(id string) ([]*batchv1.Job, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.sets[id]
	if x == nil {
		return nil, nil
	}
	trs, err := x.Next()
	out := make([]*batchv1.Job, 0, len(trs))
	for _, tr := range trs {
		t.byJob[x.Namespace+"/"+tr.Job.Name] = trialRef{id: id, n: tr.N}
		out = append(out, tr.Job)
	}
	return out, err
}

// created ends the hold on experiment id's next trials, unless more are pending: the submitter
// calls it once the trials it took are created (their own submit holds now cover them).
func (t *trials) created(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.pending[id] && t.clk != nil {
		t.clk.Release(trialsHold(id))
	}
}

// lookup returns the workload id of a trial Job.
func (t *trials) lookup(ns, job string) (trialRef, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.byJob[ns+"/"+job]
	return r, ok
}

// finish records a finished trial. It returns the experiment's outcome when this was its last
// trial ("" otherwise) and asks the submitter for the next trials, holding the clock until they are
// created (created releases the hold).
func (t *trials) finish(r trialRef, failed bool) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.sets[r.id]
	if x == nil {
		return ""
	}
	outcome, more := x.Finish(r.n, failed)
	if more {
		t.pending[r.id] = true
		if t.clk != nil {
			t.clk.HoldFor(trialsHold(r.id), submitHoldLimit)
		}
		select {
		case t.wake <- struct{}{}:
		default: // the submitter has a wake-up queued already
		}
	}
	return outcome
}
