package decisionlog

import "github.com/prometheus/client_golang/prometheus"

// metrics are the shipper's Prometheus collectors (Collectors).
type metrics struct {
	backlog     prometheus.GaugeFunc
	shipped     prometheus.Counter
	dropped     prometheus.Counter
	failed      prometheus.Counter
	lastSuccess prometheus.Gauge
}

func newMetrics(s *Shipper) *metrics {
	return &metrics{
		backlog: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gatekeeper_decision_log_backlog", Help: "Audit lines not yet acknowledged by the decision-log receiver.",
		}, func() float64 { return float64(s.Backlog()) }),
		shipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_decision_log_shipped_total", Help: "Audit lines the decision-log receiver acknowledged.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_decision_log_dropped_total", Help: "Audit lines never shipped (backlog past its bound under --decision-log-overflow drop, or removed by --audit-keep first), each counted in a decision_log audit line.",
		}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_decision_log_failed_attempts_total", Help: "POSTs to the decision-log receiver that got no 2xx.",
		}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatekeeper_decision_log_last_success_timestamp_seconds", Help: "When the decision-log receiver last acknowledged a batch (Unix time).",
		}),
	}
}

// Collectors are the shipper's metrics, for the server's registry.
func (s *Shipper) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.m.backlog, s.m.shipped, s.m.dropped, s.m.failed, s.m.lastSuccess}
}
