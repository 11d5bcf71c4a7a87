package localcluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kschedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/image"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/realnode"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// Options configure Up.
type Options struct {
	Root     string          // state root; StateRoot() when empty
	Name     string          // cluster name; DefaultName when empty
	BinDir   string          // where the binaries are (tools.BinDir resolves the default)
	PortBase int             // first port of the cluster's block; remembered from the last up, else DefaultPortBase
	Go       string          // go command used to locate manifest modules; "go" when empty
	Objects  []client.Object // nodes, flavors and queues to apply (e.g. from a cluster spec); nil: cluster.DefaultNodes(4, 8)
	Timeout  time.Duration   // per-component readiness deadline; 2 minutes when zero
	Out      io.Writer       // progress lines
	// Daemon runs the supervisor as its own process; DefaultDaemon when nil, and in this process
	// when both are nil (see DefaultDaemon).
	Daemon Daemon
	// KueueConfig holds top-level fields of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)
	// set on top of the local defaults, e.g. "fairSharing" or "waitForPodsReady", so experiment
	// variants can differ in Kueue settings (nil: the local defaults alone, and Kueue's own for
	// the rest: v0.19 then runs waitForPodsReady with its wall-time defaults, which a replay
	// gives in trace time instead, see experiment.KueueConfig.WithKueueDefaults). featureGates are
	// added to the local cluster's. A Kueue running with another configuration is restarted (it
	// reads it only at start). Fields the local cluster needs (webhook, health, metrics,
	// namespace, internalCertManagement, leaderElection) cannot be overridden.
	KueueConfig map[string]any
	// Bare starts the control plane and operators as a user's own cluster (kind + KWOK + Kueue)
	// is before "cluster install": KWOK's Stage CRD but no stages, no cluster objects or
	// nodes (Objects is ignored), Kueue's configuration also published as the ConfigMap
	// kueue-system/kueue-manager-config as Kueue's manifests do, and kube-controller-manager with
	// upstream's 1 s Job sync batch period.
	Bare bool
	// Scheduler is the kube-scheduler configuration (render/cluster's Spec.KubeSchedulerConfiguration);
	// the cluster sets how the scheduler reaches the API server, leader election and pod backoff.
	// A scheduler running with another configuration is restarted (it reads it only at start);
	// nil keeps the one the cluster has, or upstream's defaults on a new cluster.
	Scheduler *kschedv1.KubeSchedulerConfiguration
	// RealNode gives the cluster one real node (a kubelet with containerd, see realnode.go)
	// beside its KWOK nodes, or takes it away; nil keeps what the cluster has. A running cluster
	// changes only through `cluster down`: the API server is configured for the node.
	RealNode *RealNodeOptions
	// NoRealNode takes a stopped cluster's real node away.
	NoRealNode bool
}

// Cluster is a running local cluster.
type Cluster struct {
	State  *State
	Config *rest.Config
	// Started lists the components this Up started (empty: everything was running already).
	Started []string
}

// Up brings the cluster up, starting only the components that are not already running and
// healthy; with everything running it only reports health.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	start := time.Now()
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	s, err := prepare(o)
	if err != nil {
		return nil, err
	}
	if s.RealNode {
		if err := realnode.CheckRoot(); err != nil {
			return nil, err
		}
	}
	bins, err := tools.Locate(s.BinDir, tools.Pinned())
	if err != nil {
		return nil, err
	}
	if err := addStandIns(bins); err != nil {
		return nil, err
	}
	p, err := ensurePKI(s.path("pki"))
	if err != nil {
		return nil, err
	}
	if err := s.writeKubeconfig(p); err != nil {
		return nil, err
	}
	specs, err := s.specs(bins, p)
	if err != nil {
		return nil, err
	}
	// Check every port of the components that are not running before starting anything.
	for _, name := range Components() {
		sp := specs[name]
		if _, ok := s.running(name, sp.bin); ok {
			continue
		}
		for _, port := range sp.ports {
			if err := PortFree(port); err != nil {
				return nil, fmt.Errorf("%s: port %d on 127.0.0.1 is taken (%v); pick another block with --port-base", name, port, err)
			}
		}
	}
	if err := s.save(); err != nil {
		return nil, err
	}
	cl := &Cluster{State: s}
	fmt.Fprintf(out, "cluster %s (state %s)\n", s.Name, s.Dir)
	u := &upper{s: s, specs: specs, out: out, timeout: o.Timeout, configs: map[string]string{}}
	// The scheduler's configuration file is written (and checked by the real binary) before the
	// supervisor is asked for the scheduler: every start of it, a restart after a crash too,
	// reads that file, and the supervisor restarts a scheduler that started with another one.
	digest, err := u.applySchedulerConfig(ctx, o.Scheduler)
	if err != nil {
		return nil, err
	}
	u.configs[Scheduler] = digest
	// The supervisor owns the component processes: Up asks it for each one in turn and awaits
	// its readiness, with the cluster objects each one needs applied in between.
	if err := s.ensureSupervisor(ctx, specs, o.Daemon); err != nil {
		return nil, err
	}
	for _, name := range []string{Etcd, APIServer, ControllerManager, Scheduler} {
		// In kind mode kube-scheduler is a static pod of the real node.
		if name == Scheduler && s.kindMode() {
			continue
		}
		if err := u.ensure(ctx, name); err != nil {
			return nil, err
		}
	}
	cfg, err := cluster.RESTConfig(s.Kubeconfig())
	if err != nil {
		return nil, err
	}
	c, err := cluster.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	m, err := loadManifests(ctx, o.Go, s, p)
	if err != nil {
		return nil, err
	}

	// KWOK: the Stage CRD and stages exist before the controller reads them; the marker saying
	// every node here is a KWOK node exists before any node is applied.
	if err := u.step("KWOK stages", func() error {
		if err := cluster.ApplyObjects(ctx, cfg, []client.Object{cluster.LocalMarker()}); err != nil {
			return err
		}
		if err := cluster.ApplyCRDs(ctx, c, m.stageCRD); err != nil {
			return err
		}
		if err := cluster.WaitEstablished(ctx, c, names(m.stageCRD), o.Timeout); err != nil {
			return err
		}
		if o.Bare {
			return nil
		}
		return cluster.ApplyUnstructured(ctx, c, m.stages)
	}); err != nil {
		return nil, err
	}
	if err := u.ensure(ctx, KWOK); err != nil {
		return nil, err
	}

	// Every job CRD goes in before Kueue starts: Kueue finds late CRDs only after minutes of backoff.
	if err := u.step(fmt.Sprintf("%d job CRDs", len(m.jobCRDs)), func() error {
		if err := cluster.ApplyCRDs(ctx, c, m.jobCRDs); err != nil {
			return err
		}
		return cluster.WaitEstablished(ctx, c, names(m.jobCRDs), o.Timeout)
	}); err != nil {
		return nil, err
	}

	// In kind mode the real node comes before Kueue: Kueue is its pod, scheduled by its static
	// kube-scheduler.
	if s.kindMode() {
		if err := u.realNodeUp(ctx, o.RealNode, p); err != nil {
			return nil, err
		}
	}
	// Kueue with internal cert management pre-seeded: its rotator accepts the Secret as-is and waits
	// for its CA in the webhook configurations and conversion CRDs, so those exist before it starts.
	if err := u.step("Kueue certs and webhooks", func() error {
		if err := writeCertDir(s.path("certs", "kueue"), p.Kueue, p.KueueCA); err != nil {
			return err
		}
		kcfg, err := s.kueueConfig(o.KueueConfig)
		if s.kindMode() {
			kcfg, err = s.podKueueConfig(o.KueueConfig)
		}
		if err != nil {
			return err
		}
		data, err := yaml.Marshal(kcfg)
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.path("config", kueueConfigFile), data, 0o644); err != nil {
			return err
		}
		if st, err := os.Stat(s.KueueClockPath()); err != nil || st.Size() != kueueclock.Size {
			if err := kueueclock.Create(s.KueueClockPath()); err != nil {
				return err
			}
		}
		// Kueue reads its configuration only when it starts: the supervisor restarts a Kueue that
		// runs with another one, as it does kube-scheduler.
		u.configs[Kueue] = configDigest(data)
		objs := []client.Object{namespace(cluster.KueueNamespace), seededSecret(cluster.KueueNamespace, "kueue-webhook-server-cert", p.KueueCA, p.Kueue)}
		if o.Bare {
			cm, err := kueueConfigMap(kcfg)
			if err != nil {
				return err
			}
			objs = append(objs, cm)
		}
		if s.kindMode() {
			objs = append(objs, kueueDeployment(image.ComponentRegistry+"/kueue:"+tools.KueueVersion)...)
		}
		if err := cluster.ApplyObjects(ctx, cfg, objs); err != nil {
			return err
		}
		return cluster.ApplyUnstructured(ctx, c, m.kueueHooks)
	}); err != nil {
		return nil, err
	}
	if s.kindMode() {
		if err := u.step("Kueue's Deployment ready", func() error { return awaitKueuePod(ctx, c, o.Timeout) }); err != nil {
			return nil, err
		}
	} else if err := u.ensure(ctx, Kueue); err != nil {
		return nil, err
	}

	for _, op := range operators() {
		if err := u.operator(ctx, cfg, c, m, p, op); err != nil {
			return nil, err
		}
	}
	if o.Bare {
		if !s.kindMode() {
			if err := u.realNodeUp(ctx, o.RealNode, p); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(out, "cluster %s up (bare) in %s\n", s.Name, time.Since(start).Round(100*time.Millisecond))
		cl.Config, cl.Started = cfg, u.started
		return cl, nil
	}
	// Flavors and queues go through Kueue's webhooks, so the cluster objects come last.
	// A spec's objects replace those of another spec on a cluster that was up already
	// (cluster.ReplaceObjects prunes). Without a spec Up only makes sure there are nodes: a `cluster up`
	// of a running cluster must never delete the queues a user made on it.
	objs, prune := o.Objects, true
	if objs == nil {
		objs, prune = cluster.DefaultNodes(4, 8), false
	}
	if err := u.step(fmt.Sprintf("%d cluster objects", len(objs)), func() error { return cluster.ReplaceObjects(ctx, cfg, objs, prune, out) }); err != nil {
		return nil, err
	}
	if err := u.step("KWOK nodes Ready", func() error { return u.awaitNodes(ctx, c, o.Timeout) }); err != nil {
		// KWOK makes the nodes Ready and the node controller lifts their not-ready taints: their
		// logs say which of the two did not happen.
		for _, name := range []string{KWOK, ControllerManager} {
			err = fmt.Errorf("%w%s", err, lastLines(s.logFile(name), 15))
		}
		return nil, err
	}
	if err := u.realNodeUp(ctx, o.RealNode, p); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "cluster %s up in %s\n", s.Name, time.Since(start).Round(100*time.Millisecond))
	cl.Config, cl.Started = cfg, u.started
	return cl, nil
}

// prepare loads or creates the state dir and settles ports and bin dir.
func prepare(o Options) (*State, error) {
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	s, _, err := Load(o.Root, name)
	if err != nil {
		return nil, err
	}
	if o.PortBase != 0 {
		s.PortBase = o.PortBase
	}
	if s.PortBase == 0 {
		s.PortBase = PortBaseFor(name)
	}
	if last := 65535 - NumPorts(); s.PortBase < 1024 || s.PortBase > last {
		return nil, fmt.Errorf("port base %d: want 1024..%d (a cluster uses %d consecutive ports)", s.PortBase, last, NumPorts())
	}
	s.Ports = PortsFrom(s.PortBase)
	if o.BinDir != "" {
		s.BinDir = o.BinDir
	}
	// Kept in cluster.json: the supervisor daemon and every restart derive the components from it.
	s.Bare = o.Bare
	if want := o.RealNode != nil || (s.RealNode && !o.NoRealNode); want != s.RealNode {
		if h, err := ReadHealth(s.Dir); err == nil && h.Supervisor.Alive {
			have := map[bool]string{true: "with", false: "without"}[s.RealNode]
			return nil, fmt.Errorf("cluster %s is running %s a real node: `kueuelab cluster down --name %s` first", name, have, name)
		}
		s.RealNode = want
	}
	if s.RealNode {
		if err := s.checkNodeIndex(filepath.Dir(s.Dir)); err != nil {
			return nil, err
		}
	}
	if s.BinDir == "" {
		d, err := tools.BinDir("", tools.Pinned())
		if err != nil {
			return nil, err
		}
		s.BinDir = d
	}
	for _, d := range []string{"run", "logs", "data", "config", "certs"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// upper runs the start sequence and prints one line per step.
type upper struct {
	s       *State
	specs   map[string]spec
	out     io.Writer
	timeout time.Duration
	started []string
	// configs are the digests of the configuration files components read only when they start
	// (kube-scheduler, Kueue): the supervisor restarts one that runs with another configuration.
	configs map[string]string
}

// kwokStallWait is how long the nodes get to become Ready before KWOK is restarted (on an idle
// machine they are Ready in about a second).
const kwokStallWait = time.Minute

// awaitNodes waits until the KWOK nodes are Ready and schedulable. KWOK v0.7.0 on a loaded
// machine has been seen never to start its stage controllers (its log ends at "Watch nodes"), and
// once to run its lease controller for minutes with no node given a Ready condition (its log's
// start out of reach by then): no node ever became Ready. A minute without a Ready node is KWOK
// not doing its work whatever its log says, so it is restarted once, as a kubelet-less cluster's
// operator would, and the wait goes on.
func (u *upper) awaitNodes(ctx context.Context, c client.Client, timeout time.Duration) error {
	first := min(timeout, kwokStallWait)
	_, err := cluster.WaitNodesReady(ctx, c, first)
	if err == nil || ctx.Err() != nil || first >= timeout || anyNodeReady(ctx, c) {
		if err != nil && first < timeout {
			_, err = cluster.WaitNodesReady(ctx, c, timeout-first)
		}
		return err
	}
	why := "its stage controllers ran"
	if kwokStalled(LogTail(u.s.logFile(KWOK), 2000)) {
		why = "its log shows no stage controller started"
	}
	fmt.Fprintf(u.out, "  KWOK made no node Ready in %s (%s): restarting it\n", first, why)
	if _, err := u.s.stop(ctx, KWOK, u.specs[KWOK].bin, 10*time.Second); err != nil {
		return err
	}
	if err := u.ensure(ctx, KWOK); err != nil {
		return err
	}
	_, err = cluster.WaitNodesReady(ctx, c, max(timeout-first, kwokStallWait))
	return err
}

// anyNodeReady says whether some node has condition Ready True (a KWOK that made one Ready is
// working; the rest are waited for).
func anyNodeReady(ctx context.Context, c client.Client) bool {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return false
	}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

// kwokStalled says whether KWOK's log, since its last start, shows no stage controller started.
func kwokStalled(log string) bool {
	if i := strings.LastIndex(log, "kueuelab: start:"); i >= 0 {
		log = log[i:]
	}
	return strings.Contains(log, `"msg":"Watch nodes"`) && !strings.Contains(log, `"msg":"Start stage controller"`)
}

// ensure asks the supervisor for name and waits until it is ready.
func (u *upper) ensure(ctx context.Context, name string) error {
	t0 := time.Now()
	sp := u.specs[name]
	pidBefore, _ := u.s.running(name, sp.bin)
	// Written on every Up, not only before a first start: the supervisor restarts the component
	// from these files, and a crash-looping one gets its good config back.
	for f, v := range sp.files {
		if err := u.s.writeConfig(f, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	config := u.configs[name]
	// A component that runs with another configuration is restarted for it: that is not
	// starting the cluster (Started stays empty for a cluster that was up).
	reconfigured := false
	if h, err := ReadHealth(u.s.Dir); err == nil && config != "" && pidBefore != 0 {
		c, _ := h.Component(name)
		reconfigured = c.Config != config
	}
	epoch, err := u.s.enableConfig(name, config)
	if err != nil {
		return err
	}
	c, err := u.s.awaitReady(ctx, name, epoch, u.timeout)
	if err != nil {
		return err
	}
	verb := "running"
	if c.PID != pidBefore {
		verb = "started"
		if reconfigured {
			verb = "restarted with its new configuration"
		} else {
			u.started = append(u.started, name)
		}
	}
	restarts := ""
	if c.Restarts > 0 {
		restarts = fmt.Sprintf(", restarts: %d", c.Restarts)
	}
	fmt.Fprintf(u.out, "  %-24s %s, healthy (pid %d, %s%s)\n", name, verb, c.PID, time.Since(t0).Round(10*time.Millisecond), restarts)
	return nil
}

// operator prepares, starts and completes one operator of the registry: its namespace, serving
// certificate (seeded into its rotator's Secret, with its webhooks registered first, when it has
// a rotator), stand-in, process, then its webhooks and install objects once healthy. A stale
// lease is deleted before every start by the supervisor (preStartHooks).
func (u *upper) operator(ctx context.Context, cfg *rest.Config, c client.Client, m *manifests, p *pki, op *render.Operator) error {
	w := op.Webhooks
	rotator := w != nil && w.RotatorSecret != ""
	if err := u.step(op.Name+" setup", func() error {
		var objs []client.Object
		if op.Namespace != "" {
			objs = append(objs, namespace(op.Namespace))
		}
		if w != nil {
			serving, ca := p.Webhook, p.CA
			if rotator {
				pair := p.rotators[rotatorCertName(op)]
				serving, ca = pair.Serving, pair.CA
				objs = append(objs, seededSecret(op.Namespace, w.RotatorSecret, pair.CA, pair.Serving))
			}
			if err := writeCertDir(u.s.path("certs", op.Name), serving, ca); err != nil {
				return err
			}
			if w.HardcodedCertDir != "" {
				// The mount point of the private bind mount; it stays empty on the host.
				if err := os.MkdirAll(w.HardcodedCertDir, 0o755); err != nil {
					return err
				}
				// Without unshare (the runner image) the operator reads the hard-coded dir
				// itself: this cluster's certificates go there, one cluster at a time.
				if sharedCertDir() {
					if err := u.s.claimCertDir(w.HardcodedCertDir, op.Name, u.specs[op.Name].bin); err != nil {
						return err
					}
					if err := writeCertDir(w.HardcodedCertDir, serving, ca); err != nil {
						return err
					}
				}
			}
		}
		if err := cluster.ApplyObjects(ctx, cfg, objs); err != nil {
			return err
		}
		if rotator {
			return cluster.ApplyUnstructured(ctx, c, m.opHooks[op.Name])
		}
		return nil
	}); err != nil {
		return err
	}
	if op.StandIn != "" {
		if err := u.ensure(ctx, op.StandIn); err != nil {
			return err
		}
	}
	if err := u.ensure(ctx, op.Name); err != nil {
		return err
	}
	if hooks := m.opHooks[op.Name]; len(hooks) > 0 && !rotator {
		if err := u.step(op.Name+" webhooks", func() error { return cluster.ApplyUnstructured(ctx, c, hooks) }); err != nil {
			return err
		}
	}
	if objs := m.opObjects[op.Name]; len(objs) > 0 {
		if err := u.step(fmt.Sprintf("%s: %d install objects", op.Name, len(objs)), func() error { return cluster.ApplyUnstructured(ctx, c, objs) }); err != nil {
			return err
		}
	}
	return nil
}

func (u *upper) step(what string, f func() error) error {
	t0 := time.Now()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(u.out, "  %-24s applied (%s)\n", what, time.Since(t0).Round(10*time.Millisecond))
	return nil
}

func (s *State) writeConfig(name string, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(s.path("config", name), b, 0o644)
}

// kueueConfigFile is the local Kueue's configuration, in the state dir's config/.
const kueueConfigFile = "kueue.yaml"

// KueueClockPath is the file through which a replay shares its trace clock with the local Kueue
// (runtime/kueueclock).
func (s *State) KueueClockPath() string { return s.path("kueue-trace-clock") }

// kueueLocalKeys are the Kueue Configuration fields the local cluster depends on.
var kueueLocalKeys = map[string]bool{"apiVersion": true, "kind": true, "namespace": true, "health": true,
	"metrics": true, "webhook": true, "leaderElection": true, "internalCertManagement": true}

func (s *State) kueueConfig(extra map[string]any) (map[string]any, error) {
	cfg := s.baseKueueConfig()
	for k, v := range extra {
		if kueueLocalKeys[k] {
			return nil, fmt.Errorf("kueue config: field %q is set by the local cluster and cannot be overridden", k)
		}
		if k == "featureGates" {
			// Added to the local cluster's gates, which stay (the visibility server stays off).
			gates, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("kueue config: featureGates is %T, want a map of gate names to booleans", v)
			}
			merged := maps.Clone(cfg[k].(map[string]any))
			maps.Copy(merged, gates)
			v = merged
		}
		cfg[k] = v
	}
	return cfg, nil
}

func (s *State) baseKueueConfig() map[string]any {
	qps, burst := KueueClientRate()
	return map[string]any{
		"apiVersion": "config.kueue.x-k8s.io/v1beta2",
		"kind":       "Configuration",
		"namespace":  cluster.KueueNamespace,
		"health":     map[string]any{"healthProbeBindAddress": hostPort(s.Ports.KueueHealth)},
		"metrics":    map[string]any{"bindAddress": hostPort(s.Ports.KueueMetrics)},
		"webhook":    map[string]any{"host": "127.0.0.1", "port": s.Ports.KueueWebhook, "certDir": s.path("certs", "kueue")},
		"leaderElection": map[string]any{
			"leaderElect": false,
		},
		"internalCertManagement": map[string]any{
			"enable": true, "webhookServiceName": "kueue-webhook-service", "webhookSecretName": "kueue-webhook-server-cert",
		},
		// The visibility API server needs an in-cluster APIService; nothing here uses it.
		"featureGates":     map[string]any{"VisibilityOnDemand": false},
		"clientConnection": map[string]any{"qps": qps, "burst": burst},
		"integrations":     map[string]any{"frameworks": kueueFrameworks()},
		// Without this every Kueue controller gets controller-runtime's single worker: a replayed
		// trace then waits tens of seconds for Workload creation and Finished.
		"controller": map[string]any{"groupKindConcurrency": groupKindConcurrency()},
	}
}

// KueueClientRate is the API client rate the local cluster gives Kueue (its clientConnection): Kueue
// v0.19's own (300/s, burst 500, in its code and its manifests alike), not the rate the other
// components get, because the rate at which Kueue writes admissions and evictions is part of the
// Kueue a replay measures.
func KueueClientRate() (qps float32, burst int32) { return kueuewl.DefaultClientRate() }

// groupKindConcurrency is Kueue v0.19's shipped controller_manager_config.yaml's, plus 5 workers
// for the kind of every enabled job integration (it lists 5 for Job.batch).
func groupKindConcurrency() map[string]any {
	out := map[string]any{
		"Pod": 5, "Workload.kueue.x-k8s.io": 10,
		"LocalQueue.kueue.x-k8s.io": 5, "Cohort.kueue.x-k8s.io": 1,
		"ClusterQueue.kueue.x-k8s.io": 5, "ResourceFlavor.kueue.x-k8s.io": 1,
	}
	for _, k := range render.DefaultRegistry().KueueIntegrations() {
		out[k.Kind.GroupKind().String()] = 5
	}
	return out
}

// writeKubeconfig writes the admin kubeconfig with the certificates embedded (0600).
func (s *State) writeKubeconfig(p *pki) error {
	ctxName := "kueuelab-" + s.Name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[ctxName] = &clientcmdapi.Cluster{Server: loopURL("https", s.Ports.APIServer, ""), CertificateAuthorityData: p.CA.CertPEM}
	cfg.AuthInfos[ctxName] = &clientcmdapi.AuthInfo{ClientCertificateData: p.Admin.CertPEM, ClientKeyData: p.Admin.KeyPEM}
	cfg.Contexts[ctxName] = &clientcmdapi.Context{Cluster: ctxName, AuthInfo: ctxName, Namespace: "default"}
	cfg.CurrentContext = ctxName
	if err := clientcmd.WriteToFile(*cfg, s.Kubeconfig()); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return os.Chmod(filepath.Clean(s.Kubeconfig()), 0o600)
}

// kueueConfigMap is the ConfigMap Kueue's release manifests hold its Configuration in.
func kueueConfigMap(cfg map[string]any) (*corev1.ConfigMap, error) {
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.KueueNamespace, Name: "kueue-manager-config"},
		Data:       map[string]string{cluster.KueueConfigKey: string(b)}}, nil
}

func names(objs []*unstructured.Unstructured) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.GetName()
	}
	return out
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}
