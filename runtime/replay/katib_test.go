package replay

import (
	"slices"
	"strconv"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/results"
)

func experiment(t *testing.T, parallel, max, maxFailed int32) *katibv1beta1.Experiment {
	t.Helper()
	job := &batchv1.Job{}
	job.APIVersion, job.Kind = "batch/v1", "Job"
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "lq"}
	job.Spec.Template.Spec.Containers = []corev1.Container{{Name: "trial", Env: []corev1.EnvVar{
		{Name: "LR", Value: "${trialParameters.lr}"}, {Name: "BS", Value: "${trialParameters.bs}"}, {Name: "OPT", Value: "${trialParameters.opt}"}}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(job)
	if err != nil {
		t.Fatal(err)
	}
	e := &katibv1beta1.Experiment{}
	e.Namespace, e.Name = "team-a", "hpo-1"
	e.Spec.ParallelTrialCount, e.Spec.MaxTrialCount, e.Spec.MaxFailedTrialCount = ptr.To(parallel), ptr.To(max), ptr.To(maxFailed)
	e.Spec.Parameters = []katibv1beta1.ParameterSpec{
		{Name: "learning_rate", ParameterType: katibv1beta1.ParameterTypeDouble, FeasibleSpace: katibv1beta1.FeasibleSpace{Min: "0.01", Max: "0.05"}},
		{Name: "batch", ParameterType: katibv1beta1.ParameterTypeInt, FeasibleSpace: katibv1beta1.FeasibleSpace{Min: "16", Max: "18"}},
		{Name: "optimizer", ParameterType: katibv1beta1.ParameterTypeCategorical, FeasibleSpace: katibv1beta1.FeasibleSpace{List: []string{"sgd", "adam"}}},
	}
	e.Spec.TrialTemplate = &katibv1beta1.TrialTemplate{
		TrialSource: katibv1beta1.TrialSource{TrialSpec: &unstructured.Unstructured{Object: obj}},
		TrialParameters: []katibv1beta1.TrialParameterSpec{
			{Name: "lr", Reference: "learning_rate"}, {Name: "bs", Reference: "batch"}, {Name: "opt", Reference: "optimizer"}},
	}
	return e
}

func env(j *batchv1.Job) map[string]string {
	out := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

func TestExperimentPlaysKatib(t *testing.T) {
	x, err := NewExperiment(experiment(t, 2, 5, 1), 7)
	if err != nil {
		t.Fatal(err)
	}
	first, err := x.Next()
	if err != nil || len(first) != 2 {
		t.Fatalf("first batch %d trials (%v), want parallelTrialCount 2", len(first), err)
	}
	if more, _ := x.Next(); len(more) != 0 {
		t.Fatalf("%d more trials while 2 run", len(more))
	}
	j := first[1].Job
	if first[1].N != 1 || j.Name != "hpo-1-trial-1" || j.Namespace != "team-a" || j.Labels[contract.Trial] != "1" ||
		j.Labels[contract.WorkloadLabel] != "hpo-1" || j.Labels["kueue.x-k8s.io/queue-name"] != "lq" {
		t.Errorf("trial %d %s/%s labels %v", first[1].N, j.Namespace, j.Name, j.Labels)
	}
	// Katib's random search: doubles in [min, max], ints in [min, max] inclusive, lists by value.
	for _, tr := range first {
		v := env(tr.Job)
		lr, err := strconv.ParseFloat(v["LR"], 64)
		if err != nil || lr < 0.01 || lr > 0.05 {
			t.Errorf("trial %d: LR %q outside [0.01, 0.05]", tr.N, v["LR"])
		}
		if !slices.Contains([]string{"16", "17", "18"}, v["BS"]) || !slices.Contains([]string{"sgd", "adam"}, v["OPT"]) {
			t.Errorf("trial %d: BS %q, OPT %q outside their feasible space", tr.N, v["BS"], v["OPT"])
		}
	}
	// Same seed, same draws; another seed, other draws for some trial.
	again, _ := NewExperiment(experiment(t, 2, 5, 1), 7)
	rerun, _ := again.Next()
	other, _ := NewExperiment(experiment(t, 2, 5, 1), 8)
	diff, _ := other.Next()
	if env(rerun[0].Job)["LR"] != env(first[0].Job)["LR"] || env(rerun[1].Job)["LR"] != env(j)["LR"] {
		t.Error("the same seed drew other parameters")
	}
	if env(diff[0].Job)["LR"] == env(first[0].Job)["LR"] && env(diff[1].Job)["LR"] == env(j)["LR"] {
		t.Error("another seed drew the same learning rates")
	}
	// Two failures of five with maxFailedTrialCount 1: the experiment fails, decided by the last.
	created := 2
	for n := range 5 {
		outcome, more := x.Finish(n, n < 2)
		if again, _ := x.Finish(n, false); again != "" {
			t.Fatalf("trial %d: a duplicate finish counted", n)
		}
		if want := n < 3; more != want {
			t.Errorf("trial %d finished: more %v, want %v", n, more, want)
		}
		next, _ := x.Next()
		created += len(next)
		if n < 4 && outcome != "" || n == 4 && outcome != results.StateFailed {
			t.Errorf("trial %d finished: outcome %q", n, outcome)
		}
	}
	if created != 5 {
		t.Errorf("created %d trials, want maxTrialCount 5", created)
	}
}

func TestExperimentRefusesBadTemplates(t *testing.T) {
	for name, mod := range map[string]func(e *katibv1beta1.Experiment){
		"no template":       func(e *katibv1beta1.Experiment) { e.Spec.TrialTemplate = nil },
		"not a Job":         func(e *katibv1beta1.Experiment) { e.Spec.TrialTemplate.TrialSpec.SetKind("PyTorchJob") },
		"unknown reference": func(e *katibv1beta1.Experiment) { e.Spec.TrialTemplate.TrialParameters[0].Reference = "momentum" },
		"zero parallel":     func(e *katibv1beta1.Experiment) { e.Spec.ParallelTrialCount = ptr.To[int32](0) },
	} {
		e := experiment(t, 2, 5, 1)
		mod(e)
		if _, err := NewExperiment(e, 1); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
