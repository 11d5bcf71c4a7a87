// Package cluster reads a kueuelab cluster spec (the node pools, queues and teams a Kueue admin
// would set up) and renders it into KWOK Nodes and Kueue objects. Its Placer decides, for each
// trace workload, the namespace, LocalQueue, priority class and GPU family the workload gets.
// Load is strict: an unknown field or a bad value is an error naming the file, line and field.
package cluster

// APIVersion and Kind identify a cluster spec document.
const (
	APIVersion = "kueuelab.io/v1alpha1"
	Kind       = "ClusterSpec"
)

// Spec is a cluster spec: what hardware exists and how Kueue shares it between teams.
type Spec struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Metadata   Metadata `yaml:"metadata"`
	// NodePools are the node groups; each becomes Count KWOK Nodes named <pool>-<NNN>. One
	// ResourceFlavor is derived per GPU family (lowercased family name) plus "cpu" for CPU pools.
	NodePools []NodePool `yaml:"nodePools"`
	// Topology, when set, declares a Kueue Topology; every node gets block/rack labels and
	// every flavor references it.
	Topology *Topology `yaml:"topology,omitempty"`
	// Cohorts are emitted as Kueue Cohort objects; every cohort a queue names must be listed.
	Cohorts       []Cohort       `yaml:"cohorts,omitempty"`
	ClusterQueues []ClusterQueue `yaml:"clusterQueues"`
	// Teams each get a Namespace (the team name) and a LocalQueue pointing at a ClusterQueue.
	Teams []Team `yaml:"teams"`
	// NamespaceMapping maps a trace namespace to a team when the namespace is not a team name.
	NamespaceMapping map[string]string `yaml:"namespaceMapping,omitempty"`
	// DefaultTeam receives workloads whose namespace matches no team and no mapping.
	DefaultTeam string `yaml:"defaultTeam,omitempty"`
	// PriorityClasses maps the trace's intent classes to WorkloadPriorityClasses.
	PriorityClasses PriorityClasses `yaml:"priorityClasses,omitempty"`
	// Scheduler is how kube-scheduler places admitted pods on nodes (default: upstream's,
	// NodeResourcesFit LeastAllocated on cpu and memory).
	Scheduler *Scheduler `yaml:"scheduler,omitempty"`
	// MIGFor moves workloads of some families from whole GPUs to MIG slices: what an operator
	// decides when cutting GPUs for small jobs ("debug and eval jobs get a 3g.40gb").
	MIGFor []MIGRule `yaml:"migFor,omitempty"`

	file    string
	dir     string // what relative paths in the spec are relative to
	valid   bool
	flavors []*flavor
}

// Metadata names the spec (informational).
type Metadata struct {
	Name string `yaml:"name,omitempty"`
}

// NodePool is a group of identical nodes.
type NodePool struct {
	Name string `yaml:"name"`
	// GPUFamily is one of the catalog: H100-SXM, H100-NVL, H200-SXM, A100-SXM, A100-PCIE, L40S,
	// L4, MI300X, CPU.
	GPUFamily   string `yaml:"gpuFamily"`
	Count       int    `yaml:"count"`
	GPUsPerNode int    `yaml:"gpusPerNode,omitempty"`
	// CPU and Memory are the node's capacity (= allocatable) as Kubernetes quantities.
	CPU    string `yaml:"cpu"`
	Memory string `yaml:"memory"`
	// Pods is the node's pod capacity (default 110, the kubelet default).
	Pods int `yaml:"pods,omitempty"`
	// CPUModel is recorded on the nodes for the power model (annotation kueuelab.io/cpu-model).
	CPUModel string            `yaml:"cpuModel,omitempty"`
	Labels   map[string]string `yaml:"labels,omitempty"`
	// Taints are added to the nodes; the pool's flavor tolerates them so Kueue injects the
	// tolerations into admitted pods.
	Taints []Taint `yaml:"taints,omitempty"`
	// Topology overrides the spec topology's rack and block sizes for this pool.
	Topology *PoolTopology `yaml:"topology,omitempty"`
	// MIG partitions the pool's GPUs into MIG slices (NVIDIA families with MIG only).
	MIG *PoolMIG `yaml:"mig,omitempty"`
	// TimeSlicing shares each of the pool's GPUs between pods by time-slicing, as NVIDIA's device
	// plugin does with sharing.timeSlicing (NVIDIA families only, not with MIG).
	TimeSlicing *PoolTimeSlicing `yaml:"timeSlicing,omitempty"`
}

// PoolTimeSlicing is the device plugin's sharing.timeSlicing for nvidia.com/gpu: each GPU is
// advertised as Replicas devices, a pod's nvidia.com/gpu request counts replicas, and Kueue's quota
// on the pool's flavor counts them too. Replicas share their GPU's compute and memory with no
// isolation (the agent's physics).
type PoolTimeSlicing struct {
	Replicas int `yaml:"replicas"`
}

// Taint is a node taint.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value,omitempty"`
	Effect string `yaml:"effect"`
}

// PoolTopology sizes a pool's racks and blocks.
type PoolTopology struct {
	NodesPerRack  int `yaml:"nodesPerRack,omitempty"`
	RacksPerBlock int `yaml:"racksPerBlock,omitempty"`
}

// Topology is the Kueue Topology of the cluster: block > rack > host.
type Topology struct {
	// Name of the Topology object (default "default").
	Name string `yaml:"name,omitempty"`
	// BlockLabel and RackLabel are the node label keys of the two upper levels (defaults
	// cloud.provider.com/topology-block and cloud.provider.com/topology-rack).
	BlockLabel string `yaml:"blockLabel,omitempty"`
	RackLabel  string `yaml:"rackLabel,omitempty"`
	// NodesPerRack and RacksPerBlock size every pool unless it overrides them (defaults 4, 4).
	NodesPerRack  int `yaml:"nodesPerRack,omitempty"`
	RacksPerBlock int `yaml:"racksPerBlock,omitempty"`
	// GangLevel is the level gang workloads prefer to be packed in: block, rack (default) or
	// hostname.
	GangLevel string `yaml:"gangLevel,omitempty"`
}

// Cohort is a Kueue Cohort: a borrowing group of ClusterQueues, optionally nested.
type Cohort struct {
	Name        string       `yaml:"name"`
	Parent      string       `yaml:"parent,omitempty"`
	FairSharing *FairSharing `yaml:"fairSharing,omitempty"`
	// Quotas are the cohort's own shared quotas (on top of its members'); borrowing and
	// lending limits need a parent.
	Quotas []FlavorQuota `yaml:"quotas,omitempty"`
}

// FairSharing holds a fair-sharing weight (a quantity, default 1 in Kueue).
type FairSharing struct {
	Weight string `yaml:"weight"`
}

// ClusterQueue is a Kueue ClusterQueue.
type ClusterQueue struct {
	Name   string `yaml:"name"`
	Cohort string `yaml:"cohort,omitempty"`
	// NamespaceSelector limits the namespaces that may submit; omitted means all ({}).
	NamespaceSelector *Selector `yaml:"namespaceSelector,omitempty"`
	// QueueingStrategy is BestEffortFIFO (default) or StrictFIFO.
	QueueingStrategy  string             `yaml:"queueingStrategy,omitempty"`
	Preemption        *Preemption        `yaml:"preemption,omitempty"`
	FairSharing       *FairSharing       `yaml:"fairSharing,omitempty"`
	FlavorFungibility *FlavorFungibility `yaml:"flavorFungibility,omitempty"`
	// AdmissionScope turns on admission fair sharing for this queue (with admissionFairSharing
	// in Kueue's configuration): its heads are ordered by their LocalQueues' decayed usage.
	AdmissionScope *AdmissionScope `yaml:"admissionScope,omitempty"`
	// Quotas list the flavors in the order Kueue tries them (put cpu first so CPU pods do not
	// take GPU nodes); they form one resource group covering every resource named.
	Quotas []FlavorQuota `yaml:"quotas"`
}

// Selector is a label selector on namespaces.
type Selector struct {
	MatchLabels map[string]string `yaml:"matchLabels,omitempty"`
}

// Preemption is a ClusterQueue's preemption policy.
type Preemption struct {
	ReclaimWithinCohort string              `yaml:"reclaimWithinCohort,omitempty"`
	WithinClusterQueue  string              `yaml:"withinClusterQueue,omitempty"`
	BorrowWithinCohort  *BorrowWithinCohort `yaml:"borrowWithinCohort,omitempty"`
}

// BorrowWithinCohort lets a borrowing workload preempt lower-priority ones in the cohort.
type BorrowWithinCohort struct {
	Policy               string `yaml:"policy"`
	MaxPriorityThreshold *int32 `yaml:"maxPriorityThreshold,omitempty"`
}

// AdmissionScope is a ClusterQueue's admission fair sharing mode: UsageBasedAdmissionFairSharing
// or NoAdmissionFairSharing.
type AdmissionScope struct {
	AdmissionMode string `yaml:"admissionMode"`
}

// FlavorFungibility says when a workload tries the next flavor, and (Preference, with both
// policies TryNextFlavor) which of the flavors that all need borrowing or preemption it takes:
// BorrowingOverPreemption (Kueue's default) or PreemptionOverBorrowing.
type FlavorFungibility struct {
	WhenCanBorrow  string `yaml:"whenCanBorrow,omitempty"`
	WhenCanPreempt string `yaml:"whenCanPreempt,omitempty"`
	Preference     string `yaml:"preference,omitempty"`
}

// FlavorQuota is the quota of one flavor, per resource (cpu, memory, pods, nvidia.com/gpu,
// amd.com/gpu).
type FlavorQuota struct {
	Flavor    string           `yaml:"flavor"`
	Resources map[string]Quota `yaml:"resources"`
}

// Quota is a nominal quota with optional borrowing and lending limits. A bare scalar
// ("nvidia.com/gpu: 48") is shorthand for a nominal quota.
type Quota struct {
	NominalQuota   string  `yaml:"nominalQuota"`
	BorrowingLimit *string `yaml:"borrowingLimit,omitempty"`
	LendingLimit   *string `yaml:"lendingLimit,omitempty"`
}

// Team is a tenant: a Namespace and a LocalQueue on a ClusterQueue.
type Team struct {
	Name         string `yaml:"name"`
	ClusterQueue string `yaml:"clusterQueue"`
	// LocalQueue names the team's LocalQueue (default "<team>-lq").
	LocalQueue string `yaml:"localQueue,omitempty"`
}

// PriorityClasses maps each intent class to a WorkloadPriorityClass.
type PriorityClasses struct {
	Performance *PriorityClass `yaml:"performance,omitempty"`
	Standard    *PriorityClass `yaml:"standard,omitempty"`
	Eco         *PriorityClass `yaml:"eco,omitempty"`
}

// PriorityClass is a WorkloadPriorityClass; Name defaults to the intent, Value to 1000 / 100 /
// 10 for performance / standard / eco.
type PriorityClass struct {
	Name        string `yaml:"name,omitempty"`
	Value       *int32 `yaml:"value,omitempty"`
	Description string `yaml:"description,omitempty"`
}

// File returns the path the spec was loaded from ("" when built in code).
func (s *Spec) File() string { return s.file }
