package kueuelib

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"

	// The job integrations whose GenericJob turns a rendered object into a Workload; each
	// registers itself with jobframework.
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/job"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/jobset"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/pytorchjob"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/kubeflow/jobs/tfjob"
	_ "sigs.k8s.io/kueue/pkg/controller/jobs/mpijob"
)

// Integrations are the Kueue job integrations (jobframework names) the sim builds Workloads with.
// TrainJob is not among them: Kueue's TrainJob.PodSets reads the Trainer runtime through its
// controller's client and dry-runs the Workload against the API server.
var Integrations = []string{"batch/job", "jobset.x-k8s.io/jobset", "kubeflow.org/mpijob", "kubeflow.org/pytorchjob", "kubeflow.org/tfjob"}

// NewScheme returns a scheme with the core types, Kueue's v1beta2 API and the job kinds of
// Integrations, from each integration's own AddToScheme (batch/v1 is built in).
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := batchv1.AddToScheme(s); err != nil {
		return nil, err
	}
	// DeviceClasses, ResourceSlices and ResourceClaimTemplates, which Kueue's DRA quota reads.
	if err := resourcev1.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := kueue.AddToScheme(s); err != nil {
		return nil, err
	}
	for _, name := range Integrations {
		cb, ok := jobframework.GetIntegration(name)
		if !ok {
			return nil, fmt.Errorf("kueue %s: no job integration %q", KueueVersion, name)
		}
		if cb.AddToScheme == nil {
			continue // a built-in kind (batch/v1 Job), added below
		}
		if err := cb.AddToScheme(s); err != nil {
			return nil, fmt.Errorf("kueue integration %s: %w", name, err)
		}
	}
	return s, nil
}

// WorkloadFor builds the Workload Kueue's job reconciler creates for a job object (a rendered
// batch Job, JobSet, MPIJob, PyTorchJob or TFJob, with its TypeMeta): the kind's own GenericJob
// computes the pod sets (jobframework.ConstructWorkload) and the priority comes from the
// WorkloadPriorityClass the object names (jobframework.PrepareWorkloadPriority). obj gets a UID
// if it has none. The Workload's creation timestamp is created.
func (k *Kueue) WorkloadFor(obj client.Object, created metav1.Time) (*kueue.Workload, error) {
	return workloadFor(k.ctx, k.Store, obj, created)
}

// WorkloadForJob is WorkloadFor without a running Kueue: the same two Kueue functions over st,
// which holds the cluster's WorkloadPriorityClasses (NewStore, AddObject). A forecast builds the
// Workload of a job a user has not submitted yet with it. A job object a person wrote may leave
// out a field the API server would have defaulted and an integration dereferences: that panic is
// an error naming the object.
func WorkloadForJob(st *Store, obj client.Object, created metav1.Time) (wl *kueue.Workload, err error) {
	defer func() {
		if r := recover(); r != nil {
			gvk := obj.GetObjectKind().GroupVersionKind()
			wl, err = nil, fmt.Errorf("%s %s/%s: Kueue's %s integration failed on it (a field the API server defaults left out?): %v",
				gvk.Kind, obj.GetNamespace(), obj.GetName(), gvk.Kind, r)
		}
	}()
	return workloadFor(ctrl.LoggerInto(context.Background(), logr.Discard()), st, obj, created)
}

// JobKinds are the kinds of job object WorkloadFor takes: those of Integrations.
func JobKinds() ([]schema.GroupVersionKind, error) {
	var out []schema.GroupVersionKind
	for _, name := range Integrations {
		cb, ok := jobframework.GetIntegration(name)
		if !ok || cb.NewJob == nil {
			return nil, fmt.Errorf("kueue %s: no job integration %q", KueueVersion, name)
		}
		out = append(out, cb.NewJob().GVK())
	}
	return out, nil
}

func workloadFor(ctx context.Context, st *Store, obj client.Object, created metav1.Time) (*kueue.Workload, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	cb, ok := jobframework.GetIntegrationByGVK(gvk)
	if !ok {
		return nil, fmt.Errorf("kueue %s: no job integration for %s", KueueVersion, gvk)
	}
	if obj.GetUID() == "" {
		obj.SetUID(st.NewUID())
	}
	job := cb.NewJob()
	dst := reflect.ValueOf(job.Object())
	src := reflect.ValueOf(obj)
	if dst.Type() != src.Type() {
		return nil, fmt.Errorf("kueue integration for %s holds a %s, not a %s", gvk, dst.Type(), src.Type())
	}
	dst.Elem().Set(src.Elem())
	wl, err := constructWorkload(ctx, st, job)
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: workload: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	var custom func() string
	if jp, ok := job.(jobframework.JobWithPriorityClass); ok {
		custom = jp.PriorityClass
	}
	if err := jobframework.PrepareWorkloadPriority(ctx, st, job.Object(), wl, custom); err != nil {
		return nil, fmt.Errorf("%s %s/%s: priority: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	wl.CreationTimestamp = created
	return wl, nil
}

// StripAnnotations removes, from every pod template of wl, the annotations whose key starts with
// prefix: facts for the sim's own roles that Kueue never reads, kept out of the copies Kueue
// holds of every pending and admitted Workload.
func StripAnnotations(wl *kueue.Workload, prefix string) {
	for i := range wl.Spec.PodSets {
		a := wl.Spec.PodSets[i].Template.Annotations
		for key := range a {
			if strings.HasPrefix(key, prefix) {
				delete(a, key)
			}
		}
		if len(a) == 0 {
			wl.Spec.PodSets[i].Template.Annotations = nil
		}
	}
}

// CreateWorkload creates wl, as the job reconciler does for a job it finds without one.
func (k *Kueue) CreateWorkload(wl *kueue.Workload) error {
	defer k.Store.as(ByJobCreate)()
	return k.Store.Create(k.ctx, wl)
}
