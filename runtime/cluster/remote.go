package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// RemoteMetricsOptions say where the metrics of a cluster kueuelab did not start are. An empty
// URL is found: the component's pod (Kueue's controller Deployment, kube-scheduler's static pod in
// kube-system, as kind and kubeadm run it) reached through a port-forward of the API server.
type RemoteMetricsOptions struct {
	// KueueURL and SchedulerURL are https URLs of /metrics (e.g. a component run as a process).
	KueueURL, SchedulerURL string
}

// RemoteMetrics reads Kueue's and kube-scheduler's metrics on another cluster.
type RemoteMetrics struct {
	Kueue, Scheduler MetricsReader
	// KueueVia and SchedulerVia say how each is reached; KueueVersion and SchedulerVersion are
	// what their build-info metrics report.
	KueueVia, SchedulerVia         string
	KueueVersion, SchedulerVersion string
	forwards                       []*forward
}

// Close stops the port-forwards.
func (r *RemoteMetrics) Close() {
	for _, f := range r.forwards {
		f.close()
	}
}

// ConnectMetrics reaches Kueue's and kube-scheduler's metrics on the cluster behind rc with a
// ServiceAccount token authorized for GET /metrics, and reads each once: the trace clock of a
// run needs both (runtime/runner's settlers), so an error here says which one cannot be read and
// why, and the run should not pretend to be exact without it.
func ConnectMetrics(ctx context.Context, rc *rest.Config, o RemoteMetricsOptions) (*RemoteMetrics, error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	t, err := metricsAccess(ctx, rc)
	if err != nil {
		return nil, err
	}
	hc := metricsHTTPClient()
	r := &RemoteMetrics{}
	type target struct {
		what, url string
		find      func(context.Context, kubernetes.Interface) (podPort, error)
		reader    *MetricsReader
		via       *string
		version   *string
		family    string
		label     string
	}
	var errs []error
	for _, tg := range []target{
		{what: "Kueue", url: o.KueueURL, find: findKueuePod, reader: &r.Kueue, via: &r.KueueVia, version: &r.KueueVersion,
			family: "kueue_build_info", label: "git_version"},
		{what: "kube-scheduler", url: o.SchedulerURL, find: findSchedulerPod, reader: &r.Scheduler, via: &r.SchedulerVia, version: &r.SchedulerVersion,
			family: "kubernetes_build_info", label: "git_version"},
	} {
		var read MetricsReader
		if tg.url != "" {
			u, err := url.Parse(tg.url)
			if err != nil || u.Scheme != "https" || u.Host == "" {
				errs = append(errs, fmt.Errorf("%s metrics URL %q: want https://HOST:PORT/metrics", tg.what, tg.url))
				continue
			}
			read = bearerReader(t, hc, func(context.Context) (string, error) { return tg.url, nil }, nil)
			*tg.via = tg.url
		} else {
			pp, err := tg.find(ctx, cs)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s metrics: %w", tg.what, err))
				continue
			}
			f := &forward{rc: rc, cs: cs, find: tg.find, target: pp}
			if err := f.start(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s metrics: port-forward to pod %s/%s port %d: %w", tg.what, pp.namespace, pp.pod, pp.port, err))
				continue
			}
			r.forwards = append(r.forwards, f)
			read = bearerReader(t, hc, f.url, f.restart)
			*tg.via = fmt.Sprintf("port-forward to pod %s/%s port %d", pp.namespace, pp.pod, pp.port)
		}
		v, err := buildVersion(ctx, read, tg.family, tg.label)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s metrics (%s): %w", tg.what, *tg.via, err))
			continue
		}
		*tg.reader, *tg.version = read, v
	}
	if err := errors.Join(errs...); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// buildVersion reads the metrics once and returns the label of the build-info family.
func buildVersion(ctx context.Context, read MetricsReader, family, label string) (string, error) {
	rc, err := read(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	if err != nil {
		return "", err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte(family+"{")) {
			continue
		}
		key := []byte(label + `="`)
		if i := bytes.Index(line, key); i >= 0 {
			rest := line[i+len(key):]
			if j := bytes.IndexByte(rest, '"'); j >= 0 {
				return string(rest[:j]), nil
			}
		}
	}
	return "", fmt.Errorf("no %s in the metrics: not the component expected", family)
}

// podPort is a component's pod and the port its metrics are served on.
type podPort struct {
	namespace, pod string
	port           int
}

// kueueDeployment is the Deployment name of Kueue's release manifests and of its Helm chart
// installed as release "kueue".
const kueueDeployment = "kueue-controller-manager"

// findKueuePod finds a running pod of Kueue's controller Deployment (any namespace; the leader
// when its lease names one) and the metrics port of its configuration (metrics.bindAddress,
// default :8443).
func findKueuePod(ctx context.Context, cs kubernetes.Interface) (podPort, error) {
	k, err := InspectKueue(ctx, cs)
	if err != nil {
		return podPort{}, err
	}
	if k.Deployment == nil {
		return podPort{}, fmt.Errorf("no Deployment %s in any namespace (Kueue not installed from its manifests or chart?): give its metrics URL", kueueDeployment)
	}
	sel, err := metav1.LabelSelectorAsSelector(k.Deployment.Spec.Selector)
	if err != nil {
		return podPort{}, err
	}
	pod, err := runningPod(ctx, cs, k.Deployment.Namespace, sel, k.leaseHolder(ctx, cs))
	if err != nil {
		return podPort{}, fmt.Errorf("kueue: %w", err)
	}
	port := 8443
	if k.Config != nil && k.Config.MetricsBindAddress != "" {
		_, p, err := net.SplitHostPort(k.Config.MetricsBindAddress)
		n, perr := strconv.Atoi(p)
		if err != nil || perr != nil || n <= 0 {
			return podPort{}, fmt.Errorf("metrics.bindAddress %q of Kueue's configuration (%s): want HOST:PORT", k.Config.MetricsBindAddress, k.ConfigSource)
		}
		port = n
	}
	return podPort{namespace: pod.Namespace, pod: pod.Name, port: port}, nil
}

// findSchedulerPod finds kube-scheduler's pod in kube-system (label component=kube-scheduler, as
// kubeadm and kind run it; the lease holder when there are several) and its --secure-port.
func findSchedulerPod(ctx context.Context, cs kubernetes.Interface) (podPort, error) {
	sel := labels.SelectorFromSet(labels.Set{"component": "kube-scheduler"})
	holder := leaseHolder(ctx, cs, metav1.NamespaceSystem, "kube-scheduler")
	pod, err := runningPod(ctx, cs, metav1.NamespaceSystem, sel, holder)
	if err != nil {
		return podPort{}, fmt.Errorf("kube-scheduler: %w (a managed control plane hides it: give its metrics URL, or run on kueuelab's local cluster)", err)
	}
	port := 10259
	for _, c := range pod.Spec.Containers {
		for _, a := range append(append([]string{}, c.Command...), c.Args...) {
			if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
				n, err := strconv.Atoi(v)
				if err != nil || n <= 0 {
					return podPort{}, fmt.Errorf("kube-scheduler pod %s: %s: want a port", pod.Name, a)
				}
				port = n
			}
		}
	}
	return podPort{namespace: pod.Namespace, pod: pod.Name, port: port}, nil
}

// runningPod picks a Running pod of sel in ns: the one whose name or node the lease holder
// identity starts with when there are several (controller-runtime and kube-scheduler write
// "<hostname>_<uuid>"; the hostname is the pod's name, or the node's for a host-network pod).
func runningPod(ctx context.Context, cs kubernetes.Interface, ns string, sel labels.Selector, holder string) (*corev1.Pod, error) {
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list pods %s in %s: %w", sel, ns, err)
	}
	var running []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	switch {
	case len(running) == 0:
		return nil, fmt.Errorf("no running pod %s in namespace %s", sel, ns)
	case len(running) == 1 || holder == "":
		return running[0], nil
	}
	host, _, _ := strings.Cut(holder, "_")
	for _, p := range running {
		if p.Name == host || p.Spec.NodeName == host {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%d running pods %s in %s and none holds the lease (holder %q)", len(running), sel, ns, holder)
}

func leaseHolder(ctx context.Context, cs kubernetes.Interface, ns, name string) string {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// forward is a port-forward from 127.0.0.1 to a component's pod, re-established (the pod found
// anew) when a request cannot connect: the pod may have been restarted or replaced.
type forward struct {
	rc     *rest.Config
	cs     kubernetes.Interface
	find   func(context.Context, kubernetes.Interface) (podPort, error)
	target podPort

	mu    sync.Mutex
	local int
	stop  chan struct{}
}

func (f *forward) url(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.local == 0 {
		return "", errors.New("port-forward closed")
	}
	return "https://127.0.0.1:" + strconv.Itoa(f.local) + "/metrics", nil
}

func (f *forward) start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.startLocked(ctx)
}

func (f *forward) startLocked(ctx context.Context) error {
	transport, upgrader, err := spdy.RoundTripperFor(f.rc)
	if err != nil {
		return err
	}
	req := f.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.target.namespace).Name(f.target.pod).SubResource("portforward")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(f.target.port)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		if err == nil {
			err = errors.New(strings.TrimSpace(errOut.String()))
		}
		return err
	case <-ctx.Done():
		close(stop)
		return ctx.Err()
	case <-time.After(30 * time.Second):
		close(stop)
		return errors.New("not ready after 30s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		close(stop)
		return fmt.Errorf("forwarded ports %v: %v", ports, err)
	}
	f.local, f.stop = int(ports[0].Local), stop
	return nil
}

// restart finds the component's pod again and forwards to it.
func (f *forward) restart(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil {
		close(f.stop)
		f.stop, f.local = nil, 0
	}
	pp, err := f.find(ctx, f.cs)
	if err != nil {
		return err
	}
	f.target = pp
	return f.startLocked(ctx)
}

func (f *forward) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stop != nil {
		close(f.stop)
		f.stop, f.local = nil, 0
	}
}

// ignoreNotFound returns nil for a NotFound error.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
