package console

import (
	"math"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Family is one metric family of the registry, for the overview's charts.
type Family struct {
	Name    string   `json:"name"`
	Help    string   `json:"help"`
	Type    string   `json:"type"`
	Metrics []Sample `json:"metrics"`
}

// Sample is one metric: a counter's or gauge's value, or a histogram's
// buckets (cumulative counts by upper bound), count and sum.
type Sample struct {
	Labels  map[string]string `json:"labels,omitempty"`
	Value   float64           `json:"value"`
	Buckets []Bucket          `json:"buckets,omitempty"`
	Count   uint64            `json:"count,omitempty"`
	Sum     float64           `json:"sum,omitempty"`
}

// Bucket is one histogram bucket.
type Bucket struct {
	Le    float64 `json:"le"`
	Count uint64  `json:"count"`
}

// gatherMetrics reads the gatekeeper_ families of g, the same numbers
// /metrics serves.
func gatherMetrics(g prometheus.Gatherer) ([]Family, error) {
	mfs, err := g.Gather()
	var out []Family
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "gatekeeper_") {
			continue
		}
		f := Family{Name: mf.GetName(), Help: mf.GetHelp(), Type: strings.ToLower(mf.GetType().String())}
		for _, m := range mf.GetMetric() {
			f.Metrics = append(f.Metrics, sample(m))
		}
		out = append(out, f)
	}
	return out, err
}

func sample(m *dto.Metric) Sample {
	s := Sample{}
	if len(m.GetLabel()) > 0 {
		s.Labels = map[string]string{}
		for _, l := range m.GetLabel() {
			s.Labels[l.GetName()] = l.GetValue()
		}
	}
	switch {
	case m.Counter != nil:
		s.Value = m.GetCounter().GetValue()
	case m.Gauge != nil:
		s.Value = m.GetGauge().GetValue()
	case m.Histogram != nil:
		h := m.GetHistogram()
		s.Count, s.Sum = h.GetSampleCount(), h.GetSampleSum()
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				s.Buckets = append(s.Buckets, Bucket{Le: b.GetUpperBound(), Count: b.GetCumulativeCount()})
			}
		}
	}
	return s
}
