package agent

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/kueuelab/kueuelab/render/contract"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/kueuelab/kueuelab/runtime/apiretry"
)

// maxWriteRetries bounds the retries of a write the API server refused; the next checkpoint
// rewrites progress anyway. A write that failed because the API server could not be reached (an
// outage, a restart) is retried until it goes through: a lost completion would leave its
// workload running forever.
const maxWriteRetries = 8

// Retry backoff: exponential per pod, capped so that writes resume within a second of the API
// server's return.
const (
	writeRetryBase = 5 * time.Millisecond
	writeRetryMax  = time.Second
)

// patch is one pending pod write; a newer patch for the same pod replaces an older one.
type patch struct {
	ns, name string
	typ      types.PatchType
	body     []byte
	status   bool // through the pods/status subresource
	complete bool
	result   string
	// failed, when set, is called once if the write fails for good (the pod is gone, or the
	// retries ran out).
	failed func()
	// progress, when set, is marshalled into a contract.Progress merge patch by the writer, off
	// the tick goroutine.
	progress *Progress
}

// progressPatch is the merge patch that sets contract.Progress.
func progressPatch(pr *Progress) ([]byte, error) {
	v, err := json.Marshal(pr)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.Progress: string(v)}}})
}

// writer batches pod writes through two deduplicating work queues (completions never wait
// behind progress) that share one client-side token bucket.
type writer struct {
	client  kubernetes.Interface
	limiter flowcontrol.RateLimiter
	log     *slog.Logger
	m       *metrics

	mu      sync.Mutex
	pending map[string]patch // by queue name + pod key
	urgent  workqueue.TypedRateLimitingInterface[string]
	normal  workqueue.TypedRateLimitingInterface[string]
}

func newWriter(client kubernetes.Interface, qps float64, burst int, log *slog.Logger, m *metrics) *writer {
	q := func(name string) workqueue.TypedRateLimitingInterface[string] {
		return workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.NewTypedItemExponentialFailureRateLimiter[string](writeRetryBase, writeRetryMax),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name})
	}
	return &writer{
		client: client, limiter: flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst), log: log, m: m,
		pending: map[string]patch{}, urgent: q("kueuelab-agent-complete"), normal: q("kueuelab-agent-progress"),
	}
}

// complete queues a completion write and drops any progress write still pending for the pod.
func (w *writer) complete(key string, p patch) {
	w.mu.Lock()
	w.pending["c"+key] = p
	delete(w.pending, "p"+key)
	w.mu.Unlock()
	w.urgent.Add(key)
}

// progress queues a progress write.
func (w *writer) progress(key string, p patch) {
	w.mu.Lock()
	w.pending["p"+key] = p
	w.mu.Unlock()
	w.normal.Add(key)
}

// backlog is the number of writes not yet done.
func (w *writer) backlog() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// run serves both queues with workers goroutines each until ctx ends.
func (w *writer) run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(2)
		go func() { defer wg.Done(); w.serve(ctx, w.urgent, "c") }()
		go func() { defer wg.Done(); w.serve(ctx, w.normal, "p") }()
	}
	<-ctx.Done()
	w.urgent.ShutDown()
	w.normal.ShutDown()
	wg.Wait()
}

func (w *writer) serve(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], prefix string) {
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		w.mu.Lock()
		p, ok := w.pending[prefix+key]
		w.mu.Unlock()
		if ok {
			w.write(ctx, q, prefix, key, p)
		}
		q.Done(key)
	}
}

func (w *writer) write(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], prefix, key string, p patch) {
	if err := w.limiter.Wait(ctx); err != nil {
		return
	}
	body := p.body
	if p.progress != nil {
		var err error
		if body, err = progressPatch(p.progress); err != nil {
			w.log.Error("progress not written", "pod", key, "err", err)
			return
		}
	}
	var sub []string
	if p.status {
		sub = []string{"status"}
	}
	_, err := w.client.CoreV1().Pods(p.ns).Patch(ctx, p.name, p.typ, body, metav1.PatchOptions{FieldManager: "kueuelab-agent"}, sub...)
	w.mu.Lock()
	// A newer patch queued meanwhile stays pending; the queue hands the key out again.
	if cur, ok := w.pending[prefix+key]; ok && cur.progress == p.progress && string(cur.body) == string(p.body) && (err == nil || apierrors.IsNotFound(err) || (!apiretry.Transient(err) && q.NumRequeues(key) >= maxWriteRetries)) {
		delete(w.pending, prefix+key)
	}
	_, again := w.pending[prefix+key]
	w.mu.Unlock()
	switch {
	case err == nil:
		q.Forget(key)
		if p.complete {
			w.m.completions.WithLabelValues(p.result).Inc()
		}
	case apierrors.IsNotFound(err):
		q.Forget(key)
		if p.failed != nil && !again {
			p.failed()
		}
	default:
		w.m.writeErrors.Inc()
		if ctx.Err() == nil {
			w.log.Warn("pod write failed", "pod", key, "retries", q.NumRequeues(key), "err", err)
		}
		if again {
			q.AddRateLimited(key)
			return
		}
		q.Forget(key)
		if p.failed != nil {
			p.failed()
		}
	}
}
