package sandbox

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the warm pool's collectors, declared once for every
// platform: dashboards read the same names whichever runs.
type Metrics struct {
	Hits, InterpreterHits, Waits, Misses, RefillErrors prometheus.Counter
	Refill, Wait                                       prometheus.Histogram
}

// newMetrics returns a pool's metrics, at zero.
func newMetrics() Metrics {
	return Metrics{
		Hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_hits_total", Help: "Sandboxed runs served by a warm sandbox (at once, or after waiting for one being made).",
		}),
		InterpreterHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_interpreter_hits_total", Help: "Warm runs whose sandbox had started the run's interpreter ahead.",
		}),
		Waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_waits_total", Help: "Warm runs that found no warm sandbox ready and waited for one being made (also counted in hits).",
		}),
		Misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_misses_total", Help: "Runs of a pooled sandbox that found no warm sandbox and started a cold one.",
		}),
		RefillErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_refill_errors_total", Help: "Failures to make a warm sandbox.",
		}),
		Refill: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gatekeeper_pool_refill_seconds", Help: "Time to create and start one warm sandbox, until it said it was ready.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4},
		}),
		Wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gatekeeper_pool_wait_seconds", Help: "Time a run waited for a warm sandbox being made.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2},
		}),
	}
}

// Collectors returns m's collectors and gauges of the warm sandboxes
// waiting for a run, being made, and aimed at, read from counts.
func (m Metrics) collectors(counts func() (ready, making, target int)) []prometheus.Collector {
	gauge := func(name, help string, pick func(ready, making, target int) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			return float64(pick(counts()))
		})
	}
	return []prometheus.Collector{m.Hits, m.InterpreterHits, m.Waits, m.Misses, m.RefillErrors, m.Refill, m.Wait,
		gauge("gatekeeper_pool_warm_containers", "Warm sandboxes waiting for a run.", func(r, _, _ int) int { return r }),
		gauge("gatekeeper_pool_making_containers", "Warm sandboxes being made.", func(_, m, _ int) int { return m }),
		gauge("gatekeeper_pool_target_containers", "Warm sandboxes the pool aims to hold, from demand, all sandboxes together.", func(_, _, t int) int { return t }),
	}
}
