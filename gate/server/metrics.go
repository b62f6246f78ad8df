package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// metrics are one server's Prometheus collectors, on a registry of its own.
type metrics struct {
	reg         *prometheus.Registry
	decisions   *prometheus.CounterVec
	latency     prometheus.Histogram
	connections prometheus.Gauge
	runs        *prometheus.CounterVec
	queries     prometheus.Gauge
	refusals    *prometheus.CounterVec
	workers     prometheus.Gauge
}

// newMetrics registers the server's collectors on reg (a new registry when
// nil).
func newMetrics(reg *prometheus.Registry) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reg: reg,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatekeeper_decisions_total", Help: "Tool-call decisions by result, rule and event (PreToolUse, canUseTool, a hook's event, or code_call for a program's nested call, the bridge's refusals included).",
		}, []string{"decision", "rule", "event"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gatekeeper_decision_duration_seconds",
			Help:    "Time to decide one tool call, from frame decoded to reply queued.",
			Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2e-3, 5e-3, 10e-3, 50e-3, 250e-3, 1},
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatekeeper_connections_open", Help: "Open WebSocket connections.",
		}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatekeeper_runs_total", Help: "Sandboxed runs by outcome.",
		}, []string{"outcome"}),
		queries: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatekeeper_queries_open", Help: "Open queries, on all connections.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gatekeeper_limit_refusals_total", Help: "Connections and requests refused because a cap was hit, by cap.",
		}, []string{"limit"}),
		workers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gatekeeper_decision_workers", Help: "Decision workers running, on all connections (an idle connection has none).",
		}),
	}
	m.reg.MustRegister(m.decisions, m.latency, m.connections, m.runs, m.queries, m.refusals, m.workers,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// Register adds extra collectors (the runner's pool, the egress proxy) to
// the server's /metrics.
func (s *Server) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// decided counts one decision of event.
func (m *metrics) decided(decision, rule, event string) {
	m.decisions.WithLabelValues(decision, rule, event).Inc()
}

// codeCallCounter is the server's Auditor as a run's nested calls reach
// it: it counts each code_call line's decision in
// gatekeeper_decisions_total under event code_call, the calls the bridge
// refused included (a line of omitted refusals counts each by its rule),
// then writes the line. A call whose line cannot be written counts as
// the deny the program gets.
type codeCallCounter struct {
	Auditor
	m *metrics
}

func (c codeCallCounter) Write(rec audit.Record) error {
	err := c.Auditor.Write(rec)
	if rec.Kind != audit.KindCodeCall {
		return err
	}
	switch {
	case len(rec.Omitted) > 0:
		for rule, n := range rec.Omitted {
			c.m.decisions.WithLabelValues(gate.Deny, rule, gate.EventCodeCall).Add(float64(n))
		}
	case err != nil && rec.Decision != gate.Deny:
		c.m.decided(gate.Deny, gate.RuleError, gate.EventCodeCall)
	default:
		c.m.decided(rec.Decision, rec.Rule, gate.EventCodeCall)
	}
	return err
}
