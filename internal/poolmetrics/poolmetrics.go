// Package poolmetrics declares the warm pool's Prometheus metrics once,
// for every backend that keeps warm sandboxes (runner/docker's containers,
// runner/kube's Pods): dashboards read the same names whichever runs.
package poolmetrics

import "github.com/prometheus/client_golang/prometheus"

// Metrics are a pool's collectors; a backend increments them.
type Metrics struct {
	Hits, Misses, RefillErrors prometheus.Counter
	Refill                     prometheus.Histogram
}

// New returns a pool's metrics, at zero.
func New() Metrics {
	return Metrics{
		Hits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_hits_total", Help: "Sandboxed runs that took a warm container.",
		}),
		Misses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_misses_total", Help: "Runs of a pooled sandbox that found no warm container and started a cold one.",
		}),
		RefillErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gatekeeper_pool_refill_errors_total", Help: "Failures to make a warm container.",
		}),
		Refill: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gatekeeper_pool_refill_seconds", Help: "Time to create and start one warm container.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4},
		}),
	}
}

// Collectors returns m's collectors and a gauge of the warm sandboxes
// waiting for a run, read from ready.
func (m Metrics) Collectors(ready func() float64) []prometheus.Collector {
	return []prometheus.Collector{m.Hits, m.Misses, m.RefillErrors, m.Refill,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gatekeeper_pool_warm_containers", Help: "Warm containers waiting for a run.",
		}, ready),
	}
}
