package render

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	jobsetv1alpha2 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	kftov1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
)

// A workload's maxRestarts becomes its kind's own failure policy, so the real controller decides
// what a pod failure does (runtime/runner's fault injector fails pods the way a node loss or a
// crashed process would):
//
//	kind        maxRestarts = n > 0                                  a pod failure then
//	Job         backoffLimit n                                      a replacement pod, until n failures
//	JobSet      failurePolicy.maxRestarts n (Recreate)              the child Job fails, the JobSet recreates them all
//	PyTorchJob  runPolicy.backoffLimit n, restartPolicy OnFailure   the container restarts in place, until n restarts
//	TFJob       as PyTorchJob
//	MPIJob      runPolicy.backoffLimit n (the launcher Job's),      the container restarts in place; a deleted
//	            workers restartPolicy OnFailure                     worker is recreated by mpi-operator
//
// With maxRestarts 0 the kinds keep kueuelab's defaults: a failed pod fails the workload.

// restarts is the workload's restart budget.
func (b *build) restarts() int32 { return int32(max(0, b.w.MaxRestarts)) }

// jobBackoffLimit is a Job's backoffLimit: the budget (0: the first failure fails it).
func (b *build) jobBackoffLimit() *int32 { return ptr.To(b.restarts()) }

// jobSetFailurePolicy restarts the whole JobSet up to the budget (nil without one).
func (b *build) jobSetFailurePolicy() *jobsetv1alpha2.FailurePolicy {
	if b.restarts() == 0 {
		return nil
	}
	return &jobsetv1alpha2.FailurePolicy{MaxRestarts: b.restarts(), RestartStrategy: jobsetv1alpha2.Recreate}
}

// kubeflowRestartPolicy is a training-operator replica's restart policy: OnFailure with a budget
// (the operator counts the containers' restarts against runPolicy.backoffLimit), else Never.
func (b *build) kubeflowRestartPolicy() kftov1.RestartPolicy {
	if b.restarts() > 0 {
		return kftov1.RestartPolicyOnFailure
	}
	return kftov1.RestartPolicyNever
}

// runPolicyBackoffLimit is runPolicy.backoffLimit of the Kubeflow kinds (nil without a budget,
// which leaves each operator's default).
func (b *build) runPolicyBackoffLimit() *int32 {
	if b.restarts() == 0 {
		return nil
	}
	return ptr.To(b.restarts())
}

// podRestartPolicy is the pod template's restart policy matching a replica's.
func podRestartPolicy(p kftov1.RestartPolicy) corev1.RestartPolicy {
	if p == kftov1.RestartPolicyExitCode {
		return corev1.RestartPolicyNever
	}
	return corev1.RestartPolicy(p)
}
