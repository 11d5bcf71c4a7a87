package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// metricsReader is the identity the runner reads component metrics with: Kueue serves /metrics
// over HTTPS behind authentication and authorization (controller-runtime's filter), as does
// kube-scheduler, so a bearer token authorized for the nonResource URL /metrics is what works for
// both.
const metricsReader = "kueuelab-metrics-reader"

// MetricsReader reads one component's Prometheus metrics (text format).
type MetricsReader func(ctx context.Context) (io.ReadCloser, error)

// MetricsReaders returns readers of the local Kueue's and kube-scheduler's metrics.
func (s *State) MetricsReaders(ctx context.Context, rc *rest.Config) (kueue, scheduler MetricsReader, err error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	objs := []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: metricsReader}},
		&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: metricsReader},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: metav1.NamespaceSystem, Name: metricsReader}}},
	}
	if err := ApplyObjects(ctx, rc, objs); err != nil {
		return nil, nil, fmt.Errorf("metrics reader: %w", err)
	}
	t := &tokenSource{cs: cs}
	if _, err := t.get(ctx, false); err != nil {
		return nil, nil, err
	}
	// Loopback only, and the components' serving certificates are self-signed at their start.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // #nosec G402 -- loopback component of the local cluster
		MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}
	reader := func(port int) MetricsReader {
		url := loopURL("https", port, "/metrics")
		return func(ctx context.Context) (io.ReadCloser, error) {
			for retry := false; ; retry = true {
				tok, err := t.get(ctx, retry)
				if err != nil {
					return nil, err
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					return nil, err
				}
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := hc.Do(req)
				if err != nil {
					return nil, err
				}
				if resp.StatusCode == http.StatusOK {
					return resp.Body, nil
				}
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized && !retry {
					continue // the token expired: ask for a new one once
				}
				return nil, fmt.Errorf("GET %s: %s %s", url, resp.Status, body)
			}
		}
	}
	return reader(s.Ports.KueueMetrics), reader(s.Ports.Scheduler), nil
}

// tokenSource keeps a ServiceAccount token of the metrics reader.
type tokenSource struct {
	cs  kubernetes.Interface
	mu  sync.Mutex
	tok string
}

func (t *tokenSource) get(ctx context.Context, renew bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != "" && !renew {
		return t.tok, nil
	}
	tr, err := t.cs.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, metricsReader,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(48 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("metrics reader token: %w", err)
	}
	t.tok = tr.Status.Token
	return t.tok, nil
}
