// Package agent makes fake pods on KWOK nodes behave like AI jobs: it watches pods and nodes
// through informers, feeds what the render contract says into the simulation engine, advances it
// to the trace clock's time, and writes progress, energy and completion back to the pods.
// One goroutine owns the engine; informer handlers only mark objects dirty, writes go through a
// rate-limited queue. The agent moves the engine only when something changes or when its alarm
// on the trace clock fires at the next pod completion the engine predicts, so a pod's work ends
// at exactly the trace time the physics says, however fast the clock runs.
//
// Checkpoints of evicted pods are kept per workload and role (namespace/workload/role): the
// members of a synchronous gang progress in lockstep, so one checkpoint per role is exact for
// them, and for independent pods of one role the least advanced checkpoint is kept. They live in
// the agent's memory; a replacement pod created while no agent runs starts from zero.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/kueuelab/kueuelab/model/hw"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/agent/engine"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

const nodeNameIndex = "spec.nodeName"

// Stats is a consistent view of the agent after its last tick or sync.
type Stats struct {
	TraceSec    float64 // trace time simulated since the agent started
	Ticks       int
	Nodes       int // nodes known to the engine
	Tracked     int // pods known to the engine
	Started     int // tracked pods running in the engine now (Running counts the last tick)
	Running     int
	Progressing int
	GangBlocked int
	Completions int // completion writes queued
	CapChanges  int // power-cap changes applied
	Backlog     int // pod writes not yet done
}

// Agent simulates the pods selected by its Config. Create it with New and start it with Run.
type Agent struct {
	cfg    Config
	client kubernetes.Interface
	cat    *hw.Catalog
	log    *slog.Logger
	m      *metrics
	w      *writer
	eng    *engine.Engine

	podInf, nodeInf cache.SharedIndexInformer
	pods            listersv1.PodLister
	nodes           listersv1.NodeLister
	recorder        record.EventRecorder
	broadcaster     record.EventBroadcaster

	trace *simclock.Clock
	alarm *simclock.Alarm

	inbox *inbox // marked by the informer handlers

	// Owned by the Run goroutine.
	nodeState   map[string]*nodeState
	podState    map[string]*podState
	gangs       map[string]map[string]struct{} // gang id -> member pod keys
	checkpoints map[string]float64             // namespace/workload/role -> remaining at checkpoint
	bad         map[types.UID]struct{}         // pods whose contract was rejected (logged once)
	reported    map[string]struct{}            // gangs reported blocked in their current episode
	badNodes    map[string]struct{}            // nodes the engine cannot model (logged once)
	servicePods []labels.Selector              // Config.ServicePods
	started     int                            // pods running in the engine
	blocked     []engine.GangStatus
	acks        []simclock.Key // hold acknowledgements due once the alarm is re-armed
	completions int
	capChanges  int
	ticks       int

	pub   published // for Stats and Snapshot
	costs *costBook

	// restartsOwed counts, per namespace/workload/role, the interrupted pods whose replacements
	// have not started yet: each pays the restart overhead (owned by the Run goroutine).
	restartsOwed map[string]int
}

// New validates cfg and prepares an agent; nothing talks to the API server before Run.
func New(cfg Config, client kubernetes.Interface, catalog *hw.Catalog) (*Agent, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	if catalog == nil {
		var err error
		if catalog, err = hw.DefaultCatalog(); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
	}
	a := &Agent{
		cfg: cfg, client: client, cat: catalog, log: slog.Default().With("component", "kueuelab-agent"), m: newMetrics(),
		eng:   engine.New(catalog),
		trace: cfg.Trace, inbox: newInbox(),
		nodeState: map[string]*nodeState{}, podState: map[string]*podState{}, gangs: map[string]map[string]struct{}{},
		checkpoints: map[string]float64{}, bad: map[types.UID]struct{}{}, reported: map[string]struct{}{}, badNodes: map[string]struct{}{},
		costs: newCostBook(), restartsOwed: map[string]int{},
	}
	for _, sel := range cfg.ServicePods {
		ls, err := labels.Parse(sel)
		if err != nil {
			return nil, fmt.Errorf("agent config: service pods %q: %w", sel, err)
		}
		a.servicePods = append(a.servicePods, ls)
	}
	a.w = newWriter(client, cfg.WriteQPS, cfg.WriteBurst, a.log, a.m)
	stripManaged := informers.WithTransform(func(o any) (any, error) {
		if m, ok := o.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return o, nil
	})
	podOpts := []informers.SharedInformerOption{stripManaged, informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = cfg.PodSelector })}
	if len(cfg.Namespaces) == 1 {
		podOpts = append(podOpts, informers.WithNamespace(cfg.Namespaces[0]))
	}
	podF := informers.NewSharedInformerFactoryWithOptions(client, 0, podOpts...)
	nodeF := informers.NewSharedInformerFactoryWithOptions(client, 0, stripManaged,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = cfg.NodeSelector }))
	a.podInf, a.pods = podF.Core().V1().Pods().Informer(), podF.Core().V1().Pods().Lister()
	a.nodeInf, a.nodes = nodeF.Core().V1().Nodes().Informer(), nodeF.Core().V1().Nodes().Lister()
	if err := a.podInf.AddIndexers(cache.Indexers{nodeNameIndex: func(o any) ([]string, error) {
		if p, ok := o.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("agent: pod index: %w", err)
	}
	mark := func(nodes bool) cache.ResourceEventHandlerFuncs {
		add := func(o any, deleted bool) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o)
			if err != nil {
				return
			}
			if nodes {
				a.inbox.markNode(key)
				return
			}
			var uid types.UID
			if deleted {
				if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
					o = t.Obj
				}
				if p, ok := o.(*corev1.Pod); ok {
					uid = p.UID
				}
			}
			a.inbox.markPod(key, uid)
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: func(o any) { add(o, false) }, UpdateFunc: func(_, o any) { add(o, false) },
			DeleteFunc: func(o any) { add(o, true) }}
	}
	if _, err := a.podInf.AddEventHandler(mark(false)); err != nil {
		return nil, fmt.Errorf("agent: pod handler: %w", err)
	}
	if _, err := a.nodeInf.AddEventHandler(mark(true)); err != nil {
		return nil, fmt.Errorf("agent: node handler: %w", err)
	}
	a.broadcaster = record.NewBroadcaster()
	a.recorder = a.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kueuelab-agent"})
	return a, nil
}

// Registry is the agent's private Prometheus registry (what /metrics serves).
func (a *Agent) Registry() *prometheus.Registry { return a.m.reg }

// Stats returns the agent's state after its last tick or sync; safe from any goroutine.
func (a *Agent) Stats() Stats {
	a.pub.mu.Lock()
	defer a.pub.mu.Unlock()
	s := a.pub.stats
	s.Backlog = a.w.backlog()
	return s
}

// LostEnergy returns, per "namespace/workload id" (the contract's workload id, which is the
// trace's), the joules burned by pods that left before finishing: deleted (evicted, preempted)
// or ended by someone else. No energy annotation reports them, so a runner that sums the
// annotations adds these. Safe from any goroutine; the map is a copy.
func (a *Agent) LostEnergy() map[string]float64 {
	j, _ := a.costs.lostCopy()
	return j
}

// InProcess is an agent for a runner in the same process: it shares the runner's trace clock,
// hands pod steps to and from the runner through holds on it (handoff selects the pods the runner
// follows), and writes at up to 200 pods/s (a gang of 64 pods finishing together would otherwise
// wait a second behind the default limit of 50).
func InProcess(cs kubernetes.Interface, clk *simclock.Clock, seed uint64, handoff func(*corev1.Pod) bool, namespaces []string) (*Agent, error) {
	return New(Config{Trace: clk, Handoff: handoff, Seed: seed, WriteQPS: 200, WriteBurst: 400, Namespaces: namespaces}, cs, nil)
}

// Snapshot is what a runner in the same process reads from the agent.
type Snapshot struct {
	// NodePowerW is each simulated node's power in watts, by node name, as of the agent's last
	// sync (power changes only when pods start, stop or finish, or a cap changes).
	NodePowerW map[string]float64
	// LostEnergyJ is, per "namespace/workload id", the energy of pods that left before finishing,
	// LostBusyGPUSec the compute those on time-sliced GPUs used (engine.BusyGPUSec).
	LostEnergyJ    map[string]float64
	LostBusyGPUSec map[string]float64
	// Faults is, per "namespace/workload id", what faults and checkpoints cost the workload.
	Faults map[string]WorkloadFaults
}

// Snapshot returns the agent's node power and lost energy; safe from any goroutine.
func (a *Agent) Snapshot() Snapshot {
	a.pub.mu.Lock()
	power := make(map[string]float64, len(a.pub.nodeNames))
	for i, n := range a.pub.nodeNames {
		power[n] = a.pub.nodePower[i]
	}
	a.pub.mu.Unlock()
	lost, busy := a.costs.lostCopy()
	return Snapshot{NodePowerW: power, LostEnergyJ: lost, LostBusyGPUSec: busy, Faults: a.Faults()}
}

// Run watches, simulates and writes until ctx ends. It returns nil when ctx is cancelled.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	if a.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("agent: metrics listener %s: %w", a.cfg.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(a.m.reg, promhttp.HandlerOpts{Registry: a.m.reg}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("metrics server", "err", err)
			}
		}()
		defer func() { _ = srv.Close() }()
	}
	a.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.client.CoreV1().Events("")})
	defer a.broadcaster.Shutdown()
	wg.Add(3)
	go func() { defer wg.Done(); a.podInf.Run(ctx.Done()) }()
	go func() { defer wg.Done(); a.nodeInf.Run(ctx.Done()) }()
	go func() { defer wg.Done(); a.w.run(ctx, a.cfg.WriteWorkers) }()
	if !cache.WaitForCacheSync(ctx.Done(), a.podInf.HasSynced, a.nodeInf.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("agent: informer caches did not sync")
	}
	a.alarm = a.trace.NewAlarm("agent", simclock.OrderCompletion)
	defer a.alarm.Stop()
	flush := a.cfg.Wall.NewTicker(a.cfg.CheckpointInterval)
	defer flush.Stop()
	a.sync()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.inbox.wake:
			a.sync()
		case <-a.alarm.C():
			a.sync()
		case <-flush.C():
			a.flushProgress()
		}
	}
}

// sync brings the engine to the trace clock's time (completing the pods whose work ended), applies
// every object marked dirty since the last sync, and arms the alarm at the next completion. The
// acknowledgements of the runner's holds go out only after the alarm is armed, so the clock
// cannot pass a completion of a pod just started.
//
// The dirty objects are read before the clock: nothing holds the clock for a change no one owes
// a step for, so it may move while a sync runs, and a change read after the time would be
// applied at a trace time before it happened (a gang member scheduled at 200 s started at the
// 50 s the sync had read, under load).
func (a *Agent) sync() {
	t0 := time.Now()
	nodes, pods, deleted := a.inbox.take()
	nodeObjs := make(map[string]*corev1.Node, len(nodes))
	for name := range nodes {
		if n, err := a.nodes.Get(name); err == nil {
			nodeObjs[name] = n
		}
	}
	podObjs := make(map[string]*corev1.Pod, len(pods)) // nil: gone
	for key := range pods {
		podObjs[key], _ = a.pods.Pods(namespaceOf(key)).Get(nameOf(key))
	}
	now := a.trace.Now()
	for _, f := range a.eng.AdvanceTo(now) {
		a.finish(f)
	}
	for name := range nodes {
		a.syncNode(name, nodeObjs[name], pods)
	}
	for key := range pods {
		p, read := podObjs[key]
		if !read {
			// Made dirty by its node's change (syncNode), after the reads above.
			p, _ = a.pods.Pods(namespaceOf(key)).Get(nameOf(key))
		}
		a.syncPod(key, p, deleted[key])
	}
	// Speeds and power of the new state, which the next completion time depends on.
	for _, f := range a.eng.Tick(0) {
		a.finish(f)
	}
	next, ok := a.eng.NextFinish()
	if due, report := a.reportGangs(); report && (!ok || due < next) {
		next, ok = due, true
	}
	a.ticks++
	if ok {
		a.alarm.Set(next)
	} else {
		a.alarm.Stop()
	}
	for _, k := range a.acks {
		a.trace.Ack(k)
	}
	a.acks = a.acks[:0]
	a.m.tickDuration.Observe(time.Since(t0).Seconds())
	a.publish()
}

// syncNode applies the node n (nil: deleted) as read by sync.
func (a *Agent) syncNode(name string, n *corev1.Node, dirtyPods map[string]struct{}) {
	if n == nil {
		return // deleted: the engine keeps the node; its pods leave through their own events
	}
	st := a.nodeState[name]
	if st == nil && len(n.Status.Allocatable) == 0 && len(n.Status.Capacity) == 0 {
		// A KWOK node gets its capacity in a status write after its creation: the engine takes it
		// once it has one, or it would model a node without CPUs or GPUs.
		return
	}
	if st == nil {
		spec, err := nodeSpec(n, a.cat)
		if err == nil {
			var id engine.NodeID
			if id, err = a.eng.AddNode(spec); err == nil {
				g, _ := a.cat.GPU(spec.GPUFamily)
				st = &nodeState{id: id, gpu: g}
				a.nodeState[name] = st
			}
		}
		if err != nil {
			if _, logged := a.badNodes[name]; !logged {
				a.badNodes[name] = struct{}{}
				a.log.Error("node ignored", "node", name, "err", err)
			}
			return
		}
		// Pods seen before their node was known are tracked now.
		objs, _ := a.podInf.GetIndexer().ByIndex(nodeNameIndex, name)
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				dirtyPods[p.Namespace+"/"+p.Name] = struct{}{}
			}
		}
	}
	if down := !nodeReady(n); down != st.down {
		// A node gone NotReady stops its pods where they are; Ready again, they may run (and
		// the scheduler may place pods there). The runner's fault injector waits for this.
		st.down = down
		if down {
			a.acks = append(a.acks, simclock.NodeDown(name))
		} else {
			a.acks = append(a.acks, simclock.NodeUp(name))
		}
		objs, _ := a.podInf.GetIndexer().ByIndex(nodeNameIndex, name)
		for _, o := range objs {
			if p, ok := o.(*corev1.Pod); ok {
				dirtyPods[p.Namespace+"/"+p.Name] = struct{}{}
			}
		}
	}
	raw := capValue(n, a.cfg.PowerCapKey)
	if raw == st.capRaw || st.gpu == nil {
		return
	}
	st.capRaw = raw // an invalid value is reported once and the previous cap stays
	capW, err := a.cat.ParseCap(raw, st.gpu)
	if err != nil {
		a.log.Error("power cap ignored", "node", name, "key", a.cfg.PowerCapKey, "err", err)
		return
	}
	applied := a.eng.SetGPUCap(st.id, capW)
	a.capChanges++
	a.log.Info("power cap", "node", name, "value", raw, "watts", applied)
}

// syncPod applies the pod p under key (nil: gone) as read by sync.
func (a *Agent) syncPod(key string, p *corev1.Pod, deletedUID types.UID) {
	if len(a.cfg.Namespaces) > 1 && !slices.Contains(a.cfg.Namespaces, namespaceOf(key)) {
		return // another run's pods (Config.Namespaces)
	}
	exists := p != nil
	st := a.podState[key]
	if st != nil && (!exists || p.UID != st.uid) {
		a.forget(key, st)
		a.ack(simclock.PodGone(st.uid))
		// An evicted pod may be gone before this agent saw it Failed: its fault is handled too.
		a.acks = append(a.acks, simclock.PodFailed(st.uid))
		st = nil
	}
	if deletedUID != "" {
		a.ack(simclock.PodGone(deletedUID))
		a.acks = append(a.acks, simclock.PodFailed(deletedUID))
	}
	if !exists {
		return
	}
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		if st != nil {
			a.stop(st)
			if !st.completing && !st.terminal {
				// Ended by someone else (a fault, the kubelet): no completion write. Its work since
				// the checkpoint is lost, its gang rolls back, a replacement resumes.
				a.interrupt(st, false)
				a.keepCheckpoint(st)
				a.lose(st)
			}
			st.terminal = true
			if p.Status.Phase == corev1.PodSucceeded {
				delete(a.checkpoints, st.ckptKey)
				delete(a.restartsOwed, st.ckptKey)
			}
			a.release(key, st)
		}
		if p.Status.Phase == corev1.PodFailed {
			a.acks = append(a.acks, simclock.PodFailed(p.UID))
		}
		return
	case p.DeletionTimestamp != nil:
		if st != nil {
			a.stop(st)
		}
		a.ack(simclock.PodGone(p.UID))
		return
	case p.Status.Phase != corev1.PodRunning:
		if st != nil {
			a.stop(st)
		}
		return
	}
	// Running: whatever happens below, the runner's hold on the pod's start ends with this sync.
	a.ack(simclock.PodStart(p.UID))
	ns := a.nodeState[p.Spec.NodeName]
	if ns == nil {
		return
	}
	if ns.down {
		// Its node is NotReady: the pod makes no progress until it is evicted.
		if st != nil {
			a.stop(st)
		}
		return
	}
	if st != nil {
		if n := containerRestarts(p); n > st.restarts {
			// The container restarted in place (restart policy OnFailure): the process crashed.
			st.restarts = n
			a.interrupt(st, true)
			a.acks = append(a.acks, simclock.PodRestart(p.UID, n))
		}
	}
	if st == nil {
		if _, done := p.Annotations[contract.Complete]; done {
			return // completed by an earlier agent; the stage or status write is on its way
		}
		if st = a.track(p); st == nil {
			return
		}
	}
	if st.running || st.completing {
		return
	}
	if err := a.eng.Start(st.id, ns.id); err != nil {
		a.log.Error("pod not started", "pod", key, "err", err)
		return
	}
	st.running, st.startedAt = true, a.eng.Now()
	a.started++
}

// ack queues the acknowledgement of one of the runner's holds on a pod (see sync).
func (a *Agent) ack(k simclock.Key) { a.acks = append(a.acks, k) }

// track adds a Running pod to the engine, resuming from its progress annotation or from its
// workload's checkpoint.
func (a *Agent) track(p *corev1.Pod) *podState {
	key := p.Namespace + "/" + p.Name
	if _, bad := a.bad[p.UID]; bad {
		return nil
	}
	reject := func(err error) *podState {
		a.bad[p.UID] = struct{}{}
		a.m.badPods.Inc()
		a.log.Error("pod ignored", "pod", key, "err", err)
		return nil
	}
	c, err := contractOf(p)
	if err != nil {
		return reject(fmt.Errorf("pod %s: %w", key, err))
	}
	spec, failAtEnd, err := podSpec(p, c, a.cfg.FailureRate, a.cfg.Seed)
	if err != nil {
		return reject(err)
	}
	prog, hasProg, err := parseProgress(p)
	if err != nil {
		return reject(err)
	}
	id, err := a.eng.AddPod(spec)
	if err != nil {
		return reject(err)
	}
	st := &podState{
		uid: p.UID, id: id, ns: p.Namespace, name: p.Name, gang: spec.GangID, workload: c.WorkloadID, duration: spec.DurationSec,
		ckptKey: p.Namespace + "/" + c.WorkloadID + "/" + c.Role, ckpt: spec.CheckpointIntervalSec > 0,
		failAtEnd: failAtEnd, written: -1, handoff: a.cfg.Handoff != nil && a.cfg.Handoff(p),
		service: a.servesUntilDeleted(p),
		gpus:    spec.GPURequest, restartSec: c.RestartOverheadSec, restarts: containerRestarts(p),
	}
	switch remaining, ok := a.checkpoints[st.ckptKey]; {
	case hasProg:
		if err := a.eng.Restore(id, prog.Snapshot); err != nil {
			a.eng.Remove(id)
			return reject(err)
		}
		st.runBase, st.written = prog.RunSec, prog.RemainingSec
	case ok && st.ckpt:
		if err := a.eng.Restore(id, engine.Snapshot{RemainingSec: remaining, CheckpointSec: remaining}); err != nil {
			a.log.Error("checkpoint not restored", "pod", key, "err", err)
		} else {
			st.resumedFrom, st.resumed = remaining, true
		}
	}
	if !hasProg {
		a.resume(st)
	}
	a.podState[key] = st
	if st.gang != "" {
		if a.gangs[st.gang] == nil {
			a.gangs[st.gang] = map[string]struct{}{}
		}
		a.gangs[st.gang][key] = struct{}{}
	}
	return st
}

func (a *Agent) stop(st *podState) {
	if !st.running {
		return
	}
	st.runBase = st.runSec(a.eng.Now())
	st.running = false
	a.started--
	a.eng.Stop(st.id)
}

// forget drops a pod that was deleted (or replaced under the same name). One deleted before it
// finished was evicted or preempted: its workload keeps the checkpoint for the replacement, and
// the energy it burned (LostEnergy), which no completion will report.
func (a *Agent) forget(key string, st *podState) {
	a.stop(st)
	if !st.completing && !st.terminal {
		a.interrupt(st, false)
		a.lose(st)
		a.keepCheckpoint(st)
	}
	st.terminal = true
	a.release(key, st)
	if st.gang == "" || a.gangs[st.gang] == nil {
		// Not (or no longer) held for its gang: gone already or removed now.
		if _, ok := a.podState[key]; ok {
			a.remove(key, st)
		}
		return
	}
	// Evicted gang members leave at once: the rest of the gang must stop progressing.
	if !st.completing {
		a.remove(key, st)
		delete(a.gangs[st.gang], key)
		if len(a.gangs[st.gang]) == 0 {
			delete(a.gangs, st.gang)
		}
	}
}

// keepCheckpoint keeps the workload's checkpoint of a pod that leaves before it finished, for its
// replacement: the least advanced of its role's pods that leave together. The first of them to
// leave replaces the checkpoint they resumed from (theirs are at least as far); the others keep
// the least advanced.
func (a *Agent) keepCheckpoint(st *podState) {
	if !st.ckpt {
		return
	}
	ck := a.eng.Snapshot(st.id).CheckpointSec
	prev, ok := a.checkpoints[st.ckptKey]
	if !ok || ck > prev || (st.resumed && prev == st.resumedFrom) {
		a.checkpoints[st.ckptKey] = ck
	}
}

// lose books the energy of a pod leaving without a completion write, the only report of a pod's
// energy. It must run before the engine removes the pod, which zeroes it. PodEnergy is the whole
// pod's (restored from its own progress annotation when an earlier agent ran it); a replacement
// starts from zero, so evicted attempts and the final one add up without overlap.
func (a *Agent) lose(st *podState) {
	j, busy := a.eng.PodEnergy(st.id), a.eng.BusyGPUSec(st.id)
	if !(j > 0) && !(busy > 0) {
		return
	}
	a.m.lostEnergy.Add(j)
	a.costs.addLost(st.ns+"/"+st.workload, j, busy)
}

// release removes a terminal pod from the engine; gang members stay until every member of the
// gang is terminal, because a finished member still counts as present for the others.
func (a *Agent) release(key string, st *podState) {
	if st.gang == "" {
		a.remove(key, st)
		return
	}
	members := a.gangs[st.gang]
	for k := range members {
		if m := a.podState[k]; m != nil && !m.terminal {
			return
		}
	}
	for k := range members {
		if m := a.podState[k]; m != nil {
			a.remove(k, m)
		}
	}
	delete(a.gangs, st.gang)
}

// finish writes a finished pod's energy, run time and verdict in one patch. For a pod the runner
// follows, the clock is held from here until the runner sees the pod end (or the write fails).
func (a *Agent) finish(f engine.Finished) {
	st := a.podState[f.Key]
	if st == nil {
		return
	}
	runSec := st.runBase + f.AtSec - st.startedAt
	st.running, st.completing, st.runBase = false, true, runSec
	a.started--
	failed := f.Failed || st.failAtEnd
	verdict, result := "true", "succeeded"
	if failed {
		verdict, result = "fail", "failed"
	}
	// A service pod's work is done, but it serves on until its owner deletes it.
	service := st.service && !failed
	if service {
		result = "served"
	}
	snap := a.eng.Snapshot(st.id)
	prog, _ := json.Marshal(Progress{Snapshot: snap, RunSec: runSec, Fraction: 1 - snap.RemainingSec/st.duration})
	wall := a.cfg.Wall.Now()
	ann := map[string]string{
		contract.EnergyJoules: strconv.FormatFloat(f.EnergyJ, 'f', 1, 64),
		contract.RunTraceSec:  strconv.FormatFloat(runSec, 'f', 3, 64),
		// Exact: the runner records the pod's end at this time and checks the clock did not pass it.
		contract.FinishedTraceSec: strconv.FormatFloat(f.AtSec, 'g', -1, 64),
		contract.FinishedAt:       wall.UTC().Format(time.RFC3339Nano),
		contract.Progress:         string(prog),
		contract.Complete:         verdict,
	}
	if a.eng.TimeSliced(st.id) {
		ann[contract.BusyGPUSeconds] = strconv.FormatFloat(f.BusyGPUSec, 'f', 3, 64)
	}
	p := patch{ns: st.ns, name: st.name, typ: types.MergePatchType, complete: true, result: result}
	var err error
	if service {
		delete(ann, contract.Complete)
	}
	if a.cfg.CompleteVia == CompleteViaStatus && !service {
		p.status, p.typ = true, types.StrategicMergePatchType
		p.body, err = a.statusPatch(f.Key, ann, failed, wall)
	} else {
		p.body, err = json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	}
	if err != nil {
		a.log.Error("completion not written", "pod", f.Key, "err", err)
		return
	}
	if st.handoff {
		k := simclock.PodDone(st.uid)
		a.trace.Hold(k)
		// A write that fails for good (the pod is gone) ends the hold: the runner sees the deletion.
		p.failed = func() { a.trace.Release(k) }
	}
	a.completions++
	a.w.complete(f.Key, p)
}

// statusPatch is a strategic merge patch for pods/status that terminates every container the way
// the KWOK completion stage does, and sets the annotations in the same write.
func (a *Agent) statusPatch(key string, ann map[string]string, failed bool, now time.Time) ([]byte, error) {
	pod, err := a.pods.Pods(namespaceOf(key)).Get(nameOf(key))
	if err != nil {
		return nil, fmt.Errorf("status patch %s: %w", key, err)
	}
	ts := metav1.NewTime(now)
	phase, code, reason := corev1.PodSucceeded, int32(0), "Completed"
	if failed {
		phase, code, reason = corev1.PodFailed, 1, "Error"
	}
	statuses := make([]corev1.ContainerStatus, 0, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		started := ts
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == c.Name && cs.State.Running != nil {
				started = cs.State.Running.StartedAt
			}
		}
		statuses = append(statuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: ts}}})
	}
	body := map[string]any{
		"metadata": map[string]any{"annotations": ann},
		"status": map[string]any{
			"phase": phase,
			"conditions": []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: ts, Reason: "PodCompleted"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: ts, Reason: "PodCompleted"},
			},
			"containerStatuses": statuses,
		},
	}
	return json.Marshal(body)
}

// reportGangs emits one GangBlocked event per blocking episode on each running member, and returns
// the trace time at which the next blocked gang is due to be reported (ok false: none).
func (a *Agent) reportGangs() (next float64, ok bool) {
	a.blocked = a.eng.BlockedGangs(a.blocked[:0], 0)
	seen := make(map[string]struct{}, len(a.blocked))
	next = math.Inf(1)
	for _, g := range a.blocked {
		seen[g.ID] = struct{}{}
		if _, done := a.reported[g.ID]; done {
			continue
		}
		if due := g.BlockedSince + a.cfg.GangBlockedAfter; due > a.eng.Now() {
			next = min(next, due)
			continue
		}
		a.reported[g.ID] = struct{}{}
		a.m.gangReports.Inc()
		for key := range a.gangs[g.ID] {
			st := a.podState[key]
			if st == nil || !st.running {
				continue
			}
			if p, err := a.pods.Pods(st.ns).Get(st.name); err == nil {
				a.recorder.Eventf(p, corev1.EventTypeWarning, "GangBlocked",
					"gang %s: %d of %d pods present for %.0f trace seconds; no progress until all run",
					g.ID, g.Present, g.Size, a.eng.Now()-g.BlockedSince)
			}
		}
	}
	for id := range a.reported {
		if _, ok := seen[id]; !ok {
			delete(a.reported, id)
		}
	}
	return next, !math.IsInf(next, 1)
}

// flushProgress queues a progress write for every running pod whose work advanced, after bringing
// the engine to the clock's time.
func (a *Agent) flushProgress() {
	a.sync()
	a.publishNodeMetrics()
	now := a.eng.Now()
	for key, st := range a.podState {
		if st.completing || st.terminal {
			continue
		}
		snap := a.eng.Snapshot(st.id)
		if snap.RemainingSec == st.written {
			continue
		}
		st.written = snap.RemainingSec
		pr := &Progress{Snapshot: snap, RunSec: st.runSec(now), Fraction: 1 - snap.RemainingSec/st.duration}
		a.w.progress(key, patch{ns: st.ns, name: st.name, typ: types.MergePatchType, progress: pr})
	}
}

// publish makes the state after a sync visible to other goroutines: Stats, Snapshot and the
// Prometheus metrics.
func (a *Agent) publish() {
	s := a.eng.Stats()
	a.m.progressing.Set(float64(s.Progressing))
	a.m.running.Set(float64(s.Running))
	a.m.gangBlocked.Set(float64(s.GangBlocked))
	a.m.traceSec.Set(a.eng.Now())
	a.pub.mu.Lock()
	defer a.pub.mu.Unlock()
	a.pub.stats = Stats{TraceSec: a.eng.Now(), Ticks: a.ticks, Nodes: len(a.nodeState), Tracked: len(a.podState), Started: a.started,
		Running: s.Running, Progressing: s.Progressing, GangBlocked: s.GangBlocked, Completions: a.completions, CapChanges: a.capChanges}
	for name, st := range a.nodeState {
		for int(st.id) >= len(a.pub.nodeNames) {
			a.pub.nodeNames, a.pub.nodePower = append(a.pub.nodeNames, ""), append(a.pub.nodePower, 0)
		}
		a.pub.nodeNames[st.id] = name
		a.pub.nodePower[st.id] = a.eng.NodePower(st.id)
	}
}

// publishNodeMetrics sets the node power gauges and energy counters of /metrics, on the progress
// flush: a gauge per node on every sync would cost more than the sync on a large cluster.
func (a *Agent) publishNodeMetrics() {
	for name, st := range a.nodeState {
		e := a.eng.NodeEnergy(st.id)
		a.m.nodePower.WithLabelValues(name).Set(a.eng.NodePower(st.id))
		if d := e - st.lastEnergy; d > 0 {
			a.m.nodeEnergy.WithLabelValues(name).Add(d)
		}
		st.lastEnergy = e
	}
}

func namespaceOf(key string) string {
	ns, _, _ := cache.SplitMetaNamespaceKey(key)
	return ns
}

func nameOf(key string) string {
	_, n, _ := cache.SplitMetaNamespaceKey(key)
	return n
}
