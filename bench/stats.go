// Package bench measures gatekeeper against what users would use instead:
// OPA's own REST server for decisions, `docker run --rm` for sandboxed runs.
// Every comparison is a pair measured in the same run, interleaved in
// rounds so that the noise of a shared machine hits both sides; the report
// states ratios, which hold across runs where absolute times drift.
//
// The driver is bench/cmd/bench (run by scripts/bench, `make bench`); the
// decision round trip from the TypeScript client is measured by
// bench/node/decide.mjs, which the driver starts.
package bench

import (
	"math"
	"slices"
	"time"
)

// Summary describes one series of latency samples. Times are in
// milliseconds (fractional) so that decisions and container runs share a unit.
type Summary struct {
	N    int     `json:"n"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Min  float64 `json:"min_ms"`
	Max  float64 `json:"max_ms"`
	Mean float64 `json:"mean_ms"`
}

// Summarize sorts a copy of samples and returns their summary; an empty
// series has N 0 and every field 0.
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{
		N:    len(s),
		P50:  ms(Percentile(s, 50)),
		P90:  ms(Percentile(s, 90)),
		P99:  ms(Percentile(s, 99)),
		Min:  ms(s[0]),
		Max:  ms(s[len(s)-1]),
		Mean: ms(sum / time.Duration(len(s))),
	}
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be sorted ascending and not empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Ratio is a/b, or 0 when b is 0.
func Ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
