package soak

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/bench"
)

// Chart draws the run over time as one SVG, in the style of
// bench.RenderChart: on top the load sessions' decision latency (p50 and
// p99 of each 5 s, log scale), below the sidecar's RSS and goroutines, the
// fault windows shaded and named across both.
func (r *Results) Chart() []byte {
	const (
		w, h                 = 1100, 560
		left, right, top     = 70, 70, 50
		plotH, gap, axisRoom = 190, 70, 26
	)
	span := r.Seconds
	if span <= 0 {
		span = 1
	}
	x0, x1 := float64(left), float64(w-right)
	xOf := func(t float64) float64 { return x0 + t/span*(x1-x0) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold" text-anchor="middle">%s</text>`+"\n", w/2,
		esc(fmt.Sprintf("gatekeeper soak (%s profile, %s): the load, the faults, the sidecar", r.Profile, r.Generated)))

	// Panels: latency on top, resources below.
	ly0, ly1 := float64(top), float64(top+plotH)
	my0, my1 := ly1+gap, ly1+gap+plotH

	// Fault windows, shaded across both panels, named up the top one.
	for _, win := range r.Windows {
		a, z := xOf(win.Start.Sub(r.begin).Seconds()), xOf(win.End.Sub(r.begin).Seconds())
		fill := "#fdebd0"
		if strings.HasPrefix(win.Name, "bad: ") {
			fill = "#e8daef"
		}
		for _, p := range [][2]float64{{ly0, ly1}, {my0, my1}} {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", a, p[0], math.Max(z-a, 1.5), p[1]-p[0], fill)
		}
		name := strings.TrimPrefix(win.Name, "bad: ")
		fmt.Fprintf(&b, `<text transform="translate(%.1f %.1f) rotate(-90)" font-size="10" fill="#7d5a29">%s</text>`+"\n", a+10, ly1-4, esc(name))
	}

	// Latency per 5 s bucket.
	const bucket = 5.0
	n := int(math.Ceil(span / bucket))
	buckets := make([][]time.Duration, n)
	for _, rec := range r.samples {
		if rec.Kind != "decide" || rec.Session < 1 || rec.Reply.Type != "decision" {
			continue
		}
		i := int(rec.Sent.Sub(r.begin).Seconds() / bucket)
		if i >= 0 && i < n {
			buckets[i] = append(buckets[i], rec.Latency())
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	p50s, p99s := make([]float64, n), make([]float64, n)
	for i, bs := range buckets {
		if len(bs) == 0 {
			continue
		}
		s := bench.Summarize(bs)
		p50s[i], p99s[i] = s.P50, s.P99
		lo, hi = math.Min(lo, math.Max(s.P50, 0.01)), math.Max(hi, s.P99)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	lg0, lg1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if lg1 == lg0 {
		lg1++
	}
	yLat := func(v float64) float64 {
		return ly1 - (math.Log10(math.Max(v, math.Pow(10, lg0)))-lg0)/(lg1-lg0)*(ly1-ly0)
	}
	frame(&b, x0, ly0, x1, ly1)
	for k := lg0; k <= lg1; k++ {
		y := yLat(math.Pow(10, k))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc" stroke-dasharray="4,3"/>`+"\n", x0, y, x1, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", x0-5, y+4, esc(bench.FormatMS(math.Pow(10, k))))
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle" fill="#222">decision latency (log)</text>`+"\n", (ly0+ly1)/2)
	line := func(vals []float64, y func(float64) float64, color string, dash bool) {
		var p strings.Builder
		pen := "M"
		for i, v := range vals {
			if v <= 0 {
				pen = "M"
				continue
			}
			fmt.Fprintf(&p, "%s%.1f,%.1f ", pen, xOf((float64(i)+0.5)*bucket), y(v))
			pen = "L"
		}
		d := ""
		if dash {
			d = ` stroke-dasharray="6,3"`
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", p.String(), color, d)
	}
	line(p50s, yLat, "#2e86c1", false)
	line(p99s, yLat, "#c0392b", false)
	legend(&b, x0, ly1+axisRoom+14, []legendItem{{"#2e86c1", false, "p50 of each 5 s"}, {"#c0392b", false, "p99 of each 5 s"}})
	timeAxis(&b, x0, x1, ly1, span, xOf)

	// Resources: RSS (MiB, left axis) and goroutines (right axis).
	rss, gor := make([]float64, 0, len(r.Timeline)), make([]float64, 0, len(r.Timeline))
	ts := make([]float64, 0, len(r.Timeline))
	for _, sm := range r.Timeline {
		ts = append(ts, sm.At.Sub(r.begin).Seconds())
		rss = append(rss, float64(sm.RSS)/(1<<20))
		gor = append(gor, sm.Goroutines)
	}
	maxOf := func(v []float64) float64 {
		if len(v) == 0 {
			return 1
		}
		return niceCeil(slices.Max(v))
	}
	rmax, gmax := maxOf(rss), maxOf(gor)
	yR := func(v float64) float64 { return my1 - v/rmax*(my1-my0) }
	yG := func(v float64) float64 { return my1 - v/gmax*(my1-my0) }
	frame(&b, x0, my0, x1, my1)
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		y := my1 - f*(my1-my0)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc" stroke-dasharray="4,3"/>`+"\n", x0, y, x1, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#1e8449">%.0f</text>`+"\n", x0-5, y+4, f*rmax)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#7d3c98">%.0f</text>`+"\n", x1+5, y+4, f*gmax)
	}
	fmt.Fprintf(&b, `<text transform="translate(18 %.1f) rotate(-90)" text-anchor="middle" fill="#1e8449">RSS (MiB)</text>`+"\n", (my0+my1)/2)
	fmt.Fprintf(&b, `<text transform="translate(%d %.1f) rotate(90)" text-anchor="middle" fill="#7d3c98">goroutines</text>`+"\n", w-14, (my0+my1)/2)
	series := func(vals []float64, y func(float64) float64, color string) {
		var p strings.Builder
		for i, v := range vals {
			pen := "L"
			if i == 0 || ts[i]-ts[i-1] > 3 { // a gap: the sidecar was down
				pen = "M"
			}
			fmt.Fprintf(&p, "%s%.1f,%.1f ", pen, xOf(ts[i]), y(v))
		}
		fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", p.String(), color)
	}
	series(rss, yR, "#1e8449")
	series(gor, yG, "#7d3c98")
	timeAxis(&b, x0, x1, my1, span, xOf)
	legend(&b, x0, my1+axisRoom+14, []legendItem{{"#1e8449", false, "sidecar RSS"}, {"#7d3c98", false, "sidecar goroutines"},
		{"#fdebd0", false, "a fault in force"}, {"#e8daef", false, "a misbehaving client"}})
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

type legendItem struct {
	color string
	dash  bool
	label string
}

func legend(b *strings.Builder, x, y float64, items []legendItem) {
	for _, it := range items {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="6"/>`+"\n", x, y-4, x+22, y-4, it.color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="#222">%s</text>`+"\n", x+28, y, esc(it.label))
		x += 40 + 7*float64(len(it.label))
	}
}

func frame(b *strings.Builder, x0, y0, x1, y1 float64) {
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", x0, y0, x1-x0, y1-y0)
}

func timeAxis(b *strings.Builder, x0, x1, y, span float64, xOf func(float64) float64) {
	step := niceCeil(span / 10)
	for t := 0.0; t <= span; t += step {
		x := xOf(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#999"/>`+"\n", x, y, x, y+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x, y+16, (time.Duration(t) * time.Second).String())
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, f := range []float64{1, 2, 5, 10} {
		if f*p >= v {
			return f * p
		}
	}
	return 10 * p
}

func esc(s string) string { return html.EscapeString(s) }

// LatencyChart draws the load sessions' decision latency during each
// fault against the quiet stretches, as cumulative curves
// (bench.RenderChart): the engine and sidecar faults in one panel, the
// others in a second.
func (r *Results) LatencyChart() []byte {
	colors := []string{"#c0392b", "#e67e22", "#8e44ad", "#16a085", "#2980b9", "#7f8c8d", "#d35400"}
	quiet := r.Phases[0].Name
	panel := func(title string, names func(string) bool) bench.ChartPanel {
		p := bench.ChartPanel{Title: title, Series: []bench.ChartSeries{{Name: "quiet", Color: "#222222", Dashed: true, Samples: r.byPhase[quiet]}}}
		for _, ph := range r.Phases[1:] {
			if names(ph.Name) {
				p.Series = append(p.Series, bench.ChartSeries{Name: strings.TrimPrefix(ph.Name, "bad: "), Color: colors[(len(p.Series)-1)%len(colors)], Samples: r.byPhase[ph.Name]})
			}
		}
		return p
	}
	bad := func(n string) bool { return strings.HasPrefix(n, "bad: ") }
	return bench.RenderChart(fmt.Sprintf("decision latency of the other sessions, by fault (%s profile, %s)", r.Profile, r.Generated), []bench.ChartPanel{
		panel("engine, sidecar, disk and policy faults", func(n string) bool { return !bad(n) }),
		panel("misbehaving clients", bad),
	})
}
