package bench

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// ChartSeries is one latency distribution drawn as a cumulative curve.
type ChartSeries struct {
	Name    string
	Color   string
	Dashed  bool
	Samples []time.Duration
}

// ChartPanel is one plot: several series on a shared logarithmic time axis.
type ChartPanel struct {
	Title  string
	Series []ChartSeries
	// Marks are vertical reference lines (targets), in milliseconds.
	Marks []ChartMark
}

// ChartMark is a labelled vertical line.
type ChartMark struct {
	At    float64 // ms
	Label string
}

const (
	panelW, panelH             = 540, 440
	plotL, plotR, plotT, plotB = 62, 18, 46, 150 // margins inside a panel
)

// RenderChart draws the panels side by side as one SVG: for each series
// the latency (x, log scale) at each percentile (y, stretched towards the
// tail so that p90, p99 and p99.9 get as much room as the bulk), with p50
// and p99 marked, so a reader sees medians, tails and their gaps at a
// glance.
func RenderChart(title string, panels []ChartPanel) []byte {
	var b strings.Builder
	w := panelW * len(panels)
	h := panelH + 30
	for _, p := range panels { // room for legends of more than six series
		h = max(h, panelH+30+16*(len(p.Series)-6))
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n", w/2, esc(title))
	for i, p := range panels {
		renderPanel(&b, float64(i*panelW), 30, p)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func renderPanel(b *strings.Builder, ox, oy float64, p ChartPanel) {
	x0, x1 := ox+plotL, ox+panelW-plotR
	y0, y1 := oy+plotT, oy+panelH-plotB // top, bottom of the plot area
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" font-size="13" font-weight="bold" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, oy+22, esc(p.Title))

	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, d := range s.Samples {
			v := ms(d)
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	for _, m := range p.Marks {
		lo, hi = math.Min(lo, m.At), math.Max(hi, m.At)
	}
	if math.IsInf(lo, 1) {
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#666">no samples</text>`+"\n", (x0+x1)/2, (y0+y1)/2)
		return
	}
	lg0, lg1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if lg1 == lg0 {
		lg1++
	}
	xOf := func(v float64) float64 { return x0 + (math.Log10(v)-lg0)/(lg1-lg0)*(x1-x0) }
	yOf := func(q float64) float64 { return y1 - tailScale(q)*(y1-y0) }

	// Frame and grid. With many decades only the powers of ten are labelled.
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, y0, x1-x0, y1-y0)
	for k := lg0; k <= lg1; k++ {
		for _, f := range []float64{1, 2, 5} {
			v := f * math.Pow(10, k)
			if math.Log10(v) > lg1+1e-9 {
				continue
			}
			x := xOf(v)
			stroke, dash := "#ddd", ` stroke-dasharray="2,3"`
			if f == 1 {
				stroke, dash = "#bbb", ""
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"%s/>`+"\n", x, y0, x, y1, stroke, dash)
			if f == 1 || lg1-lg0 <= 3 {
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x, y1+15, esc(fmtTick(v)))
			}
		}
	}
	for _, q := range []struct {
		v     float64
		label string
	}{{0, "0"}, {0.25, "p25"}, {0.5, "p50"}, {0.9, "p90"}, {0.99, "p99"}, {0.999, "p99.9"}} {
		y := yOf(q.v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc" stroke-dasharray="4,3"/>`+"\n", x0, y, x1, y)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", x0-5, y+4, q.label)
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#222">latency (log scale)</text>`+"\n", (x0+x1)/2, y1+32)
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle" fill="#222">percentile (tail stretched)</text>`+"\n", ox+14, (y0+y1)/2)
	for _, m := range p.Marks {
		x := xOf(m.At)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e67e22" stroke-width="1.5" stroke-dasharray="6,3"/>`+"\n", x, y0, x, y1)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#e67e22" font-size="11">%s</text>`+"\n", x-3, y0+12, esc(m.Label))
	}

	// Curves.
	for i, s := range p.Series {
		if len(s.Samples) == 0 {
			continue
		}
		sorted := slices.Clone(s.Samples)
		slices.Sort(sorted)
		n := len(sorted)
		// A step curve through nearest-rank percentiles, on a grid even in
		// the stretched scale, so that the marks below sit on it.
		at := func(q float64) float64 { return math.Max(ms(Percentile(sorted, q*100)), math.Pow(10, lg0)) }
		var path strings.Builder
		fmt.Fprintf(&path, "M%.1f,%.1f", xOf(at(1e-9)), yOf(0))
		for _, q := range quantileGrid() {
			x := xOf(at(q))
			fmt.Fprintf(&path, " H%.1f V%.1f", x, yOf(q))
		}
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="7,4"`
		}
		fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", path.String(), s.Color, dash)
		p50, p99 := ms(Percentile(sorted, 50)), ms(Percentile(sorted, 99))
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", xOf(p50), yOf(0.5), s.Color)
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="#fff" stroke="%s" stroke-width="2"/>`+"\n", xOf(p99), yOf(0.99), s.Color)

		ly := y1 + 52 + float64(i)*16
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", x0, ly-4, x0+26, ly-4, s.Color, dash)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#222">%s — p50 %s, p99 %s (n=%d)</text>`+"\n", x0+32, ly, esc(s.Name), esc(FormatMS(p50)), esc(FormatMS(p99)), n)
	}
}

// quantileGrid is 300 quantiles evenly spaced in tailScale, with p50 and
// p99 exactly, ending at 1.
func quantileGrid() []float64 {
	const k = 300
	qs := []float64{0.5, 0.99, 1}
	for i := 1; i < k; i++ {
		t := float64(i) / k
		if t <= 0.3 {
			qs = append(qs, t/0.3*0.5)
		} else {
			qs = append(qs, 1-math.Pow(10, -((t-0.3)/0.7*(3-math.Log10(2))+math.Log10(2))))
		}
	}
	slices.Sort(qs)
	return slices.Compact(qs)
}

// tailScale maps a quantile to the plot's height: linear up to the median
// (the bottom 30%), then logarithmic in 1-q so that the tail gets room:
// p90 → 0.48, p99 → 0.74, p99.9 and above → 1.
func tailScale(q float64) float64 {
	if q <= 0.5 {
		return 0.3 * q / 0.5
	}
	return 0.3 + 0.7*(-math.Log10(1-math.Min(q, 0.999))-math.Log10(2))/(3-math.Log10(2))
}

func fmtTick(v float64) string {
	switch {
	case v < 1:
		return trimFloat(v*1000) + " µs"
	case v < 1000:
		return trimFloat(v) + " ms"
	default:
		return trimFloat(v/1000) + " s"
	}
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// FormatMS prints a time in milliseconds readably: µs under 1 ms, ms above.
func FormatMS(v float64) string {
	switch {
	case v <= 0:
		return "0"
	case v < 0.01:
		return fmt.Sprintf("%.2f µs", v*1000)
	case v < 1:
		return fmt.Sprintf("%.0f µs", v*1000)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.0f ms", v)
	}
}

func esc(s string) string { return html.EscapeString(s) }
