package kueuelib

import (
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/render/contract"
)

func traceWorkload(f trace.Family, pods ...trace.PodGroup) *trace.Workload {
	return &trace.Workload{SchemaVersion: trace.SchemaVersion, WorkloadID: "w-" + string(f), Namespace: "a", WorkloadType: f,
		DurationSec: 600, Gang: len(pods) > 1, SharedIntensityProfile: trace.Profile{CPUUtilization: 0.3, GPUUtilization: 0.8, MemoryIntensity: 0.5},
		IntentClass: trace.IntentPerformance, Pods: pods}
}

func group(role string, n int, gpus int) trace.PodGroup {
	r := trace.Requests{trace.ResourceCPU: "4", trace.ResourceMemory: "16Gi"}
	if gpus > 0 {
		r[trace.ResourceGPU] = fmt.Sprint(gpus)
	}
	return trace.PodGroup{Role: role, Replicas: n, Requests: r}
}

// TestWorkloadForEveryKind builds the Workload of each rendered kind with Kueue's own GenericJob
// and checks what Kueue would see: the pod sets the kind declares, their counts, the queue and
// the priority of the WorkloadPriorityClass the object names.
func TestWorkloadForEveryKind(t *testing.T) {
	f := newFixture(t)
	pl := render.Placement{Namespace: "a", Queue: "lq", PriorityClass: "high"}
	tests := []struct {
		kind    string
		w       *trace.Workload
		podsets map[kueue.PodSetReference]int32
	}{
		{"Job", traceWorkload(trace.SingleGPUTraining, group("main", 1, 2)), map[kueue.PodSetReference]int32{"main": 1}},
		{"MPIJob", traceWorkload(trace.DistributedTraining, group("launcher", 1, 0), group("worker", 4, 1)),
			map[kueue.PodSetReference]int32{"launcher": 1, "worker": 4}},
		{"PyTorchJob", traceWorkload(trace.DistributedTraining, group("launcher", 1, 0), group("worker", 3, 2)),
			map[kueue.PodSetReference]int32{"master": 1, "worker": 3}},
		{"JobSet", traceWorkload(trace.ParameterServerTraining, group("ps", 2, 0), group("worker", 2, 1)),
			map[kueue.PodSetReference]int32{"ps": 2, "worker": 2}},
		{"TFJob", traceWorkload(trace.ParameterServerTraining, group("ps", 1, 0), group("worker", 2, 1)),
			map[kueue.PodSetReference]int32{"ps": 1, "worker": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			m := render.DefaultMapping()
			m[tt.w.WorkloadType] = tt.kind
			r, err := render.NewRenderer(render.DefaultRegistry(), m, render.Options{})
			if err != nil {
				t.Fatal(err)
			}
			objs, err := r.Render(tt.w, nil, pl)
			if err != nil {
				t.Fatal(err)
			}
			wl, err := f.k.WorkloadFor(objs[0], metav1.Now())
			if err != nil {
				t.Fatal(err)
			}
			got := map[kueue.PodSetReference]int32{}
			for _, ps := range wl.Spec.PodSets {
				got[ps.Name] = ps.Count
				if _, err := contract.Parse(ps.Template.Annotations); err != nil {
					t.Errorf("pod set %s: the render contract did not reach the Workload: %v", ps.Name, err)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.podsets) {
				t.Errorf("pod sets %v, want %v", got, tt.podsets)
			}
			if wl.Spec.QueueName != "lq" || wl.Spec.Priority == nil || *wl.Spec.Priority != 1000 || wl.Namespace != "a" {
				t.Errorf("queue %q, priority %v, namespace %q", wl.Spec.QueueName, wl.Spec.Priority, wl.Namespace)
			}
			StripAnnotations(wl, contract.Prefix)
			for _, ps := range wl.Spec.PodSets {
				if _, ok := ps.Template.Annotations[contract.WorkloadID]; ok {
					t.Errorf("pod set %s keeps the contract after StripAnnotations", ps.Name)
				}
			}
		})
	}
	if _, err := f.k.WorkloadFor(&kueue.LocalQueue{TypeMeta: metav1.TypeMeta{APIVersion: "kueue.x-k8s.io/v1beta2", Kind: "LocalQueue"}}, metav1.Now()); err == nil {
		t.Error("a LocalQueue became a Workload")
	}
}

// TestWorkloadForJob builds a Workload outside a running Kueue, over a Store with the cluster's
// WorkloadPriorityClasses, as a forecast does for a job not yet submitted; a job missing a field
// the API server defaults is an error naming it, not a panic.
func TestWorkloadForJob(t *testing.T) {
	kinds, err := JobKinds()
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != len(Integrations) || kinds[0] != batchv1.SchemeGroupVersion.WithKind("Job") {
		t.Fatalf("JobKinds() = %v: want one per integration, batch/v1 Job first", kinds)
	}
	s, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore(s)
	if err := st.AddObject(&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000}); err != nil {
		t.Fatal(err)
	}
	job := func(parallelism *int32) *batchv1.Job {
		return &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
			ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "a", Labels: map[string]string{contract.KueueQueueLabel: "lq", contract.KueuePriorityClassLabel: "high"}},
			Spec:       batchv1.JobSpec{Parallelism: parallelism, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}}}
	}
	wl, err := WorkloadForJob(st, job(new(int32(3))), metav1.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if wl.Spec.QueueName != "lq" || wl.Spec.Priority == nil || *wl.Spec.Priority != 1000 || len(wl.Spec.PodSets) != 1 || wl.Spec.PodSets[0].Count != 3 {
		t.Errorf("Workload %+v: want queue lq, priority 1000, 3 pods", wl.Spec)
	}
	if _, err := WorkloadForJob(st, job(nil), metav1.Time{}); err == nil || !strings.Contains(err.Error(), "Job a/j: Kueue's Job integration failed on it") {
		t.Errorf("a Job without parallelism: %v", err)
	}
}
