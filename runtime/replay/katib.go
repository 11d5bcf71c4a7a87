package replay

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/results"
)

// Katib's part. On KWOK there is no Katib suggestion service, so a replay plays Katib's part
// for every Experiment: it creates the trial batch/v1 Jobs from spec.trialTemplate.trialSpec
// (keeping the queue and priority labels the template carries, so Kueue admits trials one by one
// exactly as under Katib), named <experiment>-trial-<n>, at most parallelTrialCount at a time, up
// to maxTrialCount, each with its parameters drawn as Katib's random search draws them. The
// Experiment object itself is not created, so a cluster with a real Katib controller does not
// run the trials twice. The experiment finishes when all its trials have; it fails when more
// than maxFailedTrialCount of them failed, as Katib decides. Both engines use this one type, so a
// trial is the same Job, with the same parameter values, on either.

// Experiment is one Katib Experiment's trials. It is not safe for concurrent use.
type Experiment struct {
	Namespace, Name string

	tmpl                     *batchv1.Job
	params                   map[string]katibv1beta1.ParameterSpec // by parameter name
	names                    []string                              // trial parameters, sorted
	refs                     map[string]string                     // trial parameter → parameter
	parallel, max, maxFailed int
	created, done, failed    int
	finished                 map[int]bool
	seed                     uint64
}

// NewExperiment prepares the trials of Experiment e. The run's seed and the Experiment's
// namespace/name seed the parameter draws.
func NewExperiment(e *katibv1beta1.Experiment, seed uint64) (*Experiment, error) {
	tt := e.Spec.TrialTemplate
	if tt == nil || tt.TrialSpec == nil {
		return nil, fmt.Errorf("experiment %s: no trialTemplate.trialSpec", e.Name)
	}
	if k := tt.TrialSpec.GetKind(); k != "Job" {
		return nil, fmt.Errorf("experiment %s: trialSpec kind %q: trials are batch/v1 Jobs", e.Name, k)
	}
	var job batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tt.TrialSpec.Object, &job); err != nil {
		return nil, fmt.Errorf("experiment %s: trialSpec is not a batch/v1 Job: %w", e.Name, err)
	}
	x := &Experiment{Namespace: e.Namespace, Name: e.Name, tmpl: &job, finished: map[int]bool{},
		params: map[string]katibv1beta1.ParameterSpec{}, refs: map[string]string{},
		parallel: int(deref(e.Spec.ParallelTrialCount, 3)), max: int(deref(e.Spec.MaxTrialCount, 1))}
	x.maxFailed = int(deref(e.Spec.MaxFailedTrialCount, int32(x.max)))
	if x.parallel < 1 || x.max < 1 {
		return nil, fmt.Errorf("experiment %s: parallelTrialCount %d, maxTrialCount %d: must be ≥ 1", e.Name, x.parallel, x.max)
	}
	for _, p := range e.Spec.Parameters {
		x.params[p.Name] = p
	}
	for _, tp := range tt.TrialParameters {
		if _, ok := x.params[tp.Reference]; !ok {
			return nil, fmt.Errorf("experiment %s: trial parameter %s references unknown parameter %q", e.Name, tp.Name, tp.Reference)
		}
		x.refs[tp.Name] = tp.Reference
		x.names = append(x.names, tp.Name)
	}
	// Draws in a fixed order, so a trial's parameters are reproducible.
	slices.Sort(x.names)
	h := fnv.New64a()
	h.Write([]byte(e.Namespace + "/" + e.Name))
	x.seed = h.Sum64() ^ seed
	return x, nil
}

// Trial is a trial Job to create and its index.
type Trial struct {
	N   int
	Job *batchv1.Job
}

// Next returns the trials there is room for now (under parallelTrialCount and maxTrialCount),
// counted as created.
func (x *Experiment) Next() ([]Trial, error) {
	var out []Trial
	for x.created-x.done < x.parallel && x.created < x.max {
		j, err := x.trial(x.created)
		if err != nil {
			return out, err
		}
		out = append(out, Trial{N: x.created, Job: j})
		x.created++
	}
	if x.created == x.max {
		x.tmpl = nil // every trial exists: a million-workload run need not keep the templates
	}
	return out, nil
}

// Finish records that trial n finished. It returns the experiment's outcome when this was its
// last trial ("" otherwise), and whether trials remain to be created (Next has more to give).
// A trial reported twice counts once.
func (x *Experiment) Finish(n int, failed bool) (outcome string, more bool) {
	if x.finished[n] {
		return "", false
	}
	x.finished[n] = true
	x.done++
	if failed {
		x.failed++
	}
	if x.done == x.max {
		outcome = results.StateSucceeded
		if x.failed > x.maxFailed {
			outcome = results.StateFailed
		}
	}
	return outcome, x.created < x.max
}

// trial builds trial n: the template with its name, labels and sampled parameters.
func (x *Experiment) trial(n int) (*batchv1.Job, error) {
	j := x.tmpl.DeepCopy()
	j.APIVersion, j.Kind = "batch/v1", "Job"
	j.Name = TrialName(x.Name, n)
	j.Namespace = x.Namespace
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	j.Labels[contract.Trial] = strconv.Itoa(n)
	j.Labels[contract.WorkloadLabel] = x.Name
	if len(x.names) == 0 {
		return j, nil
	}
	rng := rand.New(rand.NewPCG(x.seed, uint64(n)))
	values := make(map[string]string, len(x.names))
	for _, tp := range x.names {
		v, err := sample(rng, x.params[x.refs[tp]])
		if err != nil {
			return nil, fmt.Errorf("experiment %s: %w", x.Name, err)
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

// TrialName is the name of an experiment's trial n, as Katib's trials are named here.
func TrialName(experiment string, n int) string { return experiment + "-trial-" + strconv.Itoa(n) }

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
