package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kueuelab/kueuelab/runtime/tools"
)

// Component names, in start order; `down` stops them in reverse.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	KWOK              = "kwok"
	Kueue             = "kueue"
	JobSet            = "jobset"
	TrainingOperator  = "training-operator"
	MPIOperator       = "mpi-operator"
)

// Components lists every component in start order.
func Components() []string {
	return []string{Etcd, APIServer, ControllerManager, Scheduler, KWOK, Kueue, JobSet, TrainingOperator, MPIOperator}
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

// spec is how to run and probe one component.
type spec struct {
	process
	ports  []int
	health func(context.Context) error
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

	trainingArgs := []string{bins[TrainingOperator], "--kubeconfig=" + kc,
		"--enable-scheme=pytorchjob", "--enable-scheme=tfjob",
		"--metrics-bind-address=" + hostPort(pt.TrainingMx), "--health-probe-bind-address=" + hostPort(pt.TrainingHealth),
		"--webhook-server-port=" + strconv.Itoa(pt.TrainingWebhook),
		"--kube-api-qps=" + strconv.Itoa(clientQPS), "--kube-api-burst=" + strconv.Itoa(clientQPS), "--controller-threads=4"}
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
				"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500"}},
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
				"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
				"--node-ip=10.244.0.1", "--cidr=10.244.0.0/16", "--node-lease-duration-seconds=40",
				"--enable-crds=Stage", "--server-address=" + hostPort(pt.KWOK)}},
			ports:  []int{pt.KWOK},
			health: httpOK(plain, loopURL("http", pt.KWOK, "/healthz")),
		},
		Kueue: {
			process: process{name: Kueue, bin: bins[Kueue], env: kcEnv, argv: []string{bins[Kueue],
				"--config=" + s.path("config", "kueue.yaml"), "--zap-log-level=info"}},
			ports:  []int{pt.KueueWebhook, pt.KueueHealth, pt.KueueMetrics},
			health: httpOK(plain, loopURL("http", pt.KueueHealth, "/readyz")),
		},
		JobSet: {
			process: process{name: JobSet, bin: bins[JobSet], env: kcEnv, argv: []string{bins[JobSet],
				"--config=" + s.path("config", "jobset.yaml"), "--zap-log-level=info"}},
			ports:  []int{pt.JobSetWebhook, pt.JobSetHealth, pt.JobSetMetrics},
			health: httpOK(plain, loopURL("http", pt.JobSetHealth, "/readyz")),
		},
		TrainingOperator: {
			process: process{name: TrainingOperator, bin: bins[TrainingOperator],
				env:  append([]string{"MY_POD_NAMESPACE=kubeflow"}, kcEnv...),
				argv: privateCertDir(s.path("certs", "training"), trainingCertDir, trainingArgs)},
			ports:  []int{pt.TrainingWebhook, pt.TrainingHealth, pt.TrainingMx},
			health: httpOK(plain, loopURL("http", pt.TrainingHealth, "/readyz")),
		},
		MPIOperator: {
			process: process{name: MPIOperator, bin: bins[MPIOperator], env: kcEnv, argv: []string{bins[MPIOperator],
				"--kubeConfig=" + kc, "--lock-namespace=" + mpiNamespace, "--health-address=" + hostPort(pt.MPIHealth),
				"--kube-api-qps=" + strconv.Itoa(clientQPS), "--kube-api-burst=" + strconv.Itoa(clientQPS), "--threadiness=4"}},
			ports:  []int{pt.MPIHealth},
			health: httpOK(plain, loopURL("http", pt.MPIHealth, "/healthz")),
		},
	}
	return out, nil
}

func hostPort(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// trainingCertDir is where training-operator v1.9.3 waits for its serving cert (hard-coded).
const trainingCertDir = "/tmp/k8s-webhook-server/serving-certs"

// privateCertDir runs argv in a private mount namespace where dir is bind-mounted over the
// hard-coded cert path, so the host's /tmp never holds the cluster's keys and two clusters never
// share one cert dir. Only the (empty) mount point is created on the host.
func privateCertDir(dir, hardcoded string, argv []string) []string {
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
