// Package poolmetrics declares the warm pool's Prometheus metrics once,
// for every backend that keeps warm sandboxes (runner/docker's containers,
// runner/kube's Pods): dashboards read the same names whichever runs.
package poolmetrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a pool's collectors; a backend increments them. A backend
// that does not start interpreters ahead or let runs wait for a sandbox
// being made leaves InterpreterHits, Waits and Wait at zero.
type Metrics struct {
	Hits, InterpreterHits, Waits, Misses, RefillErrors prometheus.Counter
	Refill, Wait                                       prometheus.Histogram
}

// New returns a pool's metrics, at zero.
func New() Metrics {
	return Metrics{
		Hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_hits_total", Help: "Sandboxed runs served by a warm container (at once, or after waiting for one being made).",
		}),
		InterpreterHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_interpreter_hits_total", Help: "Warm runs whose container had started the run's interpreter ahead.",
		}),
		Waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_waits_total", Help: "Warm runs that found no warm container ready and waited for one being made (also counted in hits).",
		}),
		Misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_misses_total", Help: "Runs of a pooled sandbox that found no warm container and started a cold one.",
		}),
		RefillErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_refill_errors_total", Help: "Failures to make a warm container.",
		}),
		Refill: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gatekeeper_pool_refill_seconds", Help: "Time to create and start one warm container, until it said it was ready.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4},
		}),
		Wait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gatekeeper_pool_wait_seconds", Help: "Time a run waited for a warm container being made.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2},
		}),
	}
}

// Collectors returns m's collectors and gauges of the warm sandboxes
// waiting for a run, being made, and aimed at, read from counts.
func (m Metrics) Collectors(counts func() (ready, making, target int)) []prometheus.Collector {
	gauge := func(name, help string, pick func(ready, making, target int) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			return float64(pick(counts()))
		})
	}
	return []prometheus.Collector{m.Hits, m.InterpreterHits, m.Waits, m.Misses, m.RefillErrors, m.Refill, m.Wait,
		gauge("gatekeeper_pool_warm_containers", "Warm containers waiting for a run.", func(r, _, _ int) int { return r }),
		gauge("gatekeeper_pool_making_containers", "Warm containers being made.", func(_, m, _ int) int { return m }),
		gauge("gatekeeper_pool_target_containers", "Warm containers the pool aims to hold, from demand, all sandboxes together.", func(_, _, t int) int { return t }),
	}
}
