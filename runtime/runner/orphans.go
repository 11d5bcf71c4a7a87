package runner

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// resyncer asks the owner of pods that outlived their Workload's quota reservation to look at
// them again (watcher.findOrphans): an update of the owner is an event its operator handles at
// once, whatever it backs off from. It asks after a grace period (the operator's own deletion,
// already under way, usually lands first) and again, with back-off, while the pods remain; the
// clock's hold limit bounds the wait if the owner never deletes them.
type resyncer struct {
	ctx      context.Context
	patch    func(ctx context.Context, ns string, owner metav1.OwnerReference, n int) error
	orphaned func(unitKey string) bool
	clk      *simclock.Clock
	grace    time.Duration

	mu     sync.Mutex
	asking map[string]bool // unit keys with an ask under way
	asked  int
}

// Back-off of the resync requests: the first after resyncGrace, doubling up to resyncMaxDelay,
// at most resyncAttempts of them per release of quota.
const (
	resyncGrace    = 200 * time.Millisecond
	resyncMaxDelay = 5 * time.Second
	resyncAttempts = 8
)

func newResyncer(ctx context.Context, c client.Client, clk *simclock.Clock, orphaned func(string) bool) *resyncer {
	return &resyncer{ctx: ctx, patch: resyncPatch(c), orphaned: orphaned, clk: clk, grace: resyncGrace, asking: map[string]bool{}}
}

// resyncPatch sets contract.Resync on the owner, a merge patch of its metadata only.
func resyncPatch(c client.Client) func(context.Context, string, metav1.OwnerReference, int) error {
	return func(ctx context.Context, ns string, owner metav1.OwnerReference, n int) error {
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		if err != nil {
			return fmt.Errorf("owner %s %s/%s: %w", owner.Kind, ns, owner.Name, err)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gv.WithKind(owner.Kind))
		u.SetNamespace(ns)
		u.SetName(owner.Name)
		body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, contract.Resync, strconv.Itoa(n))
		if err := c.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
			return fmt.Errorf("resync %s %s/%s: %w", owner.Kind, ns, owner.Name, err)
		}
		return nil
	}
}

// ask starts asking the owner of the unit with this key to resync, unless that is under way.
func (r *resyncer) ask(key, ns string, owner metav1.OwnerReference) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.asking[key] {
		return
	}
	r.asking[key] = true
	go r.run(key, ns, owner)
}

func (r *resyncer) run(key, ns string, owner metav1.OwnerReference) {
	defer func() {
		r.mu.Lock()
		delete(r.asking, key)
		r.mu.Unlock()
	}()
	t := time.NewTimer(r.grace)
	defer t.Stop()
	d := r.grace
	for range resyncAttempts {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		if !r.orphaned(key) {
			return
		}
		r.mu.Lock()
		r.asked++
		n := r.asked
		r.mu.Unlock()
		err := r.patch(r.ctx, ns, owner, n)
		what := fmt.Sprintf("%s: pods outlived the quota, asked %s %s/%s to resync", key, owner.Kind, ns, owner.Name)
		if err != nil {
			what += ": " + err.Error()
		}
		r.clk.Note("resync", what)
		d = min(2*d, resyncMaxDelay)
		t.Reset(d)
	}
}

// count is the number of resync requests made.
func (r *resyncer) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked
}
