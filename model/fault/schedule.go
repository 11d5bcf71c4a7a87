package fault

import (
	"container/heap"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/kueuelab/kueuelab/model/hw"
)

// Kind is what a fault event does.
type Kind string

// Fault kinds.
const (
	// NodeDown: the node goes NotReady for DownSec; its pods stop, then are evicted.
	NodeDown Kind = "node"
	// GPUFail: GPU index GPU of the node fails; the pod using it fails.
	GPUFail Kind = "gpu"
	// PodFail: one running pod of Workload (of Role, when set) fails.
	PodFail Kind = "pod"
)

// Event is one fault at trace time At (seconds).
type Event struct {
	At       float64
	Kind     Kind
	Node     string
	GPU      int
	Workload string
	Role     string
	DownSec  float64
	// Random is set for a fault drawn from the rates, unset for an explicit one.
	Random bool
}

func (e Event) String() string {
	switch e.Kind {
	case NodeDown:
		return fmt.Sprintf("node %s down for %s at %s", e.Node, Duration(e.DownSec), Duration(e.At))
	case GPUFail:
		return fmt.Sprintf("GPU %d of node %s fails at %s", e.GPU, e.Node, Duration(e.At))
	default:
		role := ""
		if e.Role != "" {
			role = " (" + e.Role + ")"
		}
		return fmt.Sprintf("a pod of workload %s%s fails at %s", e.Workload, role, Duration(e.At))
	}
}

// Node is a node faults may hit.
type Node struct {
	Name string
	Pool string
	GPUs int
}

// Rates are the random faults' rates after defaults: per GPU-second and per node-second.
type Rates struct {
	GPUPerSec, NodePerSec float64
	RepairSec             float64
}

// Rates resolves the random faults' rates: the spec's, else the catalog's, times Scale.
func (s *Spec) Rates(def hw.FaultRates) (Rates, error) {
	r := s.Random
	if r == nil {
		return Rates{}, nil
	}
	gpuH, nodeH, repair := r.GPUMTBFHours, r.NodeMTBFHours, float64(r.Repair)
	if gpuH == 0 {
		gpuH = def.GPUMTBFHours
	}
	if nodeH == 0 {
		nodeH = def.NodeMTBFHours
	}
	if repair == 0 {
		repair = def.NodeRepairSec
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	var out Rates
	if !r.NodeOnly {
		if gpuH <= 0 {
			return Rates{}, errors.New("faults.random: no GPU fault rate (gpuMTBFHours) in the spec or the hardware catalog")
		}
		out.GPUPerSec = scale / (gpuH * 3600)
	}
	if !r.GPUOnly {
		if nodeH <= 0 || repair <= 0 {
			return Rates{}, errors.New("faults.random: no node fault rate or repair time (nodeMTBFHours, repair) in the spec or the hardware catalog")
		}
		out.NodePerSec = scale / (nodeH * 3600)
	}
	out.RepairSec = repair
	return out, nil
}

// JobMTBFSec is the mean trace time between the faults that hit a job running on gpus GPUs
// spread over nodes nodes (+Inf without faults).
func (r Rates) JobMTBFSec(gpus, nodes int) float64 {
	rate := float64(gpus)*r.GPUPerSec + float64(nodes)*r.NodePerSec
	if rate <= 0 {
		return math.Inf(1)
	}
	return 1 / rate
}

// Schedule yields a spec's faults in trace-time order. Random faults are drawn lazily from one
// generator per node and kind, seeded by the spec's seed and the node's name, so a fault's time
// does not depend on how far the schedule was read, on the other nodes, or on the run. A fault on
// a node that is down is dropped (Dropped counts them).
type Schedule struct {
	explicit []Event
	streams  streamHeap
	down     map[string]float64
	// Dropped counts faults that hit a node while it was down.
	Dropped int
}

// NewSchedule checks s against the nodes and prepares its events. def supplies the rates the
// spec leaves out.
func NewSchedule(s *Spec, nodes []Node, def hw.FaultRates) (*Schedule, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	byName := make(map[string]Node, len(nodes))
	pools := map[string]bool{}
	for _, n := range nodes {
		byName[n.Name] = n
		pools[n.Pool] = true
	}
	rates, err := s.Rates(def)
	if err != nil {
		return nil, err
	}
	sch := &Schedule{down: map[string]float64{}}
	var errs []error
	for i, e := range s.Events {
		ev := Event{At: float64(e.At), Workload: e.Workload, Role: e.Role, Node: e.Node}
		switch {
		case e.Workload != "":
			ev.Kind = PodFail
		case e.GPU != nil:
			ev.Kind, ev.GPU = GPUFail, *e.GPU
		default:
			ev.Kind, ev.DownSec = NodeDown, float64(e.For)
			if ev.DownSec == 0 {
				ev.DownSec = rates.RepairSec
				if ev.DownSec == 0 {
					ev.DownSec = def.NodeRepairSec
				}
			}
			if ev.DownSec <= 0 {
				errs = append(errs, fmt.Errorf("faults.events[%d].for: required (the catalog has no repair time)", i))
			}
		}
		if e.Node != "" {
			n, ok := byName[e.Node]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("faults.events[%d].node: no node %q in the cluster (nodes are <pool>-<NNN>, e.g. %s)", i, e.Node, example(nodes)))
			case ev.Kind == GPUFail && ev.GPU >= n.GPUs:
				errs = append(errs, fmt.Errorf("faults.events[%d].gpu: node %s has %d GPUs, no index %d", i, e.Node, n.GPUs, ev.GPU))
			}
		}
		sch.explicit = append(sch.explicit, ev)
	}
	sort.SliceStable(sch.explicit, func(i, j int) bool { return sch.explicit[i].At < sch.explicit[j].At })
	if r := s.Random; r != nil {
		for i, p := range r.Pools {
			if !pools[p] {
				errs = append(errs, fmt.Errorf("faults.random.pools[%d]: no node pool %q in the cluster", i, p))
			}
		}
		seed := s.Seed
		if seed == 0 {
			seed = 1
		}
		names := make([]string, 0, len(byName))
		for name := range byName {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			n := byName[name]
			if len(r.Pools) > 0 && !slices.Contains(r.Pools, n.Pool) {
				continue
			}
			if rates.NodePerSec > 0 {
				sch.streams = append(sch.streams, newStream(seed, n, NodeDown, rates.NodePerSec, rates.RepairSec))
			}
			if rates.GPUPerSec > 0 && n.GPUs > 0 {
				sch.streams = append(sch.streams, newStream(seed, n, GPUFail, rates.GPUPerSec*float64(n.GPUs), 0))
			}
		}
		heap.Init(&sch.streams)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return sch, nil
}

func example(nodes []Node) string {
	if len(nodes) == 0 {
		return "none"
	}
	return nodes[0].Name
}

// Next returns the next fault, or false when there is none.
func (s *Schedule) Next() (Event, bool) { return s.NextBy(math.Inf(1)) }

// NextBy returns the next fault due at or before t, or false when there is none yet.
func (s *Schedule) NextBy(t float64) (Event, bool) {
	for {
		if s.Peek() > t {
			return Event{}, false
		}
		e, ok := s.pop()
		if !ok {
			return Event{}, false
		}
		if e.Node != "" && e.At < s.down[e.Node] {
			s.Dropped++
			continue
		}
		if e.Kind == NodeDown {
			s.down[e.Node] = e.At + e.DownSec
		}
		return e, true
	}
}

// Peek is the time of the next fault (+Inf: none), without consuming it. A fault Next will drop
// may be peeked; Next then returns the one after it.
func (s *Schedule) Peek() float64 {
	t := math.Inf(1)
	if len(s.explicit) > 0 {
		t = s.explicit[0].At
	}
	if len(s.streams) > 0 && s.streams[0].next.At < t {
		t = s.streams[0].next.At
	}
	return t
}

func (s *Schedule) pop() (Event, bool) {
	useExplicit := len(s.explicit) > 0 && (len(s.streams) == 0 || s.explicit[0].At <= s.streams[0].next.At)
	switch {
	case useExplicit:
		e := s.explicit[0]
		s.explicit = s.explicit[1:]
		return e, true
	case len(s.streams) > 0:
		st := s.streams[0]
		e := st.next
		st.advance()
		heap.Fix(&s.streams, 0)
		return e, true
	}
	return Event{}, false
}

// stream is one Poisson process: the faults of one kind on one node.
type stream struct {
	node   Node
	kind   Kind
	rate   float64 // per second
	repair float64
	rng    *rand.Rand
	next   Event
}

func newStream(seed uint64, n Node, k Kind, rate, repair float64) *stream {
	h := fnv.New64a()
	_, _ = h.Write([]byte(n.Name + "/" + string(k)))
	st := &stream{node: n, kind: k, rate: rate, repair: repair, rng: rand.New(rand.NewPCG(seed, h.Sum64()))}
	st.next.At = 0
	st.advance()
	return st
}

// advance draws the stream's next fault after the current one.
func (st *stream) advance() {
	at := st.next.At + st.rng.ExpFloat64()/st.rate
	e := Event{At: at, Kind: st.kind, Node: st.node.Name, Random: true}
	if st.kind == GPUFail {
		e.GPU = st.rng.IntN(st.node.GPUs)
	} else {
		e.DownSec = st.repair
	}
	st.next = e
}

type streamHeap []*stream

func (h streamHeap) Len() int { return len(h) }
func (h streamHeap) Less(i, j int) bool {
	a, b := h[i].next, h[j].next
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Node != b.Node {
		return a.Node < b.Node
	}
	return a.Kind < b.Kind
}
func (h streamHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
