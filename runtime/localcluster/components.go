package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kueuelab/kueuelab/render"
	"github.com/kueuelab/kueuelab/runtime/cluster"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/tools"
)

// Component names of the infrastructure, in start order; the operators of render's registry
// (and their stand-ins) follow. `down` stops them in reverse.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	KWOK              = "kwok"
	Kueue             = "kueue"
)

// operators are the operators of every registered kind, in start order.
func operators() []*render.Operator { return render.DefaultRegistry().Operators() }

// Components lists every component in start order: the infrastructure, then each operator,
// preceded by its stand-in.
func Components() []string {
	out := []string{Etcd, APIServer, ControllerManager, Scheduler, KWOK, Kueue}
	for _, op := range operators() {
		if op.StandIn != "" {
			out = append(out, op.StandIn)
		}
		out = append(out, op.Name)
	}
	return out
}

// clientQPS is the request rate given to every controller: with client defaults each stage is
// capped by a component's rate limit rather than by CPU (measured in the local-control-plane notes).
const clientQPS = 500

// jobSyncBatchPeriod replaces the Job controller's 1 s pod-event batch period (see
// tools.JobSyncBatchPeriodEnv): measured on an idle cluster, a Job's last pod finishing to the Job
// Complete took 959 ms at p50 with upstream's second, and it is the one step of a Job's life that
// a replay at speedup 1000 turns into a quarter of an hour of held quota.
const jobSyncBatchPeriod = 10 * time.Millisecond

// jobPodFailureBackOff replaces the Job controller's 10 s pod-failure backoff (see
// tools.JobPodFailureBackOffEnv): the trace clock stands still while a Job's failed pod is owed its
// replacement, so upstream's 10, 20, 40 s of wall time per failure would be a replay's wall time
// and no trace time; the replacement comes at the failure's trace time either way.
const jobPodFailureBackOff = 10 * time.Millisecond

// kueueCycleBackoff caps Kueue's scheduler backoff (see tools.KueueCycleBackoffEnv). Upstream
// waits 1 ms after a scheduling cycle that admitted nothing, doubling to 100 ms while cycles keep
// failing. The replay holds its trace clock until Kueue has tried every pending head, so a sweep of
// N heads that cannot be admitted costs N × 100 ms of wall time and no trace time at all (on the
// README job: 222 s of its 307 s). A millisecond keeps the sweep at Kueue's own cycle cost while a
// head that waits for its preemption victims, re-tried every cycle, still spins at most ~1,000
// times a second.
const kueueCycleBackoff = time.Millisecond

// spec is how to run and probe one component.
type spec struct {
	process
	ports  []int
	health func(context.Context) error
	// live, when set, is the liveness probe, first run liveDelay after each start: a process
	// that is up (ready, even) but no longer does its job is restarted.
	live      func(context.Context) error
	liveDelay time.Duration
	// files are configuration files written to the config dir before the component starts.
	files map[string]any
}

// controllerRuntimeCertSubdir is where under the temporary directory a controller-runtime webhook
// server looks for its certificate when nobody sets one.
const controllerRuntimeCertSubdir = "/k8s-webhook-server/serving-certs"

// operatorEnv is what the cluster gives an operator's Run.
func (s *State) operatorEnv(op *render.Operator, bin string) render.OperatorEnv {
	env := render.OperatorEnv{Binary: bin, Kubeconfig: s.Kubeconfig(), Ports: s.Ports.Operators[op.Name],
		CertDir: s.path("certs", op.Name), ConfigDir: s.path("config"), QPS: clientQPS}
	if op.StandIn != "" {
		env.StandIn = hostPort(s.Ports.Operators[op.StandIn][standInPort])
	}
	return env
}

// operatorSpec is an operator's process as its Run describes it; one whose webhook server reads
// its certificate from a fixed path runs in a private mount namespace with its own cert dir there.
func (s *State) operatorSpec(op *render.Operator, bin string, probe *http.Client) spec {
	env := s.operatorEnv(op, bin)
	run := op.Run(env)
	argv, penv := run.Args, run.Env
	if op.Webhooks != nil && op.Webhooks.HardcodedCertDir != "" {
		argv = privateCertDir(env.CertDir, op.Webhooks.HardcodedCertDir, argv)
		// controller-runtime puts its default cert dir under os.TempDir(): with the caller's
		// TMPDIR elsewhere the operator would look there, not where its certificate is.
		if tmp, ok := strings.CutSuffix(op.Webhooks.HardcodedCertDir, controllerRuntimeCertSubdir); ok {
			penv = append(slices.Clip(penv), "TMPDIR="+tmp)
		}
	}
	var ports []int
	for _, name := range op.Ports {
		ports = append(ports, env.Ports[name])
	}
	return spec{
		process: process{name: op.Name, bin: bin, argv: argv, env: penv},
		ports:   ports,
		health:  httpOK(probe, loopURL("http", env.Ports[run.HealthPort], run.HealthPath)),
		files:   run.Files,
	}
}

func loopURL(scheme string, port int, path string) string {
	return scheme + "://127.0.0.1:" + strconv.Itoa(port) + path
}

// specs builds the command line and health probe of every component.
func (s *State) specs(bins map[string]string, p *pki) (map[string]spec, error) {
	pt := s.Ports
	kc := s.Kubeconfig()
	pkiDir := s.path("pki")
	plain := &http.Client{Timeout: 2 * time.Second}
	insecure := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // #nosec G402 -- loopback health probe of a component whose cert we issued
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CA.CertPEM)
	adminCert, err := tls.X509KeyPair(p.Admin.CertPEM, p.Admin.KeyPEM)
	if err != nil {
		return nil, err
	}
	admin := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{adminCert}}}}
	kcEnv := []string{"KUBECONFIG=" + kc}

	out := map[string]spec{
		Etcd: {
			process: process{name: Etcd, bin: bins[Etcd], argv: []string{bins[Etcd],
				"--name=" + s.Name, "--data-dir=" + s.path("data", "etcd"),
				"--listen-client-urls=" + loopURL("http", pt.EtcdClient, ""), "--advertise-client-urls=" + loopURL("http", pt.EtcdClient, ""),
				"--listen-peer-urls=" + loopURL("http", pt.EtcdPeer, ""), "--initial-advertise-peer-urls=" + loopURL("http", pt.EtcdPeer, ""),
				"--initial-cluster=" + s.Name + "=" + loopURL("http", pt.EtcdPeer, ""),
				"--listen-metrics-urls=" + loopURL("http", pt.EtcdMetrics, ""),
				"--quota-backend-bytes=4294967296", "--unsafe-no-fsync", "--log-level=warn"}},
			ports:  []int{pt.EtcdClient, pt.EtcdPeer, pt.EtcdMetrics},
			health: httpOK(plain, loopURL("http", pt.EtcdClient, "/health")),
		},
		APIServer: {
			process: process{name: APIServer, bin: bins[APIServer], argv: []string{bins[APIServer],
				"--etcd-servers=" + loopURL("http", pt.EtcdClient, ""),
				"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(pt.APIServer),
				"--cert-dir=" + s.path("data", "apiserver-certs"),
				"--tls-cert-file=" + pkiDir + "/apiserver.crt", "--tls-private-key-file=" + pkiDir + "/apiserver.key",
				"--client-ca-file=" + pkiDir + "/ca.crt",
				"--service-account-key-file=" + pkiDir + "/sa.pub", "--service-account-signing-key-file=" + pkiDir + "/sa.key",
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC", "--allow-privileged=true",
				"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
				// A kubelet registers its node before the node is ready, so this plugin taints every
				// new node node.kubernetes.io/not-ready until the node controller sees it Ready. The
				// spec's KWOK nodes are created whole (labels, allocatable) and Ready at once; the
				// taint would only open a window in which kube-scheduler's copy of a new node lags the
				// API's, and a run's first pods all go to the nodes it saw untainted first.
				"--disable-admission-plugins=TaintNodesByCondition"}},
			ports:  []int{pt.APIServer},
			health: httpOK(admin, loopURL("https", pt.APIServer, "/readyz")),
		},
		ControllerManager: {
			process: process{name: ControllerManager, bin: bins[ControllerManager], argv: []string{bins[ControllerManager],
				"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
				"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(pt.ControllerManager), "--leader-elect=false",
				"--service-account-private-key-file=" + pkiDir + "/sa.key", "--root-ca-file=" + pkiDir + "/ca.crt",
				"--cluster-signing-cert-file=" + pkiDir + "/ca.crt", "--cluster-signing-key-file=" + pkiDir + "/ca.key",
				"--use-service-account-credentials=true",
				"--kube-api-qps=" + strconv.Itoa(clientQPS), "--kube-api-burst=" + strconv.Itoa(clientQPS)},
				env: []string{tools.JobSyncBatchPeriodEnv + "=" + jobSyncBatchPeriod.String(),
					tools.JobPodFailureBackOffEnv + "=" + jobPodFailureBackOff.String()}},
			ports:  []int{pt.ControllerManager},
			health: httpOK(insecure, loopURL("https", pt.ControllerManager, "/healthz")),
		},
		Scheduler: {
			// The configuration file (scheduler.go) holds the kubeconfig, client rate, leader
			// election and profiles; with --config the scheduler ignores the flags for them.
			process: process{name: Scheduler, bin: bins[Scheduler], argv: []string{bins[Scheduler],
				"--config=" + s.path("config", schedulerConfigFile),
				"--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc,
				"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(pt.Scheduler)}},
			ports:  []int{pt.Scheduler},
			health: httpOK(insecure, loopURL("https", pt.Scheduler, "/healthz")),
		},
		KWOK: {
			process: process{name: KWOK, bin: bins[KWOK], env: kcEnv, argv: []string{bins[KWOK],
				"--kubeconfig=" + kc, "--manage-all-nodes=false",
				"--manage-nodes-with-annotation-selector=" + cluster.KWOKNodeAnnotation + "=fake",
				"--node-ip=10.244.0.1", "--cidr=10.244.0.0/16", "--node-lease-duration-seconds=40",
				"--enable-crds=Stage", "--server-address=" + hostPort(pt.KWOK)}},
			ports:     []int{pt.KWOK},
			health:    httpOK(plain, loopURL("http", pt.KWOK, "/healthz")),
			live:      kwokHoldsLeases(lazyClient(kc)),
			liveDelay: KWOKLivenessDelay,
		},
		Kueue: {
			process: process{name: Kueue, bin: bins[Kueue], env: []string{"KUBECONFIG=" + kc, tools.KueueCycleBackoffEnv + "=" + kueueCycleBackoff.String(),
				kueueclock.Env + "=" + s.KueueClockPath()}, argv: []string{bins[Kueue],
				"--config=" + s.path("config", kueueConfigFile), "--zap-log-level=info"}},
			ports:  []int{pt.KueueWebhook, pt.KueueHealth, pt.KueueMetrics},
			health: httpOK(plain, loopURL("http", pt.KueueHealth, "/readyz")),
		},
	}
	for _, op := range operators() {
		out[op.Name] = s.operatorSpec(op, bins[op.Name], plain)
		if op.StandIn != "" {
			out[op.StandIn] = s.standInSpec(op.StandIn, bins[op.StandIn], plain)
		}
	}
	if s.RealNode {
		flags, err := s.realNodeAPIServerFlags()
		if err != nil {
			return nil, err
		}
		api := out[APIServer]
		api.argv = append(slices.Clip(api.argv), flags...)
		out[APIServer] = api
		exe, err := selfExecutable()
		if err != nil {
			return nil, err
		}
		out[RealNode] = s.realNodeSpec(exe)
	}
	if s.Bare {
		// A user's cluster: upstream's 1 s Job sync batch period, not the local cluster's 10 ms.
		kcm := out[ControllerManager]
		kcm.env = nil
		out[ControllerManager] = kcm
	}
	return out, nil
}

func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// privateCertDir runs argv in a private mount namespace where dir is bind-mounted over the
// hard-coded cert path, so the host's /tmp never holds the cluster's keys and two clusters never
// share one cert dir. Only the (empty) mount point is created on the host.
func privateCertDir(dir, hardcoded string, argv []string) []string {
	if sharedCertDir() {
		return argv
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	script := fmt.Sprintf("mount --bind %s %s && exec %s", shellQuote(dir), shellQuote(hardcoded), strings.Join(quoted, " "))
	u := []string{"unshare", "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		u = append(u, "--map-root-user")
	}
	return append(u, "sh", "-c", script)
}

// sharedCertDir reports whether there is no unshare to give a component a private cert dir: the
// runner image has no util-linux (and a pod may not create namespaces anyway). The component then
// reads the hard-coded dir itself, which Up fills, one cluster at a time (claimCertDir).
func sharedCertDir() bool {
	_, err := exec.LookPath("unshare")
	return err != nil
}

// claimCertDir takes the hard-coded cert dir for this cluster's certificates when there is no
// private one: it refuses while another cluster's component that reads it is running.
func (s *State) claimCertDir(hardcoded, component, bin string) error {
	owner := filepath.Join(filepath.Dir(hardcoded), "kueuelab-owner")
	if b, err := os.ReadFile(owner); err == nil && strings.TrimSpace(string(b)) != s.Dir {
		other := &State{Dir: strings.TrimSpace(string(b))}
		if _, running := other.running(component, bin); running {
			return fmt.Errorf("%s of the cluster in %s uses %s, and without unshare a second cluster cannot have a private one: stop that cluster first", component, other.Dir, hardcoded)
		}
	}
	if err := os.MkdirAll(hardcoded, 0o700); err != nil {
		return err
	}
	return os.WriteFile(owner, []byte(s.Dir+"\n"), 0o600)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// httpOK is a probe that passes on HTTP 200.
func httpOK(c *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		return nil
	}
}
