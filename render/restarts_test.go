package render

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	mpiv2beta1 "github.com/kubeflow/mpi-operator/pkg/apis/kubeflow/v2beta1"
	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/render/validate"
)

// TestRestartBudget renders a workload with a restart budget of 3 as every kind that has a
// failure policy and checks the policy each kind's controller acts on, the checkpoint contract on
// the pods, and that the objects still validate against the upstream CRDs.
func TestRestartBudget(t *testing.T) {
	v, err := validate.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := DefaultRegistry()
	for _, tc := range []struct {
		family trace.Family
		kind   string
		check  func(t *testing.T, o any)
	}{
		{trace.SingleGPUTraining, "Job", func(t *testing.T, o any) {
			j := o.(*batchv1.Job)
			if *j.Spec.BackoffLimit != 3 || j.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("Job backoffLimit %d, restartPolicy %s", *j.Spec.BackoffLimit, j.Spec.Template.Spec.RestartPolicy)
			}
		}},
		{trace.DistributedTraining, "JobSet", func(t *testing.T, o any) {
			js := o.(*jobsetv1alpha2.JobSet)
			if fp := js.Spec.FailurePolicy; fp == nil || fp.MaxRestarts != 3 || fp.RestartStrategy != jobsetv1alpha2.Recreate {
				t.Errorf("JobSet failurePolicy %+v", fp)
			}
			for _, rj := range js.Spec.ReplicatedJobs {
				if *rj.Template.Spec.BackoffLimit != 0 {
					t.Errorf("child Job %s backoffLimit %d: a pod failure must fail it for the JobSet to restart", rj.Name, *rj.Template.Spec.BackoffLimit)
				}
			}
		}},
		{trace.DistributedTraining, "PyTorchJob", func(t *testing.T, o any) {
			j := o.(*kftov1.PyTorchJob)
			if *j.Spec.RunPolicy.BackoffLimit != 3 {
				t.Errorf("PyTorchJob backoffLimit %v", j.Spec.RunPolicy.BackoffLimit)
			}
			for rt, r := range j.Spec.PyTorchReplicaSpecs {
				if r.RestartPolicy != kftov1.RestartPolicyOnFailure || r.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
					t.Errorf("PyTorchJob %s restart policy %s / pod %s", rt, r.RestartPolicy, r.Template.Spec.RestartPolicy)
				}
			}
		}},
		{trace.ParameterServerTraining, "TFJob", func(t *testing.T, o any) {
			if j := o.(*kftov1.TFJob); *j.Spec.RunPolicy.BackoffLimit != 3 || j.Spec.TFReplicaSpecs[kftov1.TFJobReplicaTypeWorker].RestartPolicy != kftov1.RestartPolicyOnFailure {
				t.Errorf("TFJob run policy %+v", j.Spec.RunPolicy)
			}
		}},
		{trace.DistributedTraining, "MPIJob", func(t *testing.T, o any) {
			j := o.(*mpiv2beta1.MPIJob)
			w := j.Spec.MPIReplicaSpecs[mpiv2beta1.MPIReplicaTypeWorker]
			if *j.Spec.RunPolicy.BackoffLimit != 3 || w.RestartPolicy != mpiv2beta1.RestartPolicyOnFailure || w.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
				t.Errorf("MPIJob backoffLimit %v, worker restart %s / pod %s", j.Spec.RunPolicy.BackoffLimit, w.RestartPolicy, w.Template.Spec.RestartPolicy)
			}
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			w := shapeOf("workload-000007", tc.family, 4)
			w.MaxRestarts, w.CheckpointIntervalSec, w.CheckpointCostSec, w.RestartOverheadSec = 3, 1800, 30, 300
			k, _ := reg.Kind(tc.kind)
			p, _ := testPlacer{}.Place(w)
			objs, err := k.Render(w, nil, p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, objs[0])
			for _, o := range objs {
				if err := v.Validate(o); err != nil {
					t.Fatal(err)
				}
			}
			for _, set := range podSets(t, reg, tc.kind, objs[0]) {
				c, err := contract.Parse(set.meta)
				if err != nil {
					t.Fatal(err)
				}
				if c.CheckpointIntervalSec != 1800 || c.CheckpointCostSec != 30 || c.RestartOverheadSec != 300 {
					t.Errorf("pod contract %+v", c)
				}
			}
		})
	}
}
