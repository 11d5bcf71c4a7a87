package agent

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics live in the agent's own registry, so two agents in one process do not collide.
type metrics struct {
	reg          *prometheus.Registry
	nodePower    *prometheus.GaugeVec
	nodeEnergy   *prometheus.CounterVec
	progressing  prometheus.Gauge
	running      prometheus.Gauge
	gangBlocked  prometheus.Gauge
	gangReports  prometheus.Counter
	traceSec     prometheus.Gauge
	tickDuration prometheus.Histogram
	completions  *prometheus.CounterVec
	writeErrors  prometheus.Counter
	badPods      prometheus.Counter
	lostEnergy   prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		nodePower: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kueuelab_node_power_watts",
			Help: "Simulated node power (CPU + GPUs + platform) during the last tick."}, []string{"node"}),
		nodeEnergy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kueuelab_node_energy_joules_total",
			Help: "Simulated node energy integrated over trace time."}, []string{"node"}),
		progressing: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kueuelab_pods_progressing",
			Help: "Pods whose work advanced during the last tick."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kueuelab_pods_running",
			Help: "Running simulated pods that have work left."}),
		gangBlocked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kueuelab_gang_blocked_pods",
			Help: "Running pods waiting for the rest of their gang."}),
		gangReports: prometheus.NewCounter(prometheus.CounterOpts{Name: "kueuelab_gang_blocked_reports_total",
			Help: "Gangs reported as blocked longer than the threshold (one per blocking episode)."}),
		traceSec: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kueuelab_trace_seconds",
			Help: "Trace time simulated by this agent since it started."}),
		tickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kueuelab_tick_duration_seconds",
			Help: "Wall time of one simulation tick.", Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10)}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kueuelab_completions_total",
			Help: "Pod completions written, by result (succeeded, failed)."}, []string{"result"}),
		writeErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kueuelab_write_errors_total",
			Help: "Failed pod writes (each retry counts)."}),
		badPods: prometheus.NewCounter(prometheus.CounterOpts{Name: "kueuelab_bad_pods_total",
			Help: "Pods ignored because their annotations break the render contract."}),
		lostEnergy: prometheus.NewCounter(prometheus.CounterOpts{Name: "kueuelab_lost_energy_joules_total",
			Help: "Energy of pods that left before finishing (deleted, evicted, preempted), which no completion write reports."}),
	}
	m.reg.MustRegister(m.nodePower, m.nodeEnergy, m.progressing, m.running, m.gangBlocked, m.gangReports, m.traceSec,
		m.tickDuration, m.completions, m.writeErrors, m.badPods, m.lostEnergy,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
