package render

import (
	"bytes"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueueconstants "sigs.k8s.io/kueue/pkg/controller/constants"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
	"github.com/kueuelab/kueuelab/render/contract"
)

// kwokToleration lets a pod land on KWOK's fake nodes.
var kwokToleration = corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// role is one pod group of a workload, ready to become a pod template.
type role struct {
	trace.PodGroup
	resources corev1.ResourceRequirements
	gpu       bool
	gang      bool
	contract  contract.Pod
}

// build is the per-workload state every kind starts from.
type build struct {
	w     *trace.Workload
	p     Placement
	o     Options
	name  string
	ns    string
	roles []role
}

// newBuild checks w and jobs and computes what every kind needs: names, resources and the
// contract of each role.
func newBuild(w *trace.Workload, jobs []*trace.Job, p Placement, o Options) (*build, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(w.Pods) == 0 {
		return nil, fmt.Errorf("workload has no pods")
	}
	b := &build{w: w, p: p, o: o, name: Name(w.WorkloadID), ns: p.Namespace}
	if b.ns == "" {
		b.ns = w.Namespace
	}
	flagged := false
	for _, g := range w.Pods {
		flagged = flagged || g.Gang
	}
	gangSize := 0
	b.roles = make([]role, len(w.Pods))
	for i, g := range w.Pods {
		if g.Replicas < 1 {
			return nil, fmt.Errorf("pods[%d] (role %s): replicas %d, want ≥ 1", i, g.Role, g.Replicas)
		}
		if msgs := validation.IsDNS1035Label(g.Role); len(msgs) > 0 || len(g.Role) > 10 {
			return nil, fmt.Errorf("pods[%d]: role %q is not a DNS-1035 label of ≤ 10 characters", i, g.Role)
		}
		for j := range i {
			if w.Pods[j].Role == g.Role {
				return nil, fmt.Errorf("pods[%d]: role %s appears twice", i, g.Role)
			}
		}
		r := role{PodGroup: g, gang: g.Gang || (w.Gang && !flagged)}
		r.resources, r.gpu, err = resources(g.Requests, p.GPUResource)
		if err != nil {
			return nil, fmt.Errorf("pods[%d] (role %s): %w", i, g.Role, err)
		}
		if r.gang {
			gangSize += g.Replicas
		}
		b.roles[i] = r
	}
	for i := range b.roles {
		r := &b.roles[i]
		r.contract = contract.Pod{
			WorkloadID:            w.WorkloadID,
			Family:                w.WorkloadType,
			Role:                  r.Role,
			DurationSec:           w.DurationSec,
			Profile:               w.SharedIntensityProfile,
			SubmitOffsetSec:       w.SubmitTimeOffsetSec,
			IntentClass:           w.Intent(),
			CheckpointIntervalSec: w.CheckpointIntervalSec,
			CheckpointCostSec:     w.CheckpointCostSec,
			RestartOverheadSec:    w.RestartOverheadSec,
			Work: trace.Work{
				CPUUnits: work.Units(w.DurationSec, r.Requests.Value(trace.ResourceCPU), w.SharedIntensityProfile.CPUUtilization, o.Rates.CPUPerCore, r.Role),
				GPUUnits: work.Units(w.DurationSec, float64(r.Requests.GPUs()), w.SharedIntensityProfile.GPUUtilization, o.Rates.GPUPerGPU, r.Role),
			},
		}
		if r.gang {
			r.contract.GangSize = gangSize
		}
	}
	if err := b.applyJobs(jobs); err != nil {
		return nil, err
	}
	return b, nil
}

// applyJobs replaces the modelled work and sensitivity of each role by the mean over its job
// records: the generator writes identical records per role, so the mean is exact for its traces.
func (b *build) applyJobs(jobs []*trace.Job) error {
	if len(jobs) == 0 {
		return nil
	}
	type acc struct {
		n    int
		work trace.Work
		sens trace.Sensitivity
	}
	sums := make([]acc, len(b.roles))
	for _, j := range jobs {
		if j.WorkloadID != b.w.WorkloadID {
			return fmt.Errorf("job %s belongs to workload %s", j.JobID, j.WorkloadID)
		}
		i := b.roleIndex(j.PodRole)
		if i < 0 {
			return fmt.Errorf("job %s: role %s is not among the workload's pods", j.JobID, j.PodRole)
		}
		s := &sums[i]
		s.n++
		s.work.CPUUnits += j.Work.CPUUnits
		s.work.GPUUnits += j.Work.GPUUnits
		s.sens.CPU += j.Sensitivity.CPU
		s.sens.GPU += j.Sensitivity.GPU
	}
	for i, s := range sums {
		if s.n == 0 {
			continue
		}
		n := float64(s.n)
		c := &b.roles[i].contract
		c.Work = trace.Work{CPUUnits: s.work.CPUUnits / n, GPUUnits: s.work.GPUUnits / n}
		c.Sensitivity = &trace.Sensitivity{CPU: s.sens.CPU / n, GPU: s.sens.GPU / n}
	}
	return nil
}

func (b *build) roleIndex(name string) int {
	for i := range b.roles {
		if b.roles[i].Role == name {
			return i
		}
	}
	return -1
}

// resources turns trace requests into requirements: requests as written, and limits = requests
// for extended resources (GPUs), which Kubernetes requires and does not overcommit. The trace
// always says nvidia.com/gpu; gpuResource, when set, is the name the placed family's device
// plugin advertises (amd.com/gpu on MI300X nodes), so the pod asks for what the node has.
func resources(req trace.Requests, gpuResource corev1.ResourceName) (corev1.ResourceRequirements, bool, error) {
	var rr corev1.ResourceRequirements
	rr.Requests = make(corev1.ResourceList, len(req))
	gpu := false
	for name, s := range req {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return rr, false, fmt.Errorf("requests.%s: %w", name, err)
		}
		if q.Sign() < 0 {
			return rr, false, fmt.Errorf("requests.%s: %s is negative", name, s)
		}
		rn := corev1.ResourceName(name)
		if name == trace.ResourceGPU && gpuResource != "" {
			rn = gpuResource
		}
		rr.Requests[rn] = q
		if strings.Contains(string(rn), "/") && !strings.HasPrefix(string(rn), corev1.ResourceDefaultNamespacePrefix) {
			if rr.Limits == nil {
				rr.Limits = corev1.ResourceList{}
			}
			rr.Limits[rn] = q
			if name == trace.ResourceGPU && !q.IsZero() {
				gpu = true
			}
		}
	}
	return rr, gpu, nil
}

// topMeta is the metadata of the object Kueue queues: its name, the queue and priority labels.
func (b *build) topMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: b.name, Namespace: b.ns, Labels: b.queueLabels()}
}

func (b *build) queueLabels() map[string]string {
	l := map[string]string{contract.WorkloadLabel: b.name}
	if b.p.Queue != "" {
		l[kueueconstants.QueueLabel] = b.p.Queue
	}
	if b.p.PriorityClass != "" {
		l[kueueconstants.WorkloadPriorityClassLabel] = b.p.PriorityClass
	}
	return l
}

// podTemplate is the pod of role r: one container named container, the contract annotations,
// placement, and what the target needs to run it.
func (b *build) podTemplate(r *role, container string, restart corev1.RestartPolicy) (corev1.PodTemplateSpec, error) {
	ann := make(map[string]string, 18)
	r.contract.Put(ann)
	if r.gang && b.p.TopologyLevel != "" {
		ann[kueuev1beta1.PodSetPreferredTopologyAnnotation] = b.p.TopologyLevel
	}
	c, err := b.container(r, container)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	spec := corev1.PodSpec{
		RestartPolicy: restart,
		Containers:    []corev1.Container{c},
		Tolerations:   b.tolerations(),
	}
	if r.gpu && len(b.p.GPUNodeSelector) > 0 {
		spec.NodeSelector = make(map[string]string, len(b.p.GPUNodeSelector))
		for k, v := range b.p.GPUNodeSelector {
			spec.NodeSelector[k] = v
		}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{contract.WorkloadLabel: b.name}, Annotations: ann},
		Spec:       spec,
	}, nil
}

func (b *build) container(r *role, name string) (corev1.Container, error) {
	c := corev1.Container{Name: name, Resources: *r.resources.DeepCopy()}
	if b.o.Target == TargetKWOK {
		c.Image = KWOKImage
		return c, nil
	}
	c.Image = b.o.Image
	cmd, err := b.command(r.Role)
	if err != nil {
		return c, err
	}
	c.Command = []string{"sh", "-c", cmd}
	return c, nil
}

// command renders the real-target shell command of a role.
func (b *build) command(roleName string) (string, error) {
	var buf bytes.Buffer
	d := CommandData{DurationSec: b.w.DurationSec, Speedup: b.o.Speedup, SleepSec: b.w.DurationSec / b.o.Speedup, Role: roleName}
	if err := b.o.Command.Execute(&buf, d); err != nil {
		return "", fmt.Errorf("command template: %w", err)
	}
	return buf.String(), nil
}

func (b *build) tolerations() []corev1.Toleration {
	t := make([]corev1.Toleration, 0, len(b.p.Tolerations)+1)
	kwok := b.o.Target == TargetKWOK
	for _, x := range b.p.Tolerations {
		if x == kwokToleration {
			kwok = false
		}
		t = append(t, x)
	}
	if kwok {
		t = append(t, kwokToleration)
	}
	if len(t) == 0 {
		return nil
	}
	return t
}

// requireRoles checks that the workload has exactly the roles a kind can express.
func (b *build) requireRoles(kind string, allowed ...string) error {
	for _, r := range b.roles {
		ok := false
		for _, a := range allowed {
			ok = ok || r.Role == a
		}
		if !ok {
			return fmt.Errorf("%s cannot express role %s (it has %s)", kind, r.Role, strings.Join(allowed, ", "))
		}
	}
	return nil
}
