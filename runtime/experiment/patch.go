package experiment

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kueuelab/kueuelab/render/contract"

	jsonpatch "github.com/evanphx/json-patch/v5"
	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/render/cluster"
)

// Unlimited clears a borrowing or lending limit.
const Unlimited = "unlimited"

// Op is one typed patch operation: exactly one field is set. A queue is named by its ClusterQueue
// or by a team whose LocalQueue points at it; "*" means every ClusterQueue.
type Op struct {
	// Set changes a quota of a queue or of a cohort: nominalQuota, borrowingLimit, lendingLimit
	// ("unlimited" clears a limit).
	Set *SetQuota `yaml:"set,omitempty"`
	// Cohort moves a queue to another cohort ("" leaves every cohort), or a cohort under another
	// (a cohort tree; "" makes it a root); an unlisted cohort is added.
	Cohort *SetCohort `yaml:"cohort,omitempty"`
	// Preemption changes a queue's preemption policy fields that are given.
	Preemption *SetPreemption `yaml:"preemption,omitempty"`
	// FairSharingWeight sets the fair-sharing weight of a queue or a cohort.
	FairSharingWeight *SetWeight `yaml:"fairSharingWeight,omitempty"`
	// QueueingStrategy sets a queue's queueing strategy (BestEffortFIFO or StrictFIFO).
	QueueingStrategy *SetStrategy `yaml:"queueingStrategy,omitempty"`
	// FlavorFungibility replaces a queue's flavorFungibility (whenCanBorrow, whenCanPreempt,
	// preference), as the cluster spec writes it.
	FlavorFungibility *SetFungibility `yaml:"flavorFungibility,omitempty"`
	// Priority sets the value of an intent class's WorkloadPriorityClass.
	Priority *SetPriority `yaml:"priority,omitempty"`
	// PowerCap sets the GPU power cap of a node pool (label kueuelab.io/power-cap).
	PowerCap *SetPowerCap `yaml:"powerCap,omitempty"`
	// Nodes sets a pool's node count (to add the hardware a larger quota stands for).
	Nodes *SetNodes `yaml:"nodes,omitempty"`
	// Scheduler replaces the spec's scheduler section: kube-scheduler's NodeResourcesFit scoring
	// strategy, or a KubeSchedulerConfiguration file (relative to the experiment file); {} removes
	// it (upstream's default, LeastAllocated on cpu and memory).
	Scheduler *cluster.Scheduler `yaml:"scheduler,omitempty"`

	line int
}

// UnmarshalYAML keeps the operation's line for error messages.
func (o *Op) UnmarshalYAML(n *yaml.Node) error {
	type plain Op
	if err := n.Decode((*plain)(o)); err != nil {
		return err
	}
	o.line = n.Line
	return nil
}

// SetQuota changes the quota of one resource of one flavor of a queue (or of every queue), or of
// a cohort: the quota its subtree shares on top of its members' (a cohort's first quota on a
// flavor needs nominalQuota).
type SetQuota struct {
	Queue          string  `yaml:"queue,omitempty"`
	Cohort         string  `yaml:"cohort,omitempty"`
	Flavor         string  `yaml:"flavor"`
	Resource       string  `yaml:"resource"`
	NominalQuota   *string `yaml:"nominalQuota,omitempty"`
	BorrowingLimit *string `yaml:"borrowingLimit,omitempty"`
	LendingLimit   *string `yaml:"lendingLimit,omitempty"`
}

// SetCohort puts a queue in a cohort ({queue, cohort}), or a cohort under a parent ({cohort,
// parent}).
type SetCohort struct {
	Queue  string  `yaml:"queue,omitempty"`
	Cohort string  `yaml:"cohort"`
	Parent *string `yaml:"parent,omitempty"`
}

// SetPreemption changes a queue's preemption policy.
type SetPreemption struct {
	Queue               string                      `yaml:"queue"`
	ReclaimWithinCohort *string                     `yaml:"reclaimWithinCohort,omitempty"`
	WithinClusterQueue  *string                     `yaml:"withinClusterQueue,omitempty"`
	BorrowWithinCohort  *cluster.BorrowWithinCohort `yaml:"borrowWithinCohort,omitempty"`
}

// SetWeight sets a fair-sharing weight on a queue or a cohort.
type SetWeight struct {
	Queue  string `yaml:"queue,omitempty"`
	Cohort string `yaml:"cohort,omitempty"`
	Weight string `yaml:"weight"`
}

// SetStrategy sets a queue's queueing strategy.
type SetStrategy struct {
	Queue    string `yaml:"queue"`
	Strategy string `yaml:"strategy"`
}

// SetFungibility sets a queue's flavor fungibility; the spec's validation checks the values.
type SetFungibility struct {
	Queue          string `yaml:"queue"`
	WhenCanBorrow  string `yaml:"whenCanBorrow,omitempty"`
	WhenCanPreempt string `yaml:"whenCanPreempt,omitempty"`
	Preference     string `yaml:"preference,omitempty"`
}

// SetPriority sets an intent class's priority value.
type SetPriority struct {
	Class string `yaml:"class"`
	Value int32  `yaml:"value"`
}

// SetPowerCap sets a pool's GPU power cap: a catalog profile ("eco"), a percentage of the GPU's
// maximum ("70%", written as watts because a label cannot hold '%'), watts ("450W"), or "" to
// remove the cap. Pool "*" means every GPU pool.
type SetPowerCap struct {
	Pool  string `yaml:"pool"`
	Value string `yaml:"value"`
}

// SetNodes sets the number of nodes of a pool.
type SetNodes struct {
	Pool  string `yaml:"pool"`
	Count int    `yaml:"count"`
}

// check validates what can be checked without the cluster spec.
func (o *Op) check() error {
	n := 0
	for _, set := range []bool{o.Set != nil, o.Cohort != nil, o.Preemption != nil, o.FairSharingWeight != nil,
		o.QueueingStrategy != nil, o.FlavorFungibility != nil, o.Priority != nil, o.PowerCap != nil, o.Nodes != nil, o.Scheduler != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("an operation has exactly one of set, cohort, preemption, fairSharingWeight, queueingStrategy, flavorFungibility, priority, powerCap, nodes, scheduler (got %d)", n)
	}
	quantity := func(field string, v *string, allowUnlimited bool) error {
		if v == nil || (allowUnlimited && *v == Unlimited) {
			return nil
		}
		if q, err := resource.ParseQuantity(*v); err != nil || q.Sign() < 0 {
			return fmt.Errorf("%s: %q is not a non-negative quantity", field, *v)
		}
		return nil
	}
	switch {
	case o.Set != nil:
		s := o.Set
		var errs []error
		if (s.Queue == "") == (s.Cohort == "") {
			errs = append(errs, errors.New("set: give exactly one of queue and cohort"))
		}
		for f, v := range map[string]string{"set.flavor": s.Flavor, "set.resource": s.Resource} {
			if v == "" {
				errs = append(errs, fmt.Errorf("%s: required", f))
			}
		}
		if s.NominalQuota == nil && s.BorrowingLimit == nil && s.LendingLimit == nil {
			errs = append(errs, errors.New("set: give nominalQuota, borrowingLimit or lendingLimit"))
		}
		errs = append(errs, quantity("set.nominalQuota", s.NominalQuota, false),
			quantity("set.borrowingLimit", s.BorrowingLimit, true), quantity("set.lendingLimit", s.LendingLimit, true))
		return errors.Join(errs...)
	case o.Cohort != nil:
		c := o.Cohort
		switch {
		case (c.Queue == "") == (c.Parent == nil):
			return errors.New("cohort: give queue (the queue to move into cohort) or parent (the parent of cohort), not both")
		case c.Parent != nil && c.Cohort == "":
			return errors.New("cohort.cohort: required: the cohort to put under parent")
		case c.Parent != nil && *c.Parent == c.Cohort:
			return fmt.Errorf("cohort.parent: cohort %q cannot be its own parent", c.Cohort)
		}
	case o.Preemption != nil:
		if o.Preemption.Queue == "" {
			return errors.New("preemption.queue: required")
		}
	case o.FairSharingWeight != nil:
		w := o.FairSharingWeight
		if (w.Queue == "") == (w.Cohort == "") {
			return errors.New("fairSharingWeight: give exactly one of queue and cohort")
		}
		return quantity("fairSharingWeight.weight", &w.Weight, false)
	case o.QueueingStrategy != nil:
		if o.QueueingStrategy.Queue == "" {
			return errors.New("queueingStrategy.queue: required")
		}
	case o.FlavorFungibility != nil:
		if o.FlavorFungibility.Queue == "" {
			return errors.New("flavorFungibility.queue: required")
		}
	case o.Priority != nil:
		switch o.Priority.Class {
		case "performance", "standard", "eco":
		default:
			return fmt.Errorf("priority.class: %q is not an intent class (performance, standard, eco)", o.Priority.Class)
		}
	case o.PowerCap != nil:
		if o.PowerCap.Pool == "" {
			return errors.New("powerCap.pool: required")
		}
	case o.Nodes != nil:
		if o.Nodes.Pool == "" {
			return errors.New("nodes.pool: required")
		}
		if o.Nodes.Count < 1 {
			return fmt.Errorf("nodes.count: must be >= 1, got %d", o.Nodes.Count)
		}
	}
	return nil
}

// Spec builds the cluster spec of variant v: the base spec with v's ClusterPatch and operations
// applied, validated as `kueuelab render` would. It also returns the spec as YAML; errors name
// the experiment file, the variant and the field.
func (e *Experiment) Spec(v *Variant) (*cluster.Spec, []byte, error) {
	where := fmt.Sprintf("%s:%d: variant %s", e.file, v.line, v.Name)
	base, err := os.ReadFile(e.ClusterPath())
	if err != nil {
		return nil, nil, fmt.Errorf("%s: cluster spec: %w", where, err)
	}
	name := e.ClusterPath()
	// Relative paths in the spec (scheduler.config) stay relative to the base spec's directory.
	dir := filepath.Dir(e.ClusterPath())
	if v.ClusterPatch != nil {
		base, err = mergePatch(base, v.ClusterPatch)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: clusterPatch: %w", where, err)
		}
		name = fmt.Sprintf("%s with the clusterPatch of variant %s", name, v.Name)
	}
	s, err := cluster.ParseIn(dir, name, base)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	if len(v.Patch) == 0 {
		return s, base, nil
	}
	cat, err := hw.DefaultCatalog()
	if err != nil {
		return nil, nil, err
	}
	p := &patcher{s: s, flavors: s.FlavorNames(), cat: cat, dir: filepath.Dir(e.file)}
	for j := range v.Patch {
		op := &v.Patch[j]
		if err := p.apply(op); err != nil {
			return nil, nil, fmt.Errorf("%s:%d: variant %s: patch[%d].%w", e.file, op.line, v.Name, j, err)
		}
	}
	out, err := yaml.Marshal(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	patched, err := cluster.ParseIn(dir, fmt.Sprintf("%s patched by variant %s", e.ClusterPath(), v.Name), out)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: the patched cluster spec is invalid: %w", where, err)
	}
	return patched, out, nil
}

func mergePatch(doc []byte, patch map[string]any) ([]byte, error) {
	dj, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	pj, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(dj, pj)
	if err != nil {
		return nil, err
	}
	return sigsyaml.JSONToYAML(merged)
}

// patcher applies operations to a parsed spec.
type patcher struct {
	s       *cluster.Spec
	flavors []string
	cat     *hw.Catalog
	dir     string // the experiment file's directory
}

// queues resolves a queue reference; field is the operation's field path for errors.
func (p *patcher) queues(ref, field string) ([]*cluster.ClusterQueue, error) {
	var out []*cluster.ClusterQueue
	for i := range p.s.ClusterQueues {
		q := &p.s.ClusterQueues[i]
		if ref == "*" || q.Name == ref {
			out = append(out, q)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	for _, t := range p.s.Teams {
		if t.Name == ref {
			for i := range p.s.ClusterQueues {
				if p.s.ClusterQueues[i].Name == t.ClusterQueue {
					return []*cluster.ClusterQueue{&p.s.ClusterQueues[i]}, nil
				}
			}
		}
	}
	var names, teams []string
	for _, q := range p.s.ClusterQueues {
		names = append(names, q.Name)
	}
	for _, t := range p.s.Teams {
		teams = append(teams, t.Name)
	}
	return nil, fmt.Errorf("%s: unknown queue %q (ClusterQueues: %s; teams: %s; or \"*\")", field, ref,
		strings.Join(names, ", "), strings.Join(teams, ", "))
}

func (p *patcher) apply(op *Op) error {
	switch {
	case op.Set != nil:
		return p.setQuota(op.Set)
	case op.Cohort != nil:
		return p.setCohort(op.Cohort)
	case op.Preemption != nil:
		qs, err := p.queues(op.Preemption.Queue, "preemption.queue")
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Preemption == nil {
				q.Preemption = &cluster.Preemption{}
			}
			pr := op.Preemption
			if pr.ReclaimWithinCohort != nil {
				q.Preemption.ReclaimWithinCohort = *pr.ReclaimWithinCohort
			}
			if pr.WithinClusterQueue != nil {
				q.Preemption.WithinClusterQueue = *pr.WithinClusterQueue
			}
			if pr.BorrowWithinCohort != nil {
				b := *pr.BorrowWithinCohort
				q.Preemption.BorrowWithinCohort = &b
			}
		}
	case op.FairSharingWeight != nil:
		w := op.FairSharingWeight
		if w.Cohort != "" {
			for i := range p.s.Cohorts {
				if p.s.Cohorts[i].Name == w.Cohort {
					p.s.Cohorts[i].FairSharing = &cluster.FairSharing{Weight: w.Weight}
					return nil
				}
			}
			return fmt.Errorf("fairSharingWeight.cohort: unknown cohort %q (cohorts: %s)", w.Cohort, strings.Join(p.cohortNames(), ", "))
		}
		qs, err := p.queues(w.Queue, "fairSharingWeight.queue")
		if err != nil {
			return err
		}
		for _, q := range qs {
			q.FairSharing = &cluster.FairSharing{Weight: w.Weight}
		}
	case op.QueueingStrategy != nil:
		qs, err := p.queues(op.QueueingStrategy.Queue, "queueingStrategy.queue")
		if err != nil {
			return err
		}
		for _, q := range qs {
			q.QueueingStrategy = op.QueueingStrategy.Strategy
		}
	case op.FlavorFungibility != nil:
		qs, err := p.queues(op.FlavorFungibility.Queue, "flavorFungibility.queue")
		if err != nil {
			return err
		}
		f := op.FlavorFungibility
		for _, q := range qs {
			q.FlavorFungibility = &cluster.FlavorFungibility{WhenCanBorrow: f.WhenCanBorrow, WhenCanPreempt: f.WhenCanPreempt, Preference: f.Preference}
		}
	case op.Priority != nil:
		v := op.Priority.Value
		pcs := &p.s.PriorityClasses
		target := map[string]**cluster.PriorityClass{"performance": &pcs.Performance, "standard": &pcs.Standard, "eco": &pcs.Eco}[op.Priority.Class]
		if *target == nil {
			*target = &cluster.PriorityClass{}
		}
		(*target).Value = &v
	case op.PowerCap != nil:
		return p.setPowerCap(op.PowerCap)
	case op.Scheduler != nil:
		sch := *op.Scheduler
		switch {
		case sch.ScoringStrategy == nil && sch.Config == "":
			p.s.Scheduler = nil
		default:
			if sch.Config != "" && !filepath.IsAbs(sch.Config) {
				sch.Config = filepath.Join(p.dir, sch.Config)
			}
			p.s.Scheduler = &sch
		}
	case op.Nodes != nil:
		for i := range p.s.NodePools {
			if p.s.NodePools[i].Name == op.Nodes.Pool {
				p.s.NodePools[i].Count = op.Nodes.Count
				return nil
			}
		}
		return fmt.Errorf("nodes.pool: unknown pool %q (pools: %s)", op.Nodes.Pool, strings.Join(p.poolNames(), ", "))
	}
	return nil
}

func (p *patcher) setQuota(s *SetQuota) error {
	if !slices.Contains(p.flavors, s.Flavor) {
		return fmt.Errorf("set.flavor: unknown flavor %q (flavors: %s)", s.Flavor, strings.Join(p.flavors, ", "))
	}
	if s.Cohort != "" {
		return p.setCohortQuota(s)
	}
	qs, err := p.queues(s.Queue, "set.queue")
	if err != nil {
		return err
	}
	matched := 0
	for _, q := range qs {
		for i := range q.Quotas {
			fq := &q.Quotas[i]
			if fq.Flavor != s.Flavor {
				continue
			}
			matched++
			if err := s.apply(fq, "queue "+q.Name); err != nil {
				return err
			}
		}
	}
	if matched == 0 {
		return fmt.Errorf("set.flavor: queue %q has no quota on flavor %s", s.Queue, s.Flavor)
	}
	return nil
}

// limit applies a limit change: nil keeps the old one, Unlimited clears it.
func limit(old, set *string) *string {
	switch {
	case set == nil:
		return old
	case *set == Unlimited:
		return nil
	default:
		v := *set
		return &v
	}
}

func (p *patcher) cohortNames() []string {
	var names []string
	for _, c := range p.s.Cohorts {
		names = append(names, c.Name)
	}
	return names
}

// setCohortQuota changes a cohort's own quota; a flavor or resource it has none of is added with
// the nominalQuota given.
func (p *patcher) setCohortQuota(s *SetQuota) error {
	i := slices.IndexFunc(p.s.Cohorts, func(c cluster.Cohort) bool { return c.Name == s.Cohort })
	if i < 0 {
		return fmt.Errorf("set.cohort: unknown cohort %q (cohorts: %s)", s.Cohort, strings.Join(p.cohortNames(), ", "))
	}
	c := &p.s.Cohorts[i]
	j := slices.IndexFunc(c.Quotas, func(fq cluster.FlavorQuota) bool { return fq.Flavor == s.Flavor })
	if j < 0 {
		c.Quotas = append(c.Quotas, cluster.FlavorQuota{Flavor: s.Flavor, Resources: map[string]cluster.Quota{}})
		j = len(c.Quotas) - 1
	}
	return s.apply(&c.Quotas[j], "cohort "+c.Name)
}

// apply makes s's change to the quota of its resource in fq, whose owner (a queue or a cohort)
// errors name.
func (s *SetQuota) apply(fq *cluster.FlavorQuota, owner string) error {
	quota, had := fq.Resources[s.Resource]
	if !had && s.NominalQuota == nil {
		return fmt.Errorf("set.resource: %s has no %s quota on flavor %s; give nominalQuota to add one", owner, s.Resource, s.Flavor)
	}
	if s.NominalQuota != nil {
		quota.NominalQuota = *s.NominalQuota
	}
	quota.BorrowingLimit = limit(quota.BorrowingLimit, s.BorrowingLimit)
	quota.LendingLimit = limit(quota.LendingLimit, s.LendingLimit)
	if fq.Resources == nil {
		fq.Resources = map[string]cluster.Quota{}
	}
	fq.Resources[s.Resource] = quota
	return nil
}

// addCohort lists a cohort the spec does not have yet ("" is none), as Kueue creates a cohort a
// queue or a cohort names.
func (p *patcher) addCohort(name string) {
	if name != "" && !slices.Contains(p.cohortNames(), name) {
		p.s.Cohorts = append(p.s.Cohorts, cluster.Cohort{Name: name})
	}
}

func (p *patcher) setCohort(c *SetCohort) error {
	if c.Parent != nil {
		// A cohort tree: both ends are added when unlisted.
		p.addCohort(c.Cohort)
		p.addCohort(*c.Parent)
		for i := range p.s.Cohorts {
			if p.s.Cohorts[i].Name == c.Cohort {
				p.s.Cohorts[i].Parent = *c.Parent
			}
		}
		return nil
	}
	qs, err := p.queues(c.Queue, "cohort.queue")
	if err != nil {
		return err
	}
	p.addCohort(c.Cohort)
	for _, q := range qs {
		q.Cohort = c.Cohort
	}
	return nil
}

func (p *patcher) poolNames() []string {
	var names []string
	for _, np := range p.s.NodePools {
		names = append(names, np.Name)
	}
	return names
}

func (p *patcher) setPowerCap(c *SetPowerCap) error {
	var pools []*cluster.NodePool
	for i := range p.s.NodePools {
		np := &p.s.NodePools[i]
		if np.Name == c.Pool || (c.Pool == "*" && np.GPUFamily != cluster.CPUFamily) {
			pools = append(pools, np)
		}
	}
	if len(pools) == 0 {
		return fmt.Errorf("powerCap.pool: unknown pool %q (pools: %s; or \"*\" for every GPU pool)", c.Pool, strings.Join(p.poolNames(), ", "))
	}
	for _, np := range pools {
		if c.Value == "" {
			delete(np.Labels, contract.PowerCap)
			continue
		}
		g, ok := p.cat.GPU(np.GPUFamily)
		if !ok {
			return fmt.Errorf("powerCap.pool: pool %s has no GPUs (%s)", np.Name, np.GPUFamily)
		}
		w, err := p.cat.ParseCap(c.Value, g)
		if err != nil {
			return fmt.Errorf("powerCap.value: pool %s: %w", np.Name, err)
		}
		v := c.Value
		if strings.HasSuffix(v, "%") {
			v = strconv.FormatFloat(w, 'f', 0, 64) + "W"
		}
		if np.Labels == nil {
			np.Labels = map[string]string{}
		}
		np.Labels[contract.PowerCap] = v
	}
	return nil
}
