package sim

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	katibv1beta1 "github.com/kubeflow/katib/pkg/apis/controller/experiments/v1beta1"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/replay"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/sim/des"
	"github.com/kueuelab/kueuelab/runtime/sim/kueuelib"
)

// kwl is one Kueue Workload of a trace workload (an experiment has one per trial).
type kwl struct {
	key   types.NamespacedName
	it    *item
	trial int // the trial's index, -1 when not a trial
	// object is namespace/name of the job object, lq the LocalQueue's namespace/name.
	object   string
	podsets  []podsetSpec
	gpus     int64 // of every pod of every pod set
	expected int   // pods of the workload

	// Current admission: the ClusterQueue, the GPUs reserved per flavor, the pods of this
	// attempt and the event that will start them.
	cq          string
	reservedGPU map[string]int64
	pods        []*pod
	running     int
	allRunning  bool
	startEv     *des.Event
	attempt     int
	finished    bool
	podsFailed  bool
	// conds turns its conditions into events.
	conds kueuewl.Tracker
}

// podsetSpec is what the pods of one pod set need: their prototype (the pod template with the
// render contract's annotations, which the Workload Kueue holds leaves out) and its contract.
type podsetSpec struct {
	name     kueue.PodSetReference
	proto    corev1.Pod
	contract *contract.Pod
	gpus     int64 // per pod
	// preAdmission: the pods keep the template from before admission (the kind's
	// render.Integration.PreAdmissionPodSets): no flavor node labels or tolerations merged in.
	preAdmission bool
}

// submit is the submitter's event for one trace workload: it renders the workload and creates a
// Kueue Workload per job object (for an experiment, its first trials).
func (s *sim) submit(it *item) {
	now := s.loop.Now()
	w, jobRecs, err := s.plan.src.fetch(it)
	if err != nil {
		s.fail(err)
		return
	}
	w, jobRecs = resumedWork(w, jobRecs, it.resume)
	objs, err := s.plan.renderer.Render(w, jobRecs, *it.pl)
	if err != nil {
		s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
		return
	}
	var jobs []client.Object
	var exp *katibv1beta1.Experiment
	var tmpls []client.Object
	for _, o := range objs {
		switch x := o.(type) {
		case *katibv1beta1.Experiment:
			exp = x
			continue
		case *resourceapi.ResourceClaimTemplate:
			tmpls = append(tmpls, x)
			continue
		}
		jobs = append(jobs, o)
	}
	top := ""
	switch {
	case exp != nil:
		top = exp.Namespace + "/" + exp.Name
	case len(jobs) > 0:
		top = jobs[0].GetNamespace() + "/" + jobs[0].GetName()
	default:
		s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitFailed, Message: fmt.Sprintf("workload %s: rendered no objects", it.id)})
		return
	}
	// Submitted is when the first create goes out, as the runner records it.
	s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitted, Object: top})
	// The claim templates are created with the jobs: Kueue's workload controller charges a
	// Workload's from the Store, and the kube-scheduler role makes its pods' claims from them.
	for _, t := range tmpls {
		if err := s.kq.Store.AddObject(t); err != nil {
			s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitFailed, Message: fmt.Sprintf("create %s: %v", t.GetName(), err)})
			s.dropClaimTemplates(it)
			return
		}
		it.claimTemplates = append(it.claimTemplates, t)
	}
	if exp != nil {
		x, err := replay.NewExperiment(exp, s.cfg.Seed)
		if err == nil {
			it.trials = x
			err = s.createTrials(it)
		}
		if err != nil {
			s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
			s.dropClaimTemplates(it)
		}
		return
	}
	for _, o := range jobs {
		if err := s.createWorkload(it, o, -1); err != nil {
			s.emit(results.Event{T: now, Workload: it.id, Type: results.EvSubmitFailed, Message: err.Error()})
			s.dropClaimTemplates(it)
			return
		}
	}
}

// dropClaimTemplates deletes a trace workload's ResourceClaimTemplates once none of its Workloads
// is left and no trial is to come, so that the Store holds those of the live workloads only.
func (s *sim) dropClaimTemplates(it *item) {
	if it.open > 0 || it.trials != nil {
		return
	}
	for _, t := range it.claimTemplates {
		if err := s.kq.Store.RemoveObject(t); err != nil {
			s.fail(fmt.Errorf("workload %s: delete %s: %w", it.id, t.GetName(), err))
		}
	}
	it.claimTemplates = nil
}

// createWorkload creates the Kueue Workload of job object o, as Kueue's job reconciler does when
// the object appears, and records it.
func (s *sim) createWorkload(it *item, o client.Object, trial int) error {
	now := s.loop.Now()
	// Creation timestamps are the virtual time plus a nanosecond per Workload created before, so
	// that no two Workloads tie in Kueue's FIFO order (on a cluster they have second resolution
	// and ties fall by heap position; here that would depend on Go's map order).
	s.created++
	created := metav1.NewTime(des.Time(now).Add(time.Duration(s.created)))
	wl, err := s.kq.WorkloadFor(o, created)
	if err != nil {
		return err
	}
	w := &kwl{key: keyOf(wl), it: it, trial: trial, object: o.GetNamespace() + "/" + o.GetName()}
	w.conds.Waits = s.cfg.RecordWaits
	var preAdmission []string
	if in, ok := s.plan.registry.IntegrationOf(o); ok && in.PreAdmissionPodSets != nil {
		preAdmission = in.PreAdmissionPodSets(o)
	}
	for i := range wl.Spec.PodSets {
		ps := &wl.Spec.PodSets[i]
		c, err := contract.Parse(ps.Template.Annotations)
		if err != nil {
			return fmt.Errorf("%s pod set %s: %w", w.object, ps.Name, err)
		}
		spec := podsetSpec{name: ps.Name, contract: c,
			proto: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: wl.Namespace, Labels: ps.Template.Labels, Annotations: ps.Template.Annotations},
				Spec: *ps.Template.Spec.DeepCopy()}}
		spec.gpus = podGPUs(&spec.proto.Spec)
		spec.preAdmission = slices.Contains(preAdmission, string(ps.Name))
		w.podsets = append(w.podsets, spec)
		w.gpus += int64(ps.Count) * spec.gpus
		w.expected += int(ps.Count)
	}
	kueuelib.StripAnnotations(wl, contract.Prefix)
	if _, dup := s.wls[w.key]; dup {
		return fmt.Errorf("workload %s exists", w.key)
	}
	s.wls[w.key] = w
	create := s.kq.CreateWorkload
	if it.resume != nil {
		create = func(wl *kueue.Workload) error { return s.createResumed(wl, it.resume) }
	}
	if err := create(wl); err != nil {
		delete(s.wls, w.key)
		return fmt.Errorf("create workload of %s: %w", w.object, err)
	}
	it.open++
	s.sample.g.created(w)
	s.emit(results.Event{T: now, Workload: it.id, Type: results.EvWorkloadCreated, Object: w.key.String()})
	return nil
}

// createTrials creates the trials there is room for now (replay.Experiment: Katib's part, as
// the cluster engine plays it).
func (s *sim) createTrials(it *item) error {
	trs, err := it.trials.Next()
	for _, tr := range trs {
		if err := s.createWorkload(it, tr.Job, tr.N); err != nil {
			return err
		}
		s.emit(results.Event{T: s.loop.Now(), Workload: it.id, Type: results.EvTrialCreated, Object: tr.Job.Namespace + "/" + tr.Job.Name})
	}
	return err
}

// trialDone records that trial n finished; it returns the experiment's outcome once its last
// trial finished ("" before), and creates the next trials otherwise.
func (s *sim) trialDone(it *item, n int, failed bool) (string, error) {
	outcome, more := it.trials.Finish(n, failed)
	if outcome != "" {
		it.trials = nil
		return outcome, nil
	}
	if !more {
		return "", nil
	}
	return "", s.createTrials(it)
}

// podGPUs is the GPUs a pod's containers request (every vendor's */gpu resource).
func podGPUs(spec *corev1.PodSpec) int64 {
	var n int64
	for i := range spec.Containers {
		for name, q := range spec.Containers[i].Resources.Requests {
			if kueuewl.IsGPU(string(name)) {
				n += q.Value()
			}
		}
	}
	return n
}
