package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The report's plots, drawn with gonum.org/v1/plot and written as SVG.

var palette = []color.Color{rgb(0x1f77b4), rgb(0xd62728), rgb(0xff7f0e), rgb(0x2ca02c), rgb(0x7f7f7f), rgb(0x9467bd), rgb(0x8c564b)}

func rgb(v uint32) color.Color { return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255} }

// colorOf gives each contender the same colour in every plot.
func colorOf(k kind) color.Color { return palette[int(k)%len(palette)] }

// renderPlots is every plot the run has data for, as SVG by file name.
func renderPlots(res *results) (map[string][]byte, error) {
	figs := map[string]*figure{}
	durLabel := func(v float64) string { return fmtDur(time.Duration(v)) }
	rate := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	if u := res.Unc; u != nil {
		var lines []cdfLine
		var ser []barSeries
		for _, r := range u.Results {
			lines = append(lines, cdfLine{r.Kind.String(), colorOf(r.Kind), r.Lat})
			ser = append(ser, barSeries{name: r.Kind.String(), color: colorOf(r.Kind), values: []float64{r.Mallocs, float64(r.Cpu) / 1e3, float64(r.Srv) / 1e3}})
		}
		figs["uncontended-cdf.svg"] = cdfChart("Uncontended Lock+Unlock latency, 5 nodes (redislock: 1 node)", lines)
		figs["uncontended-cost.svg"] = barChart("Cost per uncontended Lock+Unlock", "allocations / client CPU µs / server CPU µs (all nodes)", []string{"allocs/op", "client CPU µs/op", "server CPU µs/op"}, ser, false, fmtNum)
	}
	if ts := res.Tput; ts != nil {
		var ser []barSeries
		for _, t := range ts {
			ser = append(ser, barSeries{name: t.Kind.String(), color: colorOf(t.Kind), values: []float64{t.median()}})
		}
		figs["throughput.svg"] = barChart("Throughput, 32 goroutines, distinct keys", "Lock+Unlock per second (median of rounds)", []string{"ops/s"}, ser, false, rate)
	}
	if c := res.Curve; c != nil && len(c.Points) > 0 {
		figs["throughput-curve.svg"] = tputCurvePlot(c)
	}
	if res.Barge != nil && res.Handoff != nil {
		var ser, gser []barSeries
		for _, k := range allKinds {
			b, h := find(res.Barge, k), find(res.Handoff, k)
			if b == nil || h == nil {
				continue
			}
			ser = append(ser, barSeries{name: k.String(), color: colorOf(k), values: []float64{b.median(), h.median()}})
			gser = append(gser, barSeries{name: k.String(), color: colorOf(k), values: []float64{
				float64(pct(b.Gaps, 50)), float64(pct(b.Gaps, 99)), float64(pct(h.Gaps, 50)), float64(pct(h.Gaps, 99))}})
		}
		figs["contended.svg"] = barChart("Contended: 8 goroutines in 2 clients, one key, 1 ms critical section", "acquisitions per second (log scale)", []string{"barge", "handoff"}, ser, true, rate)
		figs["handoff-gap.svg"] = barChart("Handoff gap: Unlock called → next Lock returns", "log scale", []string{"barge p50", "barge p99", "handoff p50", "handoff p99"}, gser, true, durLabel)
	}
	if res.Slow != nil || res.Paused != nil || res.Dead != nil {
		figs["faults.svg"] = faultsChart(res)
	}
	if s := res.Scale; s != nil && len(s.Curve) > 0 {
		figs["scale-curve.svg"] = scaleCurvePlot(s)
	}
	if hs := res.Herd; hs != nil {
		var ser []barSeries
		for _, h := range hs {
			ser = append(ser, barSeries{name: h.Kind.String(), color: colorOf(h.Kind), values: []float64{h.AcqPerSec, h.Attempts}})
		}
		figs["herd.svg"] = barChart("Herd: 64 waiters in 4 clients on one key", "log scale", []string{"acquisitions/s", "attempts per acquisition"}, ser, true, fmtNum)
	}
	out := map[string][]byte{}
	for name, f := range figs {
		b, err := f.svg()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = b
	}
	return out, nil
}

// faultsChart is the p50 of every contender, healthy and under each fault.
func faultsChart(res *results) *figure {
	scs := []*seqScenario{res.Unc, res.Slow, res.Paused, res.Dead}
	var ser []barSeries
	for _, k := range allKinds {
		s := barSeries{name: k.String(), color: colorOf(k)}
		for _, sc := range scs {
			v, note := math.NaN(), "not run"
			if sc != nil {
				if r := sc.get(k); r != nil && len(r.Lat) > 0 {
					v = float64(pct(r.Lat, 50))
				} else if r != nil && r.TimedOut {
					note = "timed out (hangs)"
				}
			}
			s.values = append(s.values, v)
			s.notes = append(s.notes, note)
		}
		ser = append(ser, s)
	}
	return barChart("Uncontended p50 with a minority of nodes slow (+20 ms each way), paused or dead", "Lock+Unlock p50 (log scale)",
		[]string{"healthy", "slow minority", "paused minority", "dead minority"}, ser, true, func(v float64) string { return fmtDur(time.Duration(v)) })
}

// scaleCurvePlot draws the curve's levels: holds against the renewal CPU
// per period and the longest wait for a renewal; a level that did not fit
// is drawn hollow.
func scaleCurvePlot(s *scaleResult) *figure {
	var xys [2]plotter.XYs
	var open [2][]bool
	for _, r := range s.Curve {
		for i, y := range []time.Duration{r.perPeriod(r.ClientCPU + r.ServerCPU), pct(r.Delays, 100)} {
			if y > 0 { // a log axis has no 0
				xys[i] = append(xys[i], plotter.XY{X: float64(r.Holds), Y: float64(y)})
				open[i] = append(open[i], !r.fits())
			}
		}
	}
	period := s.Curve[0].Period
	f := newFigure(fmt.Sprintf("Watchdog holds in one client, lease %v: renewal time per %v period (log scale)", s.Curve[0].Lease, period), 440)
	p := f.p
	p.X.Label.Text = "holds (log scale); hollow: renewals no longer fit" // a Y label would squeeze a log axis (plot v0.17)
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = labelTicks{plot.LogTicks{}, func(v float64) string { return holdsLabel(int(v)) }}
	p.Y.Tick.Marker = labelTicks{plot.LogTicks{}, func(v float64) string { return fmtDur(time.Duration(v)) }}
	for i, name := range []string{"renewal CPU per period (client + server)", "renewal seen after its start, max"} {
		if len(xys[i]) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys[i])
		if err != nil {
			return f.fail(err)
		}
		line.Color, line.Width = palette[i], vg.Points(1.5)
		points.GlyphStyleFunc = func(j int) draw.GlyphStyle {
			g := draw.GlyphStyle{Color: palette[i], Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
			if open[i][j] {
				g.Shape = draw.RingGlyph{}
			}
			return g
		}
		p.Add(line, points)
		f.legend.Add(name, line, points)
	}
	lo, hi := float64(s.Curve[0].Holds), float64(s.Curve[len(s.Curve)-1].Holds)
	for _, ref := range []struct {
		y    time.Duration
		name string
	}{{period, "the period (" + period.String() + ")"}, {time.Duration(s.Nproc) * period, fmt.Sprintf("%d CPUs × the period", s.Nproc)}} {
		line, err := plotter.NewLine(plotter.XYs{{X: lo, Y: float64(ref.y)}, {X: hi, Y: float64(ref.y)}})
		if err != nil {
			return f.fail(err)
		}
		line.Color, line.Dashes = color.Gray{0x55}, []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(line)
		f.legend.Add(ref.name, line)
	}
	p.Add(plotter.NewGrid())
	widenLog(&p.X)
	widenLog(&p.Y)
	return f
}

// tputCurvePlot draws the scaling curve: ops/s against goroutines, a line
// per contender.
func tputCurvePlot(c *curveResult) *figure {
	f := newFigure("Throughput against goroutines, distinct keys, 5 nodes", 400)
	p := f.p
	p.X.Label.Text = "goroutines (log scale)" // a Y label would squeeze the plot (plot v0.17)
	p.X.Scale = plot.LogScale{}
	var ticks plot.ConstantTicks
	for _, pt := range c.Points {
		ticks = append(ticks, plot.Tick{Value: float64(pt.Goroutines), Label: fmt.Sprint(pt.Goroutines)})
	}
	p.X.Tick.Marker = ticks
	p.Y.Min = 0
	p.Y.Tick.Marker = labelTicks{plot.DefaultTicks{}, func(v float64) string { return fmt.Sprintf("%.0f/s", v) }}
	for _, k := range []kind{kRedlock, kFloorPipe} {
		var xys plotter.XYs
		for _, pt := range c.Points {
			if t := pt.of(k); t != nil && !t.TimedOut && len(t.OpsSec) > 0 {
				xys = append(xys, plotter.XY{X: float64(pt.Goroutines), Y: t.median()})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return f.fail(err)
		}
		line.Color, line.Width = colorOf(k), vg.Points(1.5)
		points.Color, points.Radius, points.Shape = colorOf(k), vg.Points(3), draw.CircleGlyph{}
		p.Add(line, points)
		f.legend.Add(k.String()+" ops/s", line, points)
	}
	p.Add(plotter.NewGrid())
	if n := len(c.Points); n > 0 {
		p.X.Min, p.X.Max = float64(c.Points[0].Goroutines)/1.3, float64(c.Points[n-1].Goroutines)*1.3
	}
	return f
}

// widenLog moves a log axis's ends out to powers of ten.
func widenLog(a *plot.Axis) {
	a.Min, a.Max = math.Pow(10, math.Floor(math.Log10(a.Min))), math.Pow(10, math.Ceil(math.Log10(a.Max)))
}

// figure is a plot with its legend, drawn to the right of it.
type figure struct {
	title  string // across the whole figure, legend and all
	p      *plot.Plot
	legend plot.Legend
	h      vg.Length // in pixels of the old plots: 820 wide
	right  vg.Length // room right of the data, for the bars' labels
	err    error
}

func newFigure(title string, h vg.Length) *figure {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
	f := &figure{title: title, p: plot.New(), legend: plot.NewLegend(), h: h}
	f.legend.Top, f.legend.Left = true, true
	f.legend.TextStyle.Font.Size = vg.Points(9)
	f.p.X.Label.TextStyle.Font.Size = vg.Points(10)
	f.p.X.Tick.Label.Font.Size, f.p.Y.Tick.Label.Font.Size = vg.Points(9), vg.Points(9)
	return f
}

func (f *figure) fail(err error) *figure {
	f.err = err
	return f
}

// svg draws the figure: 820 × h pixels.
func (f *figure) svg() ([]byte, error) {
	if f.err != nil {
		return nil, f.err
	}
	const px = vg.Inch / 96
	c := vgsvg.New(820*px, f.h*px)
	dc := draw.New(c)
	dc = draw.Crop(dc, 24*px, -8*px, 8*px, -8*px) // room for a wider fallback font
	title := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 11), XAlign: draw.XCenter, YAlign: draw.YTop, Handler: f.p.TextHandler}
	dc.FillText(title, vg.Point{X: dc.Center().X, Y: dc.Max.Y}, f.title)
	dc.Max.Y -= title.Height(f.title) + 10*px
	lw := f.legend.Rectangle(dc).Size().X*1.15 + 10*px // a viewer without Liberation Sans draws wider
	f.p.Draw(draw.Crop(dc, 0, -(lw + f.right*px), 0, 0))
	f.legend.Draw(draw.Crop(dc, dc.Max.X-dc.Min.X-lw+10*px, 0, 0, 0))
	var b bytes.Buffer
	_, err := c.WriteTo(&b)
	return b.Bytes(), err
}

// labelTicks names the labelled ticks of a Ticker with name.
type labelTicks struct {
	plot.Ticker
	name func(float64) string
}

func (t labelTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := t.Ticker.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = t.name(ts[i].Value)
		}
	}
	return ts
}

// barSeries is one coloured series of a grouped bar chart.
type barSeries struct {
	name   string
	color  color.Color
	values []float64 // by group; NaN: no bar (and a note)
	notes  []string  // by group: text shown instead of a missing bar
}

// barChart draws groups of horizontal bars (one bar per series in a
// group), top to bottom, with their values at the bars' ends, on a log or
// linear axis.
func barChart(title, unit string, groups []string, series []barSeries, log bool, label func(float64) string) *figure {
	f := newFigure(title, vg.Length(110+len(groups)*(len(series)*14+12)))
	f.right = 70
	p := f.p
	p.X.Label.Text = unit
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	p.X.Min, p.X.Max = 0, hi*1.05
	p.X.Tick.Marker = labelTicks{plot.DefaultTicks{}, label}
	if log {
		p.X.Min, p.X.Max = lo, hi
		widenLog(&p.X)
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, labelTicks{plot.LogTicks{}, label}
	}
	n, step := float64(len(groups)), 0.8/float64(len(series))
	p.Y.Min, p.Y.Max = -0.5, n-0.5
	var ticks plot.ConstantTicks
	for gi, g := range groups {
		ticks = append(ticks, plot.Tick{Value: n - 1 - float64(gi), Label: g})
	}
	p.Y.Tick.Marker, p.Y.Tick.Length = ticks, 0
	grid := plotter.NewGrid()
	grid.Horizontal.Color = nil
	p.Add(grid)
	for si, s := range series {
		b := &hbars{series: s, label: label, half: step * 0.45}
		for gi := range groups {
			b.ys = append(b.ys, n-1-float64(gi)+0.4-step*(float64(si)+0.5))
		}
		p.Add(b)
		f.legend.Add(s.name, b)
	}
	return f
}

// hbars draws one series of a bar chart: a bar from the axis's left end
// to each value, labelled with it, or the series' note where the value is
// missing.
type hbars struct {
	series barSeries
	label  func(float64) string
	ys     []float64 // the bars' centres, by group
	half   float64   // half a bar's thickness
}

func (b *hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := text.Style{Color: color.Gray{0x22}, Font: font.From(plot.DefaultFont, 8.5), YAlign: draw.YCenter, Handler: p.TextHandler}
	for i, v := range b.series.values {
		y0, y1, y := trY(b.ys[i]-b.half), trY(b.ys[i]+b.half), trY(b.ys[i])
		if math.IsNaN(v) || v <= 0 {
			note := ""
			if i < len(b.series.notes) {
				note = b.series.notes[i]
			}
			sty.Color = b.series.color
			c.FillText(sty, vg.Point{X: c.Min.X + 3, Y: y}, b.series.name+": "+note)
			sty.Color = color.Gray{0x22}
			continue
		}
		x := trX(v)
		c.FillPolygon(b.series.color, []vg.Point{{X: c.Min.X, Y: y0}, {X: x, Y: y0}, {X: x, Y: y1}, {X: c.Min.X, Y: y1}})
		c.FillText(sty, vg.Point{X: x + 3, Y: y}, b.label(v))
	}
}

func (b *hbars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.series.color, []vg.Point{c.Min, {X: c.Min.X, Y: c.Max.Y}, c.Max, {X: c.Max.X, Y: c.Min.Y}})
}

// cdfLine is one contender's latency samples, sorted.
type cdfLine struct {
	name    string
	color   color.Color
	samples []time.Duration
}

// cdfChart draws latency distributions (x log scale, y 0..100%).
func cdfChart(title string, lines []cdfLine) *figure {
	f := newFigure(title, 440)
	p := f.p
	p.X.Label.Text = "Lock+Unlock latency (log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = labelTicks{plot.LogTicks{}, func(v float64) string { return fmtDur(time.Duration(v)) }}
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0%"}, {Value: .25, Label: "25%"}, {Value: .5, Label: "50%"}, {Value: .75, Label: "75%"}, {Value: .9, Label: "90%"}, {Value: 1, Label: "100%"}}
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		n := len(l.samples)
		if n == 0 {
			continue
		}
		lo, hi = math.Min(lo, float64(l.samples[0])), math.Max(hi, float64(pct(l.samples, 99.9)))
		var xys plotter.XYs
		for i := 0; i < n; i += max(1, n/400) {
			xys = append(xys, plotter.XY{X: float64(l.samples[i]), Y: float64(i+1) / float64(n)})
		}
		xys = append(xys, plotter.XY{X: float64(l.samples[n-1]), Y: 1})
		line, err := plotter.NewLine(xys)
		if err != nil {
			return f.fail(err)
		}
		line.Color, line.Width = l.color, vg.Points(1.5)
		p.Add(line)
		f.legend.Add(l.name, line)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1e4, 1e6
	}
	p.X.Min, p.X.Max = lo, hi
	widenLog(&p.X)
	return f
}
