package render

import (
	"bytes"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueuelab/kueuelab/model/trace"
	"github.com/kueuelab/kueuelab/model/work"
	"github.com/kueuelab/kueuelab/render/contract"
)

// kwokToleration lets a pod land on KWOK's fake nodes.
var kwokToleration = corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpEqual, Value: "fake", Effect: corev1.TaintEffectNoSchedule}

// role is pods of one shape of a workload, ready to become a pod template: one pod group of the
// trace (b.groups) or every group of one role together (b.roles).
type role struct {
	trace.PodGroup
	resources corev1.ResourceRequirements
	gpu       bool
	gang      bool
	// mig and migSlices are the MIG profile and slices each pod asks for ("" and 0: none).
	mig       string
	migSlices int64
	contract  contract.Pod
	// affinity is the node affinity of the first job record, what of it the cluster can honour.
	affinity *corev1.Affinity
}

// build is the per-workload state every kind starts from.
type build struct {
	w    *trace.Workload
	p    Placement
	o    Options
	name string
	ns   string
	// roles has one entry per role, in the order roles first appear. A role the trace gives in
	// several pod groups (Joulie's HPO trials, one group per trial with its own requests) is their
	// envelope: the replicas summed, each resource the largest any group asks for, the work the mean
	// over the role's pods. Kinds with one pod template per role (MPIJob, PyTorchJob, TFJob,
	// TrainJob, Katib's trialTemplate, Job) render these.
	roles []role
	// groups has one entry per distinct pod group (groups of one role with equal requests and gang
	// merged), each with its own requests and work: JobSet renders these, one replicatedJob each.
	groups []role
}

// newBuild checks w and jobs and computes what every kind needs: names, resources and the
// contract of each role and pod group.
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
	// groupOf maps each trace pod group to its entry in b.groups.
	groupOf := make([]int, len(w.Pods))
	for i, g := range w.Pods {
		if g.Replicas < 1 {
			return nil, fmt.Errorf("pods[%d] (role %s): replicas %d, want ≥ 1", i, g.Role, g.Replicas)
		}
		if msgs := validation.IsDNS1035Label(g.Role); len(msgs) > 0 || len(g.Role) > 10 {
			return nil, fmt.Errorf("pods[%d]: role %q is not a DNS-1035 label of ≤ 10 characters", i, g.Role)
		}
		gang := g.Gang || (w.Gang && !flagged)
		if gang {
			gangSize += g.Replicas
		}
		groupOf[i] = -1
		for k := range b.groups {
			if x := &b.groups[k]; x.Role == g.Role && x.gang == gang && trace.SameRequests(x.Requests, g.Requests) {
				x.Replicas += g.Replicas
				groupOf[i] = k
				break
			}
		}
		if groupOf[i] < 0 {
			groupOf[i] = len(b.groups)
			b.groups = append(b.groups, role{PodGroup: trace.PodGroup{Role: g.Role, Replicas: g.Replicas, Requests: g.Requests, Gang: g.Gang}, gang: gang})
		}
	}
	for _, g := range b.groups {
		if i := b.roleIndex(g.Role); i >= 0 {
			r := &b.roles[i]
			r.Replicas += g.Replicas
			r.Requests = envelope(r.Requests, g.Requests)
			r.gang = r.gang || g.gang
			r.Gang = r.Gang || g.Gang
			continue
		}
		b.roles = append(b.roles, g)
	}
	for _, set := range [][]role{b.groups, b.roles} {
		for i := range set {
			r := &set[i]
			r.resources, r.gpu, err = resources(r.Requests, p.GPUResource)
			if err != nil {
				return nil, fmt.Errorf("role %s: %w", r.Role, err)
			}
			r.mig, r.migSlices = r.Requests.MIG()
			// A slice does a whole GPU's work more slowly (the agent's physics); its work is
			// counted per slice as per GPU. A pod that needs a share of a GPU uses that share of
			// the device it runs on: its utilisation of it is the share times its own.
			gpus, share := r.Requests.GPUWork()
			prof := w.SharedIntensityProfile
			prof.GPUUtilization *= share
			r.contract = contract.Pod{
				WorkloadID:            w.WorkloadID,
				Family:                w.WorkloadType,
				Role:                  r.Role,
				DurationSec:           w.DurationSec,
				Profile:               prof,
				SubmitOffsetSec:       w.SubmitTimeOffsetSec,
				IntentClass:           w.Intent(),
				CheckpointIntervalSec: w.CheckpointIntervalSec,
				CheckpointCostSec:     w.CheckpointCostSec,
				RestartOverheadSec:    w.RestartOverheadSec,
				MIGProfile:            r.mig,
				MIGSlices:             int(r.migSlices),
				Work: trace.Work{
					CPUUnits: work.Units(w.DurationSec, r.Requests.Value(trace.ResourceCPU), w.SharedIntensityProfile.CPUUtilization, o.Rates.CPUPerCore, r.Role),
					GPUUnits: work.Units(w.DurationSec, gpus, prof.GPUUtilization, o.Rates.GPUPerGPU, r.Role),
				},
			}
			if r.gang {
				r.contract.GangSize = gangSize
			}
		}
	}
	if err := b.applyJobs(jobs, groupOf); err != nil {
		return nil, err
	}
	return b, nil
}

// envelope returns requests asking for each resource the larger of a and b.
func envelope(a, b trace.Requests) trace.Requests {
	out := make(trace.Requests, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if _, ok := out[k]; !ok || b.Value(k) > a.Value(k) {
			out[k] = v
		}
	}
	return out
}

// applyJobs replaces the modelled work and sensitivity of each pod group and role by the mean over
// its job records: the generators write identical records per group, so the mean is exact for
// their traces; an envelope role of several groups does the mean of all its pods' work.
func (b *build) applyJobs(jobs []*trace.Job, groupOf []int) error {
	if len(jobs) == 0 {
		return nil
	}
	for _, j := range jobs {
		if j.WorkloadID != b.w.WorkloadID {
			return fmt.Errorf("job %s belongs to workload %s", j.JobID, j.WorkloadID)
		}
	}
	traceGroup, err := b.w.JobGroups(jobs)
	if err != nil {
		return err
	}
	type acc struct {
		n     int
		work  trace.Work
		sens  trace.Sensitivity
		first *trace.Job
	}
	add := func(s *acc, j *trace.Job) {
		if s.n == 0 {
			s.first = j
		}
		s.n++
		s.work.CPUUnits += j.Work.CPUUnits
		s.work.GPUUnits += j.Work.GPUUnits
		s.sens.CPU += j.Sensitivity.CPU
		s.sens.GPU += j.Sensitivity.GPU
	}
	groupSums, roleSums := make([]acc, len(b.groups)), make([]acc, len(b.roles))
	for k, j := range jobs {
		add(&groupSums[groupOf[traceGroup[k]]], j)
		add(&roleSums[b.roleIndex(j.PodRole)], j)
	}
	for _, x := range []struct {
		set  []role
		sums []acc
	}{{b.groups, groupSums}, {b.roles, roleSums}} {
		for i, s := range x.sums {
			if s.n == 0 {
				continue
			}
			n := float64(s.n)
			c := &x.set[i].contract
			c.Work = trace.Work{CPUUnits: s.work.CPUUnits / n, GPUUnits: s.work.GPUUnits / n}
			c.Sensitivity = &trace.Sensitivity{CPU: s.sens.CPU / n, GPU: s.sens.GPU / n}
			if x.set[i].affinity, err = b.nodeAffinity(s.first.PodTemplate.Affinity); err != nil {
				return fmt.Errorf("job %s: %w", s.first.JobID, err)
			}
		}
	}
	return nil
}

// dropRole leaves role name to something else than a pod of its own (TrainJob's torchrun
// rendezvous on node 0, Katib's suggestion service): its pods are no members of the gang.
func (b *build) dropRole(name string) {
	i := b.roleIndex(name)
	if i < 0 || !b.roles[i].gang {
		return
	}
	for j := range b.roles {
		if b.roles[j].gang {
			b.roles[j].contract.GangSize -= b.roles[i].Replicas
		}
	}
	b.roles[i].gang, b.roles[i].contract.GangSize = false, 0
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
// for extended resources (GPUs), which Kubernetes requires and does not overcommit. The trace says
// nvidia.com/gpu or amd.com/gpu; gpuResource, when set, is the name the placed family's device
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
		if _, mig := trace.MIGProfileOf(name); mig {
			continue // a ResourceClaim of the pod (withMIGClaim), not a container resource
		}
		if name == trace.ResourceGPUFraction {
			continue // resolved to a slice or a whole GPU beside it (Renderer.onDevices)
		}
		rn := corev1.ResourceName(name)
		if trace.IsGPUResource(name) && gpuResource != "" {
			rn = gpuResource
		}
		rr.Requests[rn] = q
		if strings.Contains(string(rn), "/") && !strings.HasPrefix(string(rn), corev1.ResourceDefaultNamespacePrefix) {
			if rr.Limits == nil {
				rr.Limits = corev1.ResourceList{}
			}
			rr.Limits[rn] = q
			if trace.IsGPUResource(name) && !q.IsZero() {
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
		l[contract.KueueQueueLabel] = b.p.Queue
	}
	if b.p.PriorityClass != "" {
		l[contract.KueuePriorityClassLabel] = b.p.PriorityClass
	}
	return l
}

// podTemplate is the pod of role r: one container named container, the contract annotations,
// placement, and what the target needs to run it.
func (b *build) podTemplate(r *role, container string, restart corev1.RestartPolicy) (corev1.PodTemplateSpec, error) {
	ann := make(map[string]string, 18)
	r.contract.Put(ann)
	if r.gang && b.p.TopologyLevel != "" {
		ann[kueue.PodSetPreferredTopologyAnnotation] = b.p.TopologyLevel
	}
	c, err := b.container(r, container)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	spec := corev1.PodSpec{
		RestartPolicy: restart,
		Containers:    []corev1.Container{c},
		Tolerations:   b.tolerations(),
		Affinity:      r.affinity.DeepCopy(),
	}
	b.withMIGClaim(r, &spec)
	if (r.gpu || r.migSlices > 0) && len(b.p.GPUNodeSelector) > 0 {
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
