package runner

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/render/contract"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
	"github.com/kueuelab/kueuelab/runtime/results"
	"github.com/kueuelab/kueuelab/runtime/simclock"
)

// sampler writes a time series row per ClusterQueue and flavor every step trace seconds, read
// from the watcher's informer cache while the trace clock stands at the row's time (an alarm).
type sampler struct {
	plan      *plan
	cache     client.Reader
	clk       *simclock.Clock
	nodePower func() map[string]float64
	out       *results.SeriesWriter
	step      float64
	errors    int
	alarm     *simclock.Alarm // the next row (arm)
}

// arm sets the alarm at the first row, before the clock starts (see submitter.arm).
func (s *sampler) arm() {
	s.alarm = s.clk.NewAlarm("sample", simclock.OrderSample)
	s.alarm.Set(s.step)
}

func (s *sampler) run(ctx context.Context) {
	if s.alarm == nil {
		s.arm()
	}
	alarm := s.alarm
	defer alarm.Stop()
	for k := 1; ; k++ {
		t := float64(k) * s.step
		alarm.Set(t)
		select {
		case <-ctx.Done():
			return
		case <-alarm.C():
		}
		// A clock on wall time (no holds) runs on while a large cluster is read: skip the rows
		// missed rather than catching up row by row for ever.
		if now := s.clk.Now(); !s.clk.HoldsEnabled() && now >= t+s.step {
			k = int(now / s.step)
			t = float64(k) * s.step
		}
		samples, err := s.sample(ctx, t)
		if err == nil {
			err = s.out.Write(samples)
		}
		if err != nil && ctx.Err() == nil {
			// The series is best effort: a failed read or write loses one row, never the run.
			s.errors++
		}
	}
}

func (s *sampler) sample(ctx context.Context, t float64) ([]results.Sample, error) {
	// The rows are computed from the cached objects without changing them: no deep copies.
	wls, err := kueuewl.ListUsage(ctx, s.cache, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := s.cache.List(ctx, &pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := s.cache.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var power map[string]float64
	if s.nodePower != nil {
		power = s.nodePower()
	}
	return s.aggregate(t, wls, pods.Items, nodes.Items, power), nil
}

// aggregate computes one row per ClusterQueue and flavor of the plan from the unfinished
// Workloads' GPU accounting.
func (s *sampler) aggregate(t float64, wls []kueuewl.GPUUsage, pods []corev1.Pod, nodes []corev1.Node, power map[string]float64) []results.Sample {
	cq := map[string]*results.Sample{}
	fl := map[string]*results.Sample{}
	var out []results.Sample
	for _, q := range s.plan.cluster.Queues {
		out = append(out, results.Sample{T: t, Scope: results.ScopeClusterQueue, Name: q, NodePowerW: math.NaN()})
	}
	for _, f := range s.plan.cluster.Flavors {
		out = append(out, results.Sample{T: t, Scope: results.ScopeFlavor, Name: f, NodePowerW: math.NaN()})
	}
	for i := range out {
		if out[i].Scope == results.ScopeClusterQueue {
			cq[out[i].Name] = &out[i]
		} else {
			fl[out[i].Name] = &out[i]
		}
	}
	for _, wl := range wls {
		name := wl.ClusterQueue
		if name == "" {
			name = s.plan.cluster.ClusterQueue(wl.Namespace, wl.LocalQueue)
		}
		q := cq[name]
		if q != nil {
			q.Requested += wl.Requested
		}
		if !wl.HoldsQuota {
			if q != nil {
				q.Pending++
			}
			continue
		}
		if q != nil {
			q.Reserved += wl.Requested
		}
		for f, gpus := range wl.Reserved {
			if x := fl[f]; x != nil {
				x.Reserved += gpus
			}
		}
	}
	nodeFlavor := map[string]string{}
	for i := range nodes {
		n := &nodes[i]
		f := rcluster.NodeFlavor(n.Labels)
		nodeFlavor[n.Name] = f
		if x := fl[f]; x != nil {
			if w, ok := power[n.Name]; ok {
				if math.IsNaN(x.NodePowerW) {
					x.NodePowerW = 0
				}
				x.NodePowerW += w
			}
		}
	}
	byLabelQueue := map[string]string{}
	for _, r := range s.plan.records {
		byLabelQueue[r.ID] = r.Queue
	}
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		g := kueuewl.PodGPUs(&p.Spec)
		if g == 0 {
			continue
		}
		if id, ok := s.plan.byLabel[p.Namespace+"/"+p.Labels[contract.WorkloadLabel]]; ok {
			if q := cq[byLabelQueue[id]]; q != nil {
				q.InUse += g
			}
		}
		if x := fl[nodeFlavor[p.Spec.NodeName]]; x != nil {
			x.InUse += g
		}
	}
	return out
}
