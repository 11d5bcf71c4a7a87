package agent

import (
	"maps"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// The agent's state that crosses goroutines, one type per direction: the informer handlers mark
// objects for the Run goroutine (inbox); the Run goroutine publishes its view for readers
// (published) and books what pods cost their workloads (costBook).

// inbox is what the informer handlers marked since the Run goroutine last took it.
type inbox struct {
	mu      sync.Mutex
	pods    map[string]struct{}
	nodes   map[string]struct{}
	deleted map[string]types.UID // pods deleted since the last take, by key
	// wake tells the Run goroutine that something was marked.
	wake chan struct{}
}

func newInbox() *inbox {
	return &inbox{pods: map[string]struct{}{}, nodes: map[string]struct{}{}, deleted: map[string]types.UID{}, wake: make(chan struct{}, 1)}
}

// markNode and markPod mark an object by key; a pod deleted with a known UID is remembered.
func (b *inbox) markNode(key string) {
	b.mu.Lock()
	b.nodes[key] = struct{}{}
	b.mu.Unlock()
	b.signal()
}

func (b *inbox) markPod(key string, deleted types.UID) {
	b.mu.Lock()
	b.pods[key] = struct{}{}
	if deleted != "" {
		b.deleted[key] = deleted
	}
	b.mu.Unlock()
	b.signal()
}

func (b *inbox) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take returns what was marked and empties the inbox.
func (b *inbox) take() (nodes, pods map[string]struct{}, deleted map[string]types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	nodes, pods, deleted = b.nodes, b.pods, b.deleted
	b.nodes, b.pods, b.deleted = map[string]struct{}{}, map[string]struct{}{}, map[string]types.UID{}
	return nodes, pods, deleted
}

// published is the Run goroutine's view after its last sync, for Stats and Snapshot.
type published struct {
	mu        sync.Mutex
	stats     Stats
	nodeNames []string  // by engine.NodeID
	nodePower []float64 // by engine.NodeID, as of the last sync
}

// costBook is what pods cost their workloads beyond their completion writes, per namespace/workload
// id: the energy of pods that left the engine without a completion write (lost), and what faults
// and checkpoints cost (faults.go). The Run goroutine books; the runner reads once the run is over.
type costBook struct {
	mu     sync.Mutex
	lost   map[string]float64
	faults map[string]*WorkloadFaults
	// lostBusy is the compute pods on time-sliced GPUs used before they left without a
	// completion write, in GPU-seconds.
	lostBusy map[string]float64
}

func newCostBook() *costBook {
	return &costBook{lost: map[string]float64{}, faults: map[string]*WorkloadFaults{}, lostBusy: map[string]float64{}}
}

func (c *costBook) addLost(key string, j, busyGPUSec float64) {
	c.mu.Lock()
	c.lost[key] += j
	if busyGPUSec > 0 {
		c.lostBusy[key] += busyGPUSec
	}
	c.mu.Unlock()
}

// updateFaults calls f with the workload's fault record, under the book's lock.
func (c *costBook) updateFaults(key string, f func(*WorkloadFaults)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wf := c.faults[key]
	if wf == nil {
		wf = &WorkloadFaults{lastAt: -1}
		c.faults[key] = wf
	}
	f(wf)
}

func (c *costBook) lostCopy() (energyJ, busyGPUSec map[string]float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.lost), maps.Clone(c.lostBusy)
}

func (c *costBook) faultsCopy() map[string]WorkloadFaults {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]WorkloadFaults, len(c.faults))
	for k, f := range c.faults {
		out[k] = *f
	}
	return out
}
