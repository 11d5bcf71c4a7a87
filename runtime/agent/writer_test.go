package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
)

// TestWriterRetries: a completion write that cannot reach the API server (an outage longer than
// any fixed retry budget) is retried until it lands; one the API server refuses gives up after
// maxWriteRetries and says so through failed.
func TestWriterRetries(t *testing.T) {
	refused := &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil)
	for _, tc := range []struct {
		name       string
		err        error
		failures   int32 // patches that fail before the API answers
		wantLanded bool
	}{
		{"outage outlasts the refused-write budget", refused, 3 * maxWriteRetries, true},
		{"refused for good", invalid, 1000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
			cs := fake.NewClientset(pod)
			var calls atomic.Int32
			cs.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
				if calls.Add(1) <= tc.failures {
					return true, nil, tc.err
				}
				return false, nil, nil
			})
			m := newMetrics()
			w := newWriter(cs, 1000, 1000, slog.New(slog.NewTextHandler(io.Discard, nil)), m)
			// The test's backoff is short; the retry rule is what it checks.
			w.urgent = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 5*time.Millisecond))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go w.run(ctx, 1)
			var failed atomic.Bool
			w.complete("ns/p", patch{ns: "ns", name: "p", typ: types.MergePatchType, status: true, complete: true, result: "Succeeded",
				body: []byte(`{"status":{"phase":"Succeeded"}}`), failed: func() { failed.Store(true) }})
			err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return w.backlog() == 0, nil
			})
			if err != nil {
				t.Fatalf("write still pending after %d calls", calls.Load())
			}
			got, err := cs.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			landed := got.Status.Phase == corev1.PodSucceeded
			if landed != tc.wantLanded || failed.Load() == tc.wantLanded {
				t.Errorf("after %d calls: landed %v failed %v, want landed %v", calls.Load(), landed, failed.Load(), tc.wantLanded)
			}
			if !tc.wantLanded && calls.Load() != maxWriteRetries+1 {
				t.Errorf("refused write tried %d times, want %d", calls.Load(), maxWriteRetries+1)
			}
		})
	}
}
