package runner

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// Katib on KWOK: there is no suggestion service, so the runner plays Katib's part. For every
// Experiment it creates the trial batch/v1 Jobs from spec.trialTemplate.trialSpec (keeping the
// queue and priority labels the template carries, so Kueue admits trials one by one exactly as
// under Katib), named <experiment>-trial-<n>, at most parallelTrialCount at a time, up to
// maxTrialCount. The Experiment object itself is not created, so a cluster with a real Katib
// controller does not run the trials twice. The experiment finishes when all its trials have;
// it fails when more than maxFailedTrialCount of them failed, as Katib decides.

// trialSet is one experiment's trials.
type trialSet struct {
	id, ns, name             string
	tmpl                     *batchv1.Job
	params                   map[string]katibv1beta1.ParameterSpec // by parameter name
	refs                     map[string]string                     // trial parameter → parameter
	parallel, max, maxFailed int
	created, done, failed    int
	finished                 map[int]bool
	seed                     uint64
}

// trials tracks every experiment of a run. The watcher reports finished trials; the submitter
// creates the next ones (through more), so every create goes through one rate limiter.
type trials struct {
	// clk, when set, is held from a trial's end until the next trials are created (trialsHold).
	clk   *simclock.Clock
	mu    sync.Mutex
	sets  map[string]*trialSet // by workload id
	byJob map[string]trialRef  // "namespace/job name" → trial
	// pending holds the experiments that may start more trials; wake tells the submitter.
	pending map[string]bool
	wake    chan struct{}
}

type trialRef struct {
	id string
	n  int
}

func newTrials() *trials {
	return &trials{sets: map[string]*trialSet{}, byJob: map[string]trialRef{}, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
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
func (t *trials) add(id string, e *katibv1beta1.Experiment, seed int64) (*trialSet, error) {
	tt := e.Spec.TrialTemplate
	if tt == nil || tt.TrialSpec == nil {
		return nil, fmt.Errorf("experiment %s: no trialTemplate.trialSpec", e.Name)
	}
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tt.TrialSpec.Object, &job); err != nil {
		return nil, fmt.Errorf("experiment %s: trialSpec is not a batch/v1 Job: %w", e.Name, err)
	}
	if k := tt.TrialSpec.GetKind(); k != "Job" {
		return nil, fmt.Errorf("experiment %s: trialSpec kind %q: the runner creates batch/v1 Job trials only", e.Name, k)
	}
	s := &trialSet{id: id, ns: e.Namespace, name: e.Name, tmpl: &job, finished: map[int]bool{},
		params: map[string]katibv1beta1.ParameterSpec{}, refs: map[string]string{},
		parallel: int(deref(e.Spec.ParallelTrialCount, 3)), max: int(deref(e.Spec.MaxTrialCount, 1))}
	s.maxFailed = int(deref(e.Spec.MaxFailedTrialCount, int32(s.max)))
	if s.parallel < 1 || s.max < 1 {
		return nil, fmt.Errorf("experiment %s: parallelTrialCount %d, maxTrialCount %d: must be ≥ 1", e.Name, s.parallel, s.max)
	}
	for _, p := range e.Spec.Parameters {
		s.params[p.Name] = p
	}
	for _, tp := range tt.TrialParameters {
		if _, ok := s.params[tp.Reference]; !ok {
			return nil, fmt.Errorf("experiment %s: trial parameter %s references unknown parameter %q", e.Name, tp.Name, tp.Reference)
		}
		s.refs[tp.Name] = tp.Reference
	}
	h := fnv.New64a()
	h.Write([]byte(e.Namespace + "/" + e.Name))
	s.seed = h.Sum64() ^ uint64(seed)
	t.mu.Lock()
	t.sets[id] = s
	t.mu.Unlock()
	return s, nil
}

// next returns the trial Jobs to create now (room under parallelTrialCount and maxTrialCount)
// and registers them.
func (t *trials) next(id string) ([]*batchv1.Job, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.sets[id]
	if s == nil {
		return nil, nil
	}
	var out []*batchv1.Job
	for s.created-s.done < s.parallel && s.created < s.max {
		j, err := s.trial(s.created)
		if err != nil {
			return out, err
		}
		t.byJob[s.ns+"/"+j.Name] = trialRef{id: id, n: s.created}
		s.created++
		out = append(out, j)
	}
	return out, nil
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
	s := t.sets[r.id]
	if s == nil || s.finished[r.n] {
		t.mu.Unlock()
		return ""
	}
	s.finished[r.n] = true
	s.done++
	if failed {
		s.failed++
	}
	outcome := ""
	if s.done == s.max {
		outcome = results.StateSucceeded
		if s.failed > s.maxFailed {
			outcome = results.StateFailed
		}
	}
	if s.created < s.max {
		t.pending[r.id] = true
		if t.clk != nil {
			t.clk.HoldFor(trialsHold(r.id), submitHoldLimit)
		}
		select {
		case t.wake <- struct{}{}:
		default: // the submitter has a wake-up queued already
		}
	}
	t.mu.Unlock()
	return outcome
}

// trial builds trial n: the template with its name, labels and sampled parameters.
func (s *trialSet) trial(n int) (*batchv1.Job, error) {
	j := s.tmpl.DeepCopy()
	j.APIVersion, j.Kind = "batch/v1", "Job"
	j.Name = s.name + "-trial-" + strconv.Itoa(n)
	j.Namespace = s.ns
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	j.Labels[contract.Trial] = strconv.Itoa(n)
	j.Labels[contract.WorkloadLabel] = s.name
	rng := rand.New(rand.NewPCG(s.seed, uint64(n)))
	values := map[string]string{}
	names := make([]string, 0, len(s.refs))
	for tp := range s.refs {
		names = append(names, tp)
	}
	sort.Strings(names) // draws in a fixed order, so a trial's parameters are reproducible
	for _, tp := range names {
		v, err := sample(rng, s.params[s.refs[tp]])
		if err != nil {
			return nil, fmt.Errorf("experiment %s: %w", s.name, err)
		}
		values[tp] = v
	}
	pod := &j.Spec.Template.Spec
	for ci := range pod.Containers {
		c := &pod.Containers[ci]
		for ei := range c.Env {
			c.Env[ei].Value = substitute(c.Env[ei].Value, values)
		}
		for ai := range c.Args {
			c.Args[ai] = substitute(c.Args[ai], values)
		}
		for ai := range c.Command {
			c.Command[ai] = substitute(c.Command[ai], values)
		}
	}
	return j, nil
}

// substitute replaces ${trialParameters.NAME} as Katib's trial template does.
func substitute(s string, values map[string]string) string {
	if !strings.Contains(s, "${trialParameters.") {
		return s
	}
	for name, v := range values {
		s = strings.ReplaceAll(s, "${trialParameters."+name+"}", v)
	}
	return s
}

// sample draws a value the way Katib's random search does: uniform in [min, max] for numbers,
// uniform over the list for discrete and categorical parameters.
func sample(rng *rand.Rand, p katibv1beta1.ParameterSpec) (string, error) {
	fs := p.FeasibleSpace
	switch p.ParameterType {
	case katibv1beta1.ParameterTypeDiscrete, katibv1beta1.ParameterTypeCategorical:
		if len(fs.List) == 0 {
			return "", fmt.Errorf("parameter %s: empty feasibleSpace.list", p.Name)
		}
		return fs.List[rng.IntN(len(fs.List))], nil
	case katibv1beta1.ParameterTypeDouble, katibv1beta1.ParameterTypeInt:
		lo, err1 := strconv.ParseFloat(fs.Min, 64)
		hi, err2 := strconv.ParseFloat(fs.Max, 64)
		if err1 != nil || err2 != nil || hi < lo {
			return "", fmt.Errorf("parameter %s: feasibleSpace min %q max %q", p.Name, fs.Min, fs.Max)
		}
		if p.ParameterType == katibv1beta1.ParameterTypeInt {
			return strconv.FormatInt(int64(lo)+rng.Int64N(int64(hi)-int64(lo)+1), 10), nil
		}
		return strconv.FormatFloat(lo+rng.Float64()*(hi-lo), 'g', 6, 64), nil
	default:
		return "", fmt.Errorf("parameter %s: unknown type %q", p.Name, p.ParameterType)
	}
}

func deref(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
