package main

import (
	"fmt"
	"html"
	"math"
	"strings"
	"time"
)

// Plain SVG, written by hand: no plotting dependency.

var palette = []string{"#1f77b4", "#d62728", "#ff7f0e", "#2ca02c", "#7f7f7f", "#9467bd", "#8c564b"}

// colorOf gives each contender the same colour in every plot.
func colorOf(k kind) string { return palette[int(k)%len(palette)] }

type svgBuf struct{ strings.Builder }

func (b *svgBuf) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }

func svgHeader(b *svgBuf, w, h int, title string) {
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	b.f(`<rect width="100%%" height="100%%" fill="white"/>` + "\n")
	b.f(`<text x="%d" y="20" text-anchor="middle" font-size="14" font-weight="bold">%s</text>`+"\n", w/2, html.EscapeString(title))
}

// axisTicks returns "nice" ticks covering [lo, hi]; log: powers of ten (and 2, 5).
func axisTicks(lo, hi float64, log bool) []float64 {
	var ticks []float64
	if log {
		mults := []float64{1, 2, 5}
		if math.Log10(hi/lo) > 3 {
			mults = []float64{1} // more would crowd the axis
		}
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			for _, m := range mults {
				v := m * math.Pow(10, e)
				if v >= lo*0.999 && v <= hi*1.001 {
					ticks = append(ticks, v)
				}
			}
		}
		return ticks
	}
	span := hi - lo
	step := math.Pow(10, math.Floor(math.Log10(span/5)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(step*m) <= 6 {
			step *= m
			break
		}
	}
	for v := math.Ceil(lo/step) * step; v <= hi*1.0001; v += step {
		ticks = append(ticks, v)
	}
	return ticks
}

// barSeries is one coloured series of a grouped bar chart.
type barSeries struct {
	name   string
	color  string
	values []float64 // by group; NaN: no bar (and a note)
	notes  []string  // by group: text shown instead of a missing bar
}

// barChart draws groups of horizontal bars (one bar per series in a group),
// value labels at the bar ends, log or linear axis.
func barChart(title, unit string, groups []string, series []barSeries, log bool, label func(float64) string) string {
	const w, left, right, top = 820, 190, 110, 50
	barH, gap := 14, 12
	nb := len(series)
	groupH := nb*barH + gap
	h := top + len(groups)*groupH + 60
	var b svgBuf
	svgHeader(&b, w, h, title)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.values {
			if !math.IsNaN(v) && v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	if log {
		lo = math.Pow(10, math.Floor(math.Log10(lo)))
		hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	} else {
		lo = 0
		hi *= 1.05
	}
	pw := float64(w - left - right)
	x := func(v float64) float64 {
		if log {
			if v <= lo {
				return left
			}
			return left + pw*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
		}
		return left + pw*(v-lo)/(hi-lo)
	}
	plotBottom := top + len(groups)*groupH
	for _, t := range axisTicks(math.Max(lo, 1e-12), hi, log) {
		xx := x(t)
		b.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", xx, top-5, xx, plotBottom)
		b.f(`<text x="%.1f" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", xx, plotBottom+15, html.EscapeString(label(t)))
	}
	b.f(`<text x="%d" y="%d" text-anchor="middle" fill="#444">%s</text>`+"\n", left+int(pw)/2, plotBottom+32, html.EscapeString(unit))
	for gi, g := range groups {
		y0 := top + gi*groupH
		b.f(`<text x="%d" y="%d" text-anchor="end" font-weight="bold">%s</text>`+"\n", left-8, y0+nb*barH/2+4, html.EscapeString(g))
		for si, s := range series {
			y := y0 + si*barH
			v := s.values[gi]
			if math.IsNaN(v) || v <= 0 && log {
				note := ""
				if gi < len(s.notes) {
					note = s.notes[gi]
				}
				b.f(`<text x="%d" y="%d" fill="%s" font-size="11">%s: %s</text>`+"\n", left+4, y+barH-3, s.color, html.EscapeString(s.name), html.EscapeString(note))
				continue
			}
			xx := x(v)
			b.f(`<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s: %s</title></rect>`+"\n", left, y+1, math.Max(xx-left, 1), barH-2, s.color, html.EscapeString(s.name), html.EscapeString(label(v)))
			b.f(`<text x="%.1f" y="%d" font-size="11" fill="#222">%s</text>`+"\n", xx+4, y+barH-3, html.EscapeString(label(v)))
		}
	}
	// legend
	lx := left
	for _, s := range series {
		b.f(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, h-18, s.color)
		b.f(`<text x="%d" y="%d">%s</text>`+"\n", lx+16, h-8, html.EscapeString(s.name))
		lx += 24 + 7*len(s.name)
	}
	b.f("</svg>\n")
	return b.String()
}

// cdfLine is one contender's latency samples, sorted.
type cdfLine struct {
	name    string
	color   string
	samples []time.Duration
}

// cdfChart draws latency distributions (x log scale, y 0..100%).
func cdfChart(title string, lines []cdfLine) string {
	const w, h, left, right, top, bottom = 820, 440, 60, 30, 40, 80
	var b svgBuf
	svgHeader(&b, w, h, title)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		if len(l.samples) == 0 {
			continue
		}
		lo = math.Min(lo, float64(l.samples[0]))
		hi = math.Max(hi, float64(pct(l.samples, 99.9)))
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1e4, 1e6
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	x := func(v float64) float64 {
		v = math.Max(v, lo)
		return left + pw*(math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))
	}
	y := func(p float64) float64 { return top + ph*(1-p) }
	for _, t := range axisTicks(lo, hi, true) {
		b.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(t), top, x(t), y(0))
		b.f(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x(t), y(0)+15, fmtDur(time.Duration(t)))
	}
	for _, p := range []float64{0, .25, .5, .75, .9, 1} {
		b.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", left, y(p), w-right, y(p))
		b.f(`<text x="%d" y="%.1f" text-anchor="end" fill="#444">%g%%</text>`+"\n", left-4, y(p)+4, p*100)
	}
	b.f(`<text x="%d" y="%.1f" text-anchor="middle" fill="#444">Lock+Unlock latency (log scale)</text>`+"\n", left+int(pw)/2, y(0)+32)
	for _, l := range lines {
		n := len(l.samples)
		if n == 0 {
			continue
		}
		var pts []string
		step := max(1, n/400)
		for i := 0; i < n; i += step {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(l.samples[i])), y(float64(i+1)/float64(n))))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(l.samples[n-1])), y(1)))
		b.f(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", l.color, strings.Join(pts, " "))
	}
	lx := left
	for _, l := range lines {
		b.f(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, h-22, l.color)
		b.f(`<text x="%d" y="%d">%s</text>`+"\n", lx+16, h-12, html.EscapeString(l.name))
		lx += 24 + 7*len(l.name)
	}
	b.f("</svg>\n")
	return b.String()
}

// xyPoint is one point of an xy series; open points are drawn hollow.
type xyPoint struct {
	x, y float64
	open bool
}

// xySeries is one coloured line of an xy chart.
type xySeries struct {
	name   string
	color  string
	points []xyPoint
}

// refLine is a labelled horizontal line across an xy chart.
type refLine struct {
	y     float64
	label string
}

// xyChart draws lines with markers on log-log axes, and horizontal
// reference lines.
func xyChart(title, xUnit, yUnit string, series []xySeries, refs []refLine, xLabel, yLabel func(float64) string) string {
	const w, h, left, right, top, bottom = 820, 440, 80, 150, 40, 80
	var b svgBuf
	svgHeader(&b, w, h, title)
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.points {
			if p.x > 0 && p.y > 0 {
				xlo, xhi, ylo, yhi = math.Min(xlo, p.x), math.Max(xhi, p.x), math.Min(ylo, p.y), math.Max(yhi, p.y)
			}
		}
	}
	for _, r := range refs {
		ylo, yhi = math.Min(ylo, r.y), math.Max(yhi, r.y)
	}
	if math.IsInf(xlo, 1) || math.IsInf(ylo, 1) {
		return ""
	}
	xlo, xhi = math.Pow(10, math.Floor(math.Log10(xlo))), math.Pow(10, math.Ceil(math.Log10(xhi)))
	ylo, yhi = math.Pow(10, math.Floor(math.Log10(ylo))), math.Pow(10, math.Ceil(math.Log10(yhi)))
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	x := func(v float64) float64 { return left + pw*math.Log10(v/xlo)/math.Log10(xhi/xlo) }
	y := func(v float64) float64 { return top + ph*(1-math.Log10(v/ylo)/math.Log10(yhi/ylo)) }
	for _, t := range axisTicks(xlo, xhi, true) {
		b.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(t), top, x(t), y(ylo))
		b.f(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", x(t), y(ylo)+15, html.EscapeString(xLabel(t)))
	}
	for _, t := range axisTicks(ylo, yhi, true) {
		b.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", left, y(t), w-right, y(t))
		b.f(`<text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n", left-4, y(t)+4, html.EscapeString(yLabel(t)))
	}
	b.f(`<text x="%d" y="%.1f" text-anchor="middle" fill="#444">%s</text>`+"\n", left+int(pw)/2, y(ylo)+32, html.EscapeString(xUnit))
	b.f(`<text x="16" y="%d" text-anchor="middle" fill="#444" transform="rotate(-90 16 %d)">%s</text>`+"\n", top+int(ph)/2, top+int(ph)/2, html.EscapeString(yUnit))
	for _, r := range refs {
		b.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="6,4"/>`+"\n", left, y(r.y), w-right, y(r.y))
		b.f(`<text x="%d" y="%.1f" fill="#333" font-size="11">%s</text>`+"\n", w-right+4, y(r.y)+4, html.EscapeString(r.label))
	}
	for _, s := range series {
		var pts []string
		for _, p := range s.points {
			if p.x <= 0 || p.y <= 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.x), y(p.y)))
			fill := s.color
			if p.open {
				fill = "white"
			}
			b.f(`<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s" stroke-width="2"><title>%s: %s, %s</title></circle>`+"\n", x(p.x), y(p.y), fill, s.color, html.EscapeString(s.name), html.EscapeString(xLabel(p.x)), html.EscapeString(yLabel(p.y)))
		}
		b.f(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", s.color, strings.Join(pts, " "))
	}
	lx := left
	for _, s := range series {
		b.f(`<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, h-22, s.color)
		b.f(`<text x="%d" y="%d">%s</text>`+"\n", lx+16, h-12, html.EscapeString(s.name))
		lx += 24 + 7*len(s.name)
	}
	b.f("</svg>\n")
	return b.String()
}
