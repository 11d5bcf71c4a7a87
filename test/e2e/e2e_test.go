package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// kindCase is one job kind: the object, how to find its pods, and which ones end it; whether it
// is suspended or succeeded its integration says (render.Integration.Status).
type kindCase struct {
	obj      client.Object
	pods     map[string]string // label selector of all its pods
	podCount int
	toFinish map[string]string // the pods whose completion finishes the job
	selected map[string]string // the pods that must carry the flavor's nodeSelector; nil: all
}

// kinds builds a Job, a JobSet, a PyTorchJob and an MPIJob in ns on queue, 7 GPUs in all. Every
// kind of the registry runs whole traces in TestEveryKindRunsItsFamilies.
func kinds(ns, queue string) []kindCase {
	job := makeJob(ns, "job", queue, 1)
	js := makeJobSet(ns, "jobset", queue, 2, 1)
	pt := makePyTorchJob(ns, "pytorch", queue, 1, 1)
	mpi := makeMPIJob(ns, "mpi", queue, 2, 1)
	return []kindCase{
		{obj: job, pods: map[string]string{"batch.kubernetes.io/job-name": job.Name}, podCount: 1},
		{obj: js, pods: map[string]string{jobsetv1alpha2.JobSetNameKey: js.Name}, podCount: 2},
		{obj: pt, pods: map[string]string{"training.kubeflow.org/job-name": pt.Name}, podCount: 2},
		{
			// Completing the launcher finishes an MPIJob; cleanPodPolicy Running removes the workers.
			obj: mpi, pods: map[string]string{"training.kubeflow.org/job-name": mpi.Name}, podCount: 3,
			// mpi-operator v0.8.2 creates the launcher Job while the MPIJob is still suspended and on
			// resume copies the admitted template's nodeSelector into it: every pod, the launcher's
			// too, carries the flavor's.
			toFinish: map[string]string{"training.kubeflow.org/job-name": mpi.Name, "training.kubeflow.org/job-role": "launcher"},
		},
	}
}

func kindName(o client.Object) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", o), "*")
}

// TestAdmitEveryKind: a Job, a JobSet, a PyTorchJob and an MPIJob queued through Kueue get an
// admitted Workload, are unsuspended, and their pods run on KWOK GPU nodes of the flavor.
func TestAdmitEveryKind(t *testing.T) {
	t.Parallel()
	ns := "e2e-admit"
	setup(t, ns, queueObjects(ns, ns, 16)...)
	cases := kinds(ns, ns)
	for _, k := range cases {
		create(t, k.obj)
	}
	for _, k := range cases {
		t.Run(kindName(k.obj), func(t *testing.T) {
			awaitWorkloadCondition(t, k.obj, kueue.WorkloadAdmitted)
			eventually(t, "unsuspended", func(ctx context.Context) (bool, string, error) {
				err := get(ctx, k.obj)
				return err == nil && !kindStatus(t, k.obj).Suspended, "still suspended", err
			})
			awaitPodsRunning(t, ns, k.pods, k.podCount, k.selected)
		})
	}
}

// TestQuotaBlocksThenAdmits: a Job over the ClusterQueue's free quota stays suspended with Kueue's
// reason and is admitted once the Job holding the quota completes.
func TestQuotaBlocksThenAdmits(t *testing.T) {
	t.Parallel()
	ns := "e2e-quota"
	setup(t, ns, queueObjects(ns, ns, 4)...)
	first := makeJob(ns, "holds-quota", ns, 4)
	create(t, first)
	awaitWorkloadCondition(t, first, kueue.WorkloadAdmitted)
	pods := awaitPodsRunning(t, ns, map[string]string{"batch.kubernetes.io/job-name": first.Name}, 1, nil)

	blocked := makeJob(ns, "over-quota", ns, 2)
	create(t, blocked)
	eventually(t, "over-quota Workload pending for quota", func(ctx context.Context) (bool, string, error) {
		wl, err := workloadFor(ctx, ns, blocked.UID)
		if err != nil || wl == nil {
			return false, "no Workload yet", err
		}
		c := condition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if c == nil {
			return false, condSummary(wl.Status.Conditions), nil
		}
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "insufficient unused quota"), c.Message, nil
	})
	if err := get(t.Context(), blocked); err != nil {
		t.Fatal(err)
	}
	if blocked.Spec.Suspend == nil || !*blocked.Spec.Suspend {
		t.Fatalf("over-quota Job is not suspended while its Workload waits for quota")
	}

	complete(t, pods)
	awaitWorkloadCondition(t, first, kueue.WorkloadFinished)
	awaitWorkloadCondition(t, blocked, kueue.WorkloadAdmitted)
	awaitPodsRunning(t, ns, map[string]string{"batch.kubernetes.io/job-name": blocked.Name}, 1, nil)
}

// TestCompleteEveryKind: completing the pods through kueuelab's KWOK stage brings each kind to its
// own success state; Kueue finishes the Workloads and releases the quota.
func TestCompleteEveryKind(t *testing.T) {
	t.Parallel()
	ns := "e2e-complete"
	setup(t, ns, queueObjects(ns, ns, 16)...)
	cases := kinds(ns, ns)
	for _, k := range cases {
		create(t, k.obj)
	}
	for _, k := range cases {
		t.Run(kindName(k.obj), func(t *testing.T) {
			pods := awaitPodsRunning(t, ns, k.pods, k.podCount, k.selected)
			if k.toFinish != nil {
				var err error
				if pods, err = podsOf(t.Context(), ns, k.toFinish); err != nil || len(pods) == 0 {
					t.Fatalf("pods to finish %v: %d, %v", k.toFinish, len(pods), err)
				}
			}
			complete(t, pods)
			eventually(t, "success state", func(ctx context.Context) (bool, string, error) {
				if err := get(ctx, k.obj); err != nil {
					return false, "", err
				}
				st := kindStatus(t, k.obj)
				return st.Succeeded, st.Detail, nil
			})
			awaitWorkloadCondition(t, k.obj, kueue.WorkloadFinished)
		})
	}
	eventually(t, "quota released", func(ctx context.Context) (bool, string, error) {
		var cq kueue.ClusterQueue
		if err := shared.client.Get(ctx, client.ObjectKey{Name: ns}, &cq); err != nil {
			return false, "", err
		}
		used := int64(0)
		for _, f := range cq.Status.FlavorsReservation {
			for _, r := range f.Resources {
				if r.Name == gpu {
					used += r.Total.Value()
				}
			}
		}
		return cq.Status.ReservingWorkloads == 0 && cq.Status.AdmittedWorkloads == 0 && used == 0,
			fmt.Sprintf("reserving=%d admitted=%d gpus reserved=%d", cq.Status.ReservingWorkloads, cq.Status.AdmittedWorkloads, used), nil
	})
}

// TestDryRun: the dry-run helper passes valid objects of every kind and reports, per object, what
// the API server's admission (here training-operator's webhook) rejects, without storing anything.
func TestDryRun(t *testing.T) {
	t.Parallel()
	ns := "e2e-dryrun"
	setup(t, ns, queueObjects(ns, ns, 8)...)
	var objs []client.Object
	for _, k := range kinds(ns, ns) {
		objs = append(objs, k.obj)
	}
	if err := DryRun(t.Context(), shared.client, shared.scheme, objs); err != nil {
		t.Fatalf("valid objects rejected: %v", err)
	}
	bad := makePyTorchJob(ns, "bad", ns, 1, 1)
	bad.Spec.PyTorchReplicaSpecs[kftov1.PyTorchJobReplicaTypeMaster].Template.Spec.Containers[0].Name = "not-pytorch"
	err := DryRun(t.Context(), shared.client, shared.scheme, append(objs, bad))
	if err == nil || !strings.Contains(err.Error(), "PyTorchJob "+ns+"/bad") || strings.Contains(err.Error(), "/job:") {
		t.Fatalf("err = %v, want exactly the PyTorchJob %s/bad rejected", err, ns)
	}
	var jobs batchv1.JobList
	if err := shared.client.List(t.Context(), &jobs, client.InNamespace(ns)); err != nil || len(jobs.Items) != 0 {
		t.Fatalf("dry run stored %d Jobs (err %v)", len(jobs.Items), err)
	}
}
