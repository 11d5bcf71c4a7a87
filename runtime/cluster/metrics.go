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

// MetricsReadersAt returns readers of Kueue's and kube-scheduler's metrics served at the given
// https URLs (e.g. components run as processes next to the caller), with the metrics reader's
// token. Unlike ConnectMetrics it reads neither until asked.
func MetricsReadersAt(ctx context.Context, rc *rest.Config, kueueURL, schedulerURL string) (kueue, scheduler MetricsReader, err error) {
	t, err := metricsAccess(ctx, rc)
	if err != nil {
		return nil, nil, err
	}
	// The components' serving certificates are self-signed at their start.
	hc := metricsHTTPClient()
	fixed := func(url string) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return url, nil }
	}
	return bearerReader(t, hc, fixed(kueueURL), nil), bearerReader(t, hc, fixed(schedulerURL), nil), nil
}

// metricsAccess creates the metrics reader's ServiceAccount, its ClusterRole (GET on the
// nonResource URL /metrics, nothing else) and binding, and returns a source of its tokens.
func metricsAccess(ctx context.Context, rc *rest.Config) (*tokenSource, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	if err := ApplyObjects(ctx, rc, metricsReaderObjects()); err != nil {
		return nil, fmt.Errorf("metrics reader: %w", err)
	}
	t := &tokenSource{cs: cs}
	if _, err := t.get(ctx, false); err != nil {
		return nil, err
	}
	return t, nil
}

func metricsReaderObjects() []client.Object {
	return []client.Object{
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
}

// metricsHTTPClient skips certificate verification: Kueue and kube-scheduler serve /metrics with
// self-signed certificates generated at their start, and what the token sent to them allows is
// reading /metrics.
func metricsHTTPClient() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, // #nosec G402 -- self-signed component certs; the token only reads /metrics
		MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}
}

// bearerReader GETs the URL url returns with the metrics reader's token, asking for a new token
// once on 401. When a request fails to connect and reconnect is set, reconnect is called (e.g. to
// re-establish a port-forward) and the request tried once more.
func bearerReader(t *tokenSource, hc *http.Client, url func(context.Context) (string, error), reconnect func(context.Context) error) MetricsReader {
	return func(ctx context.Context) (io.ReadCloser, error) {
		renewed, reconnected := false, false
		for {
			tok, err := t.get(ctx, renewed)
			if err != nil {
				return nil, err
			}
			u, err := url(ctx)
			if err != nil {
				return nil, err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := hc.Do(req)
			if err != nil {
				if reconnect != nil && !reconnected && ctx.Err() == nil {
					reconnected = true
					if rerr := reconnect(ctx); rerr != nil {
						return nil, fmt.Errorf("%w (reconnect: %v)", err, rerr)
					}
					continue
				}
				return nil, err
			}
			if resp.StatusCode == http.StatusOK {
				return resp.Body, nil
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized && !renewed {
				renewed = true // the token expired: ask for a new one once
				continue
			}
			return nil, fmt.Errorf("GET %s: %s %s", u, resp.Status, body)
		}
	}
}

// tokenSource keeps a ServiceAccount token of the metrics reader.
type tokenSource struct {
	cs kubernetes.Interface
	// fetch replaces the TokenRequest (tests).
	fetch func(context.Context) (string, error)
	mu    sync.Mutex
	tok   string
}

func (t *tokenSource) get(ctx context.Context, renew bool) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok != "" && !renew {
		return t.tok, nil
	}
	if t.fetch != nil {
		tok, err := t.fetch(ctx)
		t.tok = tok
		return tok, err
	}
	tr, err := t.cs.CoreV1().ServiceAccounts(metav1.NamespaceSystem).CreateToken(ctx, metricsReader,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(48 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("metrics reader token: %w", err)
	}
	t.tok = tr.Status.Token
	return t.tok, nil
}
