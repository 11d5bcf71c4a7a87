package render

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	katibcommon "github.com/kubeflow/katib/pkg/apis/controller/common/v1beta1"
	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
)

var experimentIntegration = Integration{
	Kind:        Experiment{},
	GVK:         katibv1beta1.SchemeGroupVersion.WithKind("Experiment"),
	Resource:    "experiments",
	AddToScheme: katibv1beta1.AddToScheme,
	// Kueue admits the trials, batch/v1 Jobs; the Experiment itself is not queued.
	Kueue: []KueueIntegration{batchJobKueue},
	CRDs: []CRDSource{{Module: "github.com/kubeflow/katib", Version: "v0.14.0", Dir: "katib",
		Files:   []string{"manifests/v1beta1/components/crd/experiment.yaml"},
		Install: `install Katib v0.14.0: kubectl apply -k "github.com/kubeflow/katib.git/manifests/v1beta1/installs/katib-standalone?ref=v0.14.0"`}},
	// No operator: there is no suggestion service on a KWOK cluster, so the runner plays Katib's
	// part and creates the trials (see runtime/runner).
	Status: statusOf(func(e *katibv1beta1.Experiment) Status {
		s := Status{}
		for _, c := range e.Status.Conditions {
			s.Detail += fmt.Sprintf("%s=%s ", c.Type, c.Status)
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case katibv1beta1.ExperimentSucceeded:
				s.Finished, s.Succeeded = true, true
			case katibv1beta1.ExperimentFailed:
				s.Finished = true
			}
		}
		return s
	}),
	// Each trial is a one-pod Job Kueue admits on its own; maxTrialCount of them.
	PodSets: func(o client.Object) ([]PodSet, error) {
		e, ok := o.(*katibv1beta1.Experiment)
		if !ok || e.Spec.TrialTemplate == nil || e.Spec.TrialTemplate.TrialSpec == nil {
			return nil, fmt.Errorf("pod sets: %T is not an Experiment with a trial spec", o)
		}
		var trial batchv1.Job
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(e.Spec.TrialTemplate.TrialSpec.Object, &trial); err != nil {
			return nil, fmt.Errorf("pod sets: trial spec: %w", err)
		}
		return []PodSet{{Name: "trial", Count: int(ptr.Deref(e.Spec.MaxTrialCount, 1) * ptr.Deref(trial.Spec.Parallelism, 1)), Template: trial.Spec.Template}}, nil
	},
}

// trialContainer is the trial's primary container, the one Katib's metrics collector watches.
const trialContainer = "training"

// objectiveGoal is a realistic validation loss to stop at; the trace, not the goal, ends the run.
const objectiveGoal = 0.05

// hpoParameters is the search space: the usual three knobs of a training run.
var hpoParameters = []struct {
	name, env, trialParam string
	spec                  katibv1beta1.ParameterSpec
}{
	{"lr", "LEARNING_RATE", "learningRate", katibv1beta1.ParameterSpec{Name: "lr", ParameterType: katibv1beta1.ParameterTypeDouble,
		FeasibleSpace: katibv1beta1.FeasibleSpace{Min: "0.00001", Max: "0.01"}}},
	{"batch_size", "BATCH_SIZE", "batchSize", katibv1beta1.ParameterSpec{Name: "batch_size", ParameterType: katibv1beta1.ParameterTypeDiscrete,
		FeasibleSpace: katibv1beta1.FeasibleSpace{List: []string{"16", "32", "64", "128", "256"}}}},
	{"optimizer", "OPTIMIZER", "optimizer", katibv1beta1.ParameterSpec{Name: "optimizer", ParameterType: katibv1beta1.ParameterTypeCategorical,
		FeasibleSpace: katibv1beta1.FeasibleSpace{List: []string{"sgd", "adam", "adamw"}}}},
}

// Experiment renders an HPO workload as a Katib Experiment running K trials at once. The
// Experiment itself is not queued: each trial is a batch/v1 Job whose template carries the queue
// and priority labels, so Kueue admits trials one by one. The trace's controller pod is Katib's
// own suggestion service here and is not rendered.
type Experiment struct{}

// Name implements Kind.
func (Experiment) Name() string { return "Experiment" }

// Families implements Kind.
func (Experiment) Families() []trace.Family { return []trace.Family{trace.HPOExperiment} }

// Render implements Kind.
func (Experiment) Render(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) ([]client.Object, error) {
	b, err := newBuild(w, jobs, p, o)
	if err != nil {
		return nil, err
	}
	if err := b.requireRoles("Experiment", trace.RoleController, trace.RoleTrial); err != nil {
		return nil, err
	}
	ti := b.roleIndex(trace.RoleTrial)
	if ti < 0 {
		return nil, fmt.Errorf("an Experiment needs trials")
	}
	b.dropRole(trace.RoleController)
	r := &b.roles[ti]
	tmpl, err := b.podTemplate(r, trialContainer, corev1.RestartPolicyNever)
	if err != nil {
		return nil, err
	}
	c := &tmpl.Spec.Containers[0]
	params := make([]katibv1beta1.ParameterSpec, len(hpoParameters))
	trialParams := make([]katibv1beta1.TrialParameterSpec, len(hpoParameters))
	for i, hp := range hpoParameters {
		params[i] = hp.spec
		trialParams[i] = katibv1beta1.TrialParameterSpec{Name: hp.trialParam, Reference: hp.name}
		c.Env = append(c.Env, corev1.EnvVar{Name: hp.env, Value: "${trialParameters." + hp.trialParam + "}"})
	}
	if b.o.Target == TargetReal {
		// Katib's StdOut collector reads "name=value" lines; a trial without its metric counts as failed.
		c.Command[len(c.Command)-1] += " && echo loss=" + strconv.FormatFloat(objectiveGoal*2, 'g', -1, 64)
	}
	trial := &batchv1.Job{
		TypeMeta:   typeMeta(batchv1.SchemeGroupVersion.String(), "Job"),
		ObjectMeta: metav1.ObjectMeta{Labels: b.queueLabels()},
		Spec:       batchJobSpec(1, tmpl),
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(trial)
	if err != nil {
		return nil, fmt.Errorf("trial template: %w", err)
	}
	delete(u, "status")
	k := int32(r.Replicas)
	exp := &katibv1beta1.Experiment{
		TypeMeta: typeMeta(katibv1beta1.SchemeGroupVersion.String(), "Experiment"),
		ObjectMeta: metav1.ObjectMeta{
			Name:      b.name,
			Namespace: b.ns,
			Labels:    map[string]string{contract.WorkloadLabel: b.name},
		},
		Spec: katibv1beta1.ExperimentSpec{
			Parameters: params,
			Objective: &katibcommon.ObjectiveSpec{
				Type:                katibcommon.ObjectiveTypeMinimize,
				Goal:                ptr.To(objectiveGoal),
				ObjectiveMetricName: "loss",
				MetricStrategies:    []katibcommon.MetricStrategy{{Name: "loss", Value: katibcommon.ExtractByMin}},
			},
			Algorithm: &katibcommon.AlgorithmSpec{AlgorithmName: "random"},
			TrialTemplate: &katibv1beta1.TrialTemplate{
				PrimaryContainerName: trialContainer,
				SuccessCondition:     katibv1beta1.DefaultJobSuccessCondition,
				FailureCondition:     katibv1beta1.DefaultJobFailureCondition,
				TrialParameters:      trialParams,
				TrialSource:          katibv1beta1.TrialSource{TrialSpec: &unstructured.Unstructured{Object: u}},
			},
			ParallelTrialCount: ptr.To(k),
			MaxTrialCount:      ptr.To(k),
			// The trace runs all K trials: no number of failures stops the search early.
			MaxFailedTrialCount: ptr.To(k),
			MetricsCollectorSpec: &katibcommon.MetricsCollectorSpec{
				Collector: &katibcommon.CollectorSpec{Kind: katibcommon.StdOutCollector},
			},
			ResumePolicy: katibv1beta1.NeverResume,
		},
	}
	return []client.Object{exp}, nil
}
