package localcluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kueuelab/kueuelab/runtime/cluster"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KWOKLivenessDelay is how long a KWOK process has after its start to take the leases of the
// nodes it manages before its liveness probe counts: it takes them within a second of its start
// on every cluster kueuelab brings up.
const KWOKLivenessDelay = 20 * time.Second

// lazyClient returns a client of the cluster built on first use (the API server may not be up
// when the supervisor is made) and reused after.
func lazyClient(kubeconfig string) func() (client.Client, error) {
	var (
		mu sync.Mutex
		c  client.Client
	)
	return func() (client.Client, error) {
		mu.Lock()
		defer mu.Unlock()
		if c != nil {
			return c, nil
		}
		cfg, err := cluster.RESTConfig(kubeconfig)
		if err != nil {
			return nil, err
		}
		c, err = cluster.NewClient(cfg)
		return c, err
	}
}

// kwokHoldsLeases is KWOK's liveness probe. KWOK drives a node's pods only while it holds the
// node's lease, and its /healthz answers as soon as its HTTP server runs: a KWOK restarted while
// the API server comes back can serve /healthz for minutes without starting its stage
// controllers, every node unmanaged and every pod left as it was. The probe
// fails when the API server answers and not one node KWOK manages has a lease renewed within its
// duration; it passes when the API server cannot be asked, which is not KWOK's fault, and when
// there is no such node.
func kwokHoldsLeases(kube func() (client.Client, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		c, err := kube()
		if err != nil {
			return nil
		}
		var nodes corev1.NodeList
		if err := c.List(ctx, &nodes); err != nil {
			return nil
		}
		var leases coordinationv1.LeaseList
		if err := c.List(ctx, &leases, client.InNamespace(corev1.NamespaceNodeLease)); err != nil {
			return nil
		}
		return kwokLeasesFresh(nodes.Items, leases.Items, time.Now())
	}
}

// kwokLeasesFresh is kwokHoldsLeases's decision on what the API server returned.
func kwokLeasesFresh(nodes []corev1.Node, leases []coordinationv1.Lease, now time.Time) error {
	managed := map[string]bool{}
	for _, n := range nodes {
		if n.Annotations[cluster.KWOKNodeAnnotation] == "fake" {
			managed[n.Name] = true
		}
	}
	if len(managed) == 0 {
		return nil
	}
	for _, l := range leases {
		if !managed[l.Name] || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
			continue
		}
		if now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)) {
			return nil
		}
	}
	return fmt.Errorf("none of the %d nodes KWOK manages has a lease renewed within its duration", len(managed))
}
