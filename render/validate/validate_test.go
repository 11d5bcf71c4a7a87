package validate

import (
	"errors"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kueuelab/kueuelab/render"
)

// newValidator builds the Validator once for the whole test binary; New is deliberately not cheap.
var newValidator = sync.OnceValues(func() (*Validator, error) { return New(render.DefaultRegistry().AddToScheme) })

func validator(t testing.TB) *Validator {
	t.Helper()
	v, err := newValidator()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return v
}

func TestValidObjectsPass(t *testing.T) {
	v := validator(t)
	objs := []runtime.Object{
		jobSet(), job(), pyTorchJob(), tfJob(), mpiJob(), clusterTrainingRuntime(), trainJob(),
		experiment(trialJob()), experiment(jobSet()),
		clusterQueue(), clusterQueueA100(), clusterQueueV1beta1(), stage(),
	}
	objs = append(objs, kueueClusterObjects()...)
	for _, obj := range objs {
		u := toUnstructured(t, v, obj)
		t.Run(u.GetKind()+"/"+u.GetAPIVersion()+"/"+u.GetName(), func(t *testing.T) {
			if err := v.Validate(obj); err != nil {
				t.Errorf("typed: %v", err)
			}
			if err := v.Validate(u); err != nil {
				t.Errorf("unstructured: %v", err)
			}
		})
	}
}

// toUnstructured converts like Validate does, so mutations start from a valid object.
func toUnstructured(t testing.TB, v *Validator, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy()
	}
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	delete(c, "status")
	gvks, _, err := v.scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	c["apiVersion"], c["kind"] = gvks[0].GroupVersion().String(), gvks[0].Kind
	return &unstructured.Unstructured{Object: c}
}

// set writes value at path (strings are map keys, ints are list indexes), creating maps as needed.
func set(t *testing.T, obj map[string]any, value any, path ...any) {
	t.Helper()
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch k := p.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				m[k] = value
				return
			}
			if _, ok := m[k]; !ok {
				m[k] = map[string]any{}
			}
			cur = m[k]
		case int:
			l := cur.([]any)
			if last {
				l[k] = value
				return
			}
			cur = l[k]
		}
	}
}

func get(obj map[string]any, path ...any) any {
	var cur any = obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			cur = cur.(map[string]any)[k]
		case int:
			cur = cur.([]any)[k]
		}
	}
	return cur
}

func del(obj map[string]any, path ...any) {
	delete(get(obj, path[:len(path)-1]...).(map[string]any), path[len(path)-1].(string))
}

func TestInvalidObjectsFail(t *testing.T) {
	v := validator(t)
	tests := []struct {
		name   string
		obj    runtime.Object
		mutate func(t *testing.T, m map[string]any)
		field  string // exact field path of one reported error
		detail string // substring of that error's detail
	}{
		{
			name: "unknown field in replicatedJob", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "x", "spec", "replicatedJobs", 0, "foo") },
			field:  "spec.replicatedJobs[0].foo", detail: "unknown field",
		},
		{
			name: "unknown field in pod template metadata", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "x", "spec", "replicatedJobs", 1, "template", "spec", "template", "metadata", "bogus")
			},
			field: "spec.replicatedJobs[1].template.spec.template.metadata.bogus", detail: "unknown field",
		},
		{
			name: "unknown root metadata field", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "x", "metadata", "labelz") },
			field:  "metadata.labelz", detail: "unknown field",
		},
		{
			name: "wrong type", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "two", "spec", "replicatedJobs", 0, "replicas") },
			field:  "spec.replicatedJobs[0].replicas", detail: "must be of type integer",
		},
		{
			name: "minItems violated", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, []any{}, "spec", "resourceGroups", 0, "flavors") },
			field:  "spec.resourceGroups[0].flavors", detail: "should have at least 1 items",
		},
		{
			name: "duplicate in list-type map (jobset replicatedJobs)", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "ps", "spec", "replicatedJobs", 1, "name") },
			field:  "spec.replicatedJobs[1]", detail: "Duplicate value",
		},
		{
			name: "invalid DNS name", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "Bad_Name", "metadata", "name") },
			field:  "metadata.name", detail: "RFC 1123",
		},
		{
			name: "invalid label value", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, strings.Repeat("q", 64), "metadata", "labels", "kueue.x-k8s.io/queue-name")
			},
			field: "metadata.labels", detail: "no more than 63",
		},
		{
			name: "missing required coveredResources", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) { del(m, "spec", "resourceGroups", 0, "coveredResources") },
			field:  "spec.resourceGroups[0].coveredResources", detail: "Required value",
		},
		{
			name: "enum violated", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "Sometimes", "spec", "stopPolicy") },
			field:  "spec.stopPolicy", detail: "Unsupported value",
		},
		{
			name: "CEL: borrowingLimit without cohort", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) { del(m, "spec", "cohortName") },
			field:  "spec", detail: "borrowingLimit must be nil when cohort is empty",
		},
		{
			name: "v1beta1's cohort is unknown in v1beta2", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "org", "spec", "cohort") },
			field:  "spec.cohort", detail: "unknown field",
		},
		{
			name: "v1beta1's deprecated fungibility values are refused in v1beta2", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "Borrow", "spec", "flavorFungibility", "whenCanBorrow")
			},
			field: "spec.flavorFungibility.whenCanBorrow", detail: "Unsupported value",
		},
		{
			name: "CEL v1beta1: borrowingLimit without cohort", obj: clusterQueueV1beta1(),
			mutate: func(t *testing.T, m map[string]any) { del(m, "spec", "cohort") },
			field:  "spec", detail: "borrowingLimit must be nil when cohort is empty",
		},
		{
			name: "CEL: flavors must cover every resource", obj: clusterQueueA100(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, []any{"cpu", "memory", "nvidia.com/gpu"}, "spec", "resourceGroups", 0, "coveredResources")
			},
			field: "spec.resourceGroups[0]", detail: "flavors must have the same number of resources as the coveredResources",
		},
		{
			name: "duplicate in list-type map (flavor resources)", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "cpu", "spec", "resourceGroups", 0, "flavors", 0, "resources", 1, "name")
			},
			field: "spec.resourceGroups[0].flavors[0].resources[1]", detail: "Duplicate value",
		},
		{
			name: "namespace on a cluster-scoped kind", obj: clusterQueue(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "team-a", "metadata", "namespace") },
			field:  "metadata.namespace", detail: "not allowed on this type",
		},
		{
			name: "MPIJob unknown replica field", obj: mpiJob(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, int64(3), "spec", "mpiReplicaSpecs", "Worker", "replicaz")
			},
			field: "spec.mpiReplicaSpecs.Worker.replicaz", detail: "unknown field",
		},
		{
			name: "PyTorchJob missing required container name", obj: pyTorchJob(),
			mutate: func(t *testing.T, m map[string]any) {
				del(m, "spec", "pytorchReplicaSpecs", "Worker", "template", "spec", "containers", 0, "name")
			},
			field: "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].name", detail: "Required value",
		},
		{
			name: "TrainJob empty runtimeRef name", obj: trainJob(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "", "spec", "runtimeRef", "name") },
			field:  "spec.runtimeRef.name", detail: "at least 1 chars long",
		},
		{
			name: "ClusterTrainingRuntime unknown field in jobset template", obj: clusterTrainingRuntime(),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, true, "spec", "template", "spec", "replicatedJobs", 0, "foo")
			},
			field: "spec.template.spec.replicatedJobs[0].foo", detail: "unknown field",
		},
		{
			name: "Job name too long for the job-name label", obj: job(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, strings.Repeat("j", 64), "metadata", "name") },
			field:  "metadata.name", detail: "job-name label",
		},
		{
			name: "Job unknown field", obj: job(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, int64(1), "spec", "parallelizm") },
			field:  "spec.parallelizm", detail: "unknown field",
		},
		{
			name: "Job wrong type", obj: job(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "one", "spec", "parallelism") },
			field:  "spec.parallelism", detail: "wrong type",
		},
		{
			name: "Job restartPolicy Always", obj: job(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "Always", "spec", "template", "spec", "restartPolicy") },
			field:  "spec.template.spec.restartPolicy", detail: "Unsupported value",
		},
		{
			name: "Job GPU request without limit", obj: job(),
			mutate: func(t *testing.T, m map[string]any) {
				del(m, "spec", "template", "spec", "containers", 0, "resources", "limits")
			},
			field: "spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]", detail: "Required value",
		},
		{
			name: "Namespace name not a DNS label", obj: &corev1.Namespace{},
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "Team-A", "metadata", "name") },
			field:  "metadata.name", detail: "RFC 1123 label",
		},
		{
			name: "Experiment unknown field", obj: experiment(trialJob()),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, int64(3), "spec", "parallelTrials") },
			field:  "spec.parallelTrials", detail: "unknown field",
		},
		{
			name: "Experiment wrong type", obj: experiment(trialJob()),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "four", "spec", "parallelTrialCount") },
			field:  "spec.parallelTrialCount", detail: "wrong type",
		},
		{
			name: "Experiment trialSpec Job unknown field", obj: experiment(trialJob()),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "x", "spec", "trialTemplate", "trialSpec", "spec", "template", "spec", "containerz")
			},
			field: "spec.trialTemplate.trialSpec.spec.template.spec.containerz", detail: "unknown field",
		},
		{
			name: "Experiment trialSpec Job invalid restartPolicy", obj: experiment(trialJob()),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "Always", "spec", "trialTemplate", "trialSpec", "spec", "template", "spec", "restartPolicy")
			},
			field: "spec.trialTemplate.trialSpec.spec.template.spec.restartPolicy", detail: "Unsupported value",
		},
		{
			name: "Experiment trialSpec JobSet schema violation", obj: experiment(jobSet()),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "two", "spec", "trialTemplate", "trialSpec", "spec", "replicatedJobs", 0, "replicas")
			},
			field: "spec.trialTemplate.trialSpec.spec.replicatedJobs[0].replicas", detail: "must be of type integer",
		},
		{
			name: "Experiment trialSpec of unknown kind", obj: experiment(trialJob()),
			mutate: func(t *testing.T, m map[string]any) {
				set(t, m, "RayJob", "spec", "trialTemplate", "trialSpec", "kind")
			},
			field: "spec.trialTemplate.trialSpec", detail: "no schema for batch/v1, Kind=RayJob",
		},
		{
			name: "Stage unknown field", obj: stage(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "1s", "spec", "delayy") },
			field:  "spec.delayy", detail: "unknown field",
		},
		{
			name: "status block", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, map[string]any{}, "status") },
			field:  "status", detail: "must not be set",
		},
		{
			name: "unknown kind", obj: jobSet(),
			mutate: func(t *testing.T, m map[string]any) { set(t, m, "jobset.x-k8s.io/v1alpha1", "apiVersion") },
			field:  "", detail: "no schema for jobset.x-k8s.io/v1alpha1, Kind=JobSet",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := toUnstructured(t, v, tc.obj)
			if u.GetName() == "" {
				u.SetName("placeholder")
			}
			tc.mutate(t, u.Object)
			err := v.Validate(u)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Validate = %v, want Errors", err)
			}
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Detail, tc.detail) {
					if e.Kind != u.GetKind() || e.Name != u.GetName() {
						t.Errorf("error names %s %s, want %s %s", e.Kind, e.Name, u.GetKind(), u.GetName())
					}
					return
				}
			}
			t.Errorf("no error at %q containing %q; got:\n%v", tc.field, tc.detail, err)
		})
	}
}

func TestKnown(t *testing.T) {
	v := validator(t)
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "kueue.x-k8s.io", Version: "v1beta1", Kind: "ClusterQueue"},
		{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "LocalQueue"},
		{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"},
		{Group: "kubeflow.org", Version: "v1", Kind: "PyTorchJob"},
		{Group: "kubeflow.org", Version: "v1", Kind: "TFJob"},
		{Group: "kubeflow.org", Version: "v2beta1", Kind: "MPIJob"},
		{Group: "kubeflow.org", Version: "v1beta1", Kind: "Experiment"},
		{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainJob"},
		{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "ClusterTrainingRuntime"},
		{Group: "trainer.kubeflow.org", Version: "v1alpha1", Kind: "TrainingRuntime"},
		{Group: "kwok.x-k8s.io", Version: "v1alpha1", Kind: "Stage"},
		batchv1.SchemeGroupVersion.WithKind("Job"),
		corev1.SchemeGroupVersion.WithKind("Namespace"),
		corev1.SchemeGroupVersion.WithKind("Node"),
	} {
		if !v.Known(gvk) {
			t.Errorf("Known(%s) = false", gvk)
		}
	}
	if gvk := (schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "MPIJob"}); v.Known(gvk) {
		t.Errorf("Known(%s) = true; MPIJob v1 must not be served (mpi-operator's v2beta1 is)", gvk)
	}
}

func TestTypedStatusIsDropped(t *testing.T) {
	v := validator(t)
	js := jobSet()
	js.Status.Restarts = 3
	if err := v.Validate(js); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkValidateJobSet(b *testing.B) {
	v := validator(b)
	js := jobSet()
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Validate(js); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateJobSetParallel(b *testing.B) {
	v := validator(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		js := jobSet()
		for pb.Next() {
			if err := v.Validate(js); err != nil {
				b.Fatal(err)
			}
		}
	})
}
