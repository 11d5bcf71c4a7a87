package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kschedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

// Options configure Up.
type Options struct {
	Root     string          // state root; StateRoot() when empty
	Name     string          // cluster name; DefaultName when empty
	BinDir   string          // where the binaries are (tools.BinDir resolves the default)
	PortBase int             // first port of the cluster's block; remembered from the last up, else DefaultPortBase
	Go       string          // go command used to locate manifest modules; "go" when empty
	Objects  []client.Object // nodes, flavors and queues to apply (e.g. from a cluster spec); nil: DefaultNodes(4, 8)
	Timeout  time.Duration   // per-component readiness deadline; 2 minutes when zero
	Out      io.Writer       // progress lines
	// Daemon runs the supervisor as its own process; DefaultDaemon when nil, and in this process
	// when both are nil (see DefaultDaemon).
	Daemon Daemon
	// KueueConfig holds top-level fields of Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)
	// set on top of the local defaults, e.g. "fairSharing" or "waitForPodsReady", so experiment
	// variants can differ in Kueue settings. They take effect when Kueue starts: Up does not
	// restart a Kueue that is already running. Fields the local cluster needs (webhook, health,
	// metrics, namespace, internalCertManagement, leaderElection) cannot be overridden.
	KueueConfig map[string]any
	// Scheduler is the kube-scheduler configuration (render/cluster's Spec.KubeSchedulerConfiguration);
	// the cluster sets how the scheduler reaches the API server, leader election and pod backoff.
	// A scheduler running with another configuration is restarted (it reads it only at start);
	// nil keeps the one the cluster has, or upstream's defaults on a new cluster.
	Scheduler *kschedv1.KubeSchedulerConfiguration
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
	bins, err := tools.Locate(s.BinDir, tools.Pinned())
	if err != nil {
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
		if err := u.ensure(ctx, name); err != nil {
			return nil, err
		}
	}
	cfg, err := RESTConfig(s.Kubeconfig())
	if err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := newClient(cfg, scheme)
	if err != nil {
		return nil, err
	}
	m, err := loadManifests(ctx, o.Go, s, p)
	if err != nil {
		return nil, err
	}

	// KWOK: the Stage CRD and stages exist before the controller reads them.
	if err := u.step("KWOK stages", func() error {
		if err := applyCRDs(ctx, c, m.stageCRD); err != nil {
			return err
		}
		if err := waitEstablished(ctx, c, names(m.stageCRD), o.Timeout); err != nil {
			return err
		}
		return applyUnstructured(ctx, c, m.stages)
	}); err != nil {
		return nil, err
	}
	if err := u.ensure(ctx, KWOK); err != nil {
		return nil, err
	}

	// Every job CRD goes in before Kueue starts: Kueue finds late CRDs only after minutes of backoff.
	if err := u.step(fmt.Sprintf("%d job CRDs", len(m.jobCRDs)), func() error {
		if err := applyCRDs(ctx, c, m.jobCRDs); err != nil {
			return err
		}
		return waitEstablished(ctx, c, names(m.jobCRDs), o.Timeout)
	}); err != nil {
		return nil, err
	}

	// Kueue with internal cert management pre-seeded: its rotator accepts the Secret as-is and waits
	// for its CA in the webhook configurations and conversion CRDs, so those exist before it starts.
	if err := u.step("Kueue certs and webhooks", func() error {
		if err := writeCertDir(s.path("certs", "kueue"), p.Kueue, p.KueueCA); err != nil {
			return err
		}
		kcfg, err := s.kueueConfig(o.KueueConfig)
		if err != nil {
			return err
		}
		if err := s.writeConfig("kueue.yaml", kcfg); err != nil {
			return err
		}
		if err := ApplyObjects(ctx, cfg, []client.Object{namespace(kueueNamespace),
			seededSecret(kueueNamespace, "kueue-webhook-server-cert", p.KueueCA, p.Kueue)}); err != nil {
			return err
		}
		return applyUnstructured(ctx, c, m.kueueHooks)
	}); err != nil {
		return nil, err
	}
	if err := u.ensure(ctx, Kueue); err != nil {
		return nil, err
	}

	if err := u.step("JobSet config", func() error {
		if err := writeCertDir(s.path("certs", "webhook"), p.Webhook, p.CA); err != nil {
			return err
		}
		return s.writeConfig("jobset.yaml", s.jobsetConfig())
	}); err != nil {
		return nil, err
	}
	if err := u.ensure(ctx, JobSet); err != nil {
		return nil, err
	}
	if err := u.step("JobSet webhooks", func() error { return applyUnstructured(ctx, c, m.jobsetHook) }); err != nil {
		return nil, err
	}

	// training-operator's rotator cannot be disabled: it needs its Secret, and its serving cert in
	// the hard-coded cert dir (a private bind mount of the state dir's copy).
	if err := u.step("training-operator certs and webhook", func() error {
		if err := writeCertDir(s.path("certs", "training"), p.Train, p.TrainCA); err != nil {
			return err
		}
		if err := os.MkdirAll(trainingCertDir, 0o755); err != nil {
			return err
		}
		if err := ApplyObjects(ctx, cfg, []client.Object{namespace(trainingNamespace),
			seededSecret(trainingNamespace, "training-operator-webhook-cert", p.TrainCA, p.Train)}); err != nil {
			return err
		}
		return applyUnstructured(ctx, c, m.trainHook)
	}); err != nil {
		return nil, err
	}
	if err := u.ensure(ctx, TrainingOperator); err != nil {
		return nil, err
	}
	// mpi-operator's leader election is always on: its lease namespace must exist (a stale lease
	// is deleted before every start, see preStartHooks).
	if err := u.step("mpi-operator namespace", func() error {
		return ApplyObjects(ctx, cfg, []client.Object{namespace(mpiNamespace)})
	}); err != nil {
		return nil, err
	}
	if err := u.ensure(ctx, MPIOperator); err != nil {
		return nil, err
	}
	// Flavors and queues go through Kueue's webhooks, so the cluster objects come last.
	// A spec's objects replace those of another spec on a cluster that was up already
	// (ReplaceObjects prunes). Without a spec Up only makes sure there are nodes: a `cluster up`
	// of a running cluster must never delete the queues a user made on it.
	objs, prune := o.Objects, true
	if objs == nil {
		objs, prune = DefaultNodes(4, 8), false
	}
	if err := u.step(fmt.Sprintf("%d cluster objects", len(objs)), func() error { return ReplaceObjects(ctx, cfg, objs, prune, out) }); err != nil {
		return nil, err
	}
	if err := u.step("KWOK nodes Ready", func() error { _, err := waitNodesReady(ctx, c, o.Timeout); return err }); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "cluster %s up in %s\n", s.Name, time.Since(start).Round(100*time.Millisecond))
	cl.Config, cl.Started = cfg, u.started
	return cl, nil
}

// prepare loads or creates the state dir and settles ports and bin dir.
func prepare(o Options) (*State, error) {
	root := o.Root
	if root == "" {
		r, err := StateRoot()
		if err != nil {
			return nil, err
		}
		root = r
	}
	name := o.Name
	if name == "" {
		name = DefaultName
	}
	s, _, err := Load(root, name)
	if err != nil {
		return nil, err
	}
	if o.PortBase != 0 {
		s.PortBase = o.PortBase
	}
	if s.PortBase == 0 {
		s.PortBase = PortBaseFor(name)
	}
	if s.PortBase < 1024 || s.PortBase > 65535-20 {
		return nil, fmt.Errorf("port base %d: want 1024..65515", s.PortBase)
	}
	s.Ports = PortsFrom(s.PortBase)
	if o.BinDir != "" {
		s.BinDir = o.BinDir
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
	// (kube-scheduler): the supervisor restarts one that runs with another configuration.
	configs map[string]string
}

// ensure asks the supervisor for name and waits until it is ready.
func (u *upper) ensure(ctx context.Context, name string) error {
	t0 := time.Now()
	pidBefore, _ := u.s.running(name, u.specs[name].bin)
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

// kueueLocalKeys are the Kueue Configuration fields the local cluster depends on.
var kueueLocalKeys = map[string]bool{"apiVersion": true, "kind": true, "namespace": true, "health": true,
	"metrics": true, "webhook": true, "leaderElection": true, "internalCertManagement": true}

func (s *State) kueueConfig(extra map[string]any) (map[string]any, error) {
	cfg := s.baseKueueConfig()
	for k, v := range extra {
		if kueueLocalKeys[k] {
			return nil, fmt.Errorf("kueue config: field %q is set by the local cluster and cannot be overridden", k)
		}
		cfg[k] = v
	}
	return cfg, nil
}

func (s *State) baseKueueConfig() map[string]any {
	return map[string]any{
		"apiVersion": "config.kueue.x-k8s.io/v1beta2",
		"kind":       "Configuration",
		"namespace":  kueueNamespace,
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
		"clientConnection": map[string]any{"qps": clientQPS, "burst": clientQPS},
		"integrations":     map[string]any{"frameworks": kueueFrameworks},
		// Without this every Kueue controller gets controller-runtime's single worker: a replayed
		// trace then waits tens of seconds for Workload creation and Finished. These are the
		// values of Kueue's shipped controller_manager_config.yaml, plus the job integrations.
		"controller": map[string]any{"groupKindConcurrency": map[string]any{
			"Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5,
			"JobSet.jobset.x-k8s.io": 5, "PyTorchJob.kubeflow.org": 5, "TFJob.kubeflow.org": 5,
			"MPIJob.kubeflow.org": 5, "TrainJob.trainer.kubeflow.org": 5,
			"LocalQueue.kueue.x-k8s.io": 1, "Cohort.kueue.x-k8s.io": 1,
			"ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1,
		}},
	}
}

func (s *State) jobsetConfig() map[string]any {
	dir := s.path("certs", "webhook")
	return map[string]any{
		"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
		"kind":                   "Configuration",
		"leaderElection":         map[string]any{"leaderElect": false},
		"internalCertManagement": map[string]any{"enable": false},
		"webhook":                map[string]any{"host": "127.0.0.1", "port": s.Ports.JobSetWebhook, "certDir": dir},
		"metrics":                map[string]any{"bindAddress": hostPort(s.Ports.JobSetMetrics), "certDir": dir},
		"health":                 map[string]any{"healthProbeBindAddress": hostPort(s.Ports.JobSetHealth)},
		"clientConnection":       map[string]any{"qps": clientQPS, "burst": clientQPS},
	}
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
