package localcluster

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/kueuelab/kueuelab/runtime/cluster"
)

// MetricsReaders returns readers of the local Kueue's and kube-scheduler's metrics.
func (s *State) MetricsReaders(ctx context.Context, rc *rest.Config) (kueue, scheduler cluster.MetricsReader, err error) {
	return cluster.MetricsReadersAt(ctx, rc, loopURL("https", s.Ports.KueueMetrics, "/metrics"), loopURL("https", s.Ports.Scheduler, "/metrics"))
}
