package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fleetrpc/fleet/bench/peers"
)

// chartColors are distinct colors for the peers of the default set, in
// their order (Tableau 10, then two more); variants take them in turn
// after those.
var chartColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff}, color.RGBA{0x00, 0x00, 0x00, 0xff}, color.RGBA{0xff, 0xbb, 0x78, 0xff},
}

// peerColor gives each peer the same color in every chart: the peers of
// the default set distinct colors in report order, the variants the next
// ones.
func peerColor(name string) color.Color {
	var names []string
	for _, p := range peers.Default() {
		names = append(names, p.Name)
	}
	for _, p := range peers.All() {
		if p.Variant {
			names = append(names, p.Name)
		}
	}
	i := slices.Index(names, name)
	if i < 0 {
		i = len(names)
	}
	return chartColors[i%len(chartColors)]
}

func peerStyle(name string) (draw.LineStyle, draw.GlyphStyle) {
	i := max(slices.Index(peers.Order, name), 0)
	c := peerColor(name)
	ls := draw.LineStyle{Color: c, Width: vg.Points(1.5)}
	if name == peers.Fleet {
		ls.Width = vg.Points(2.5)
	}
	if name == peers.Raw || name == peers.GobStream {
		ls.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	return ls, draw.GlyphStyle{Color: c, Radius: vg.Points(2.5), Shape: plotutil.Shape(i)}
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// charts draws the PNG charts into dir and returns their paths.
func (r *runner) charts(dir string) ([]string, error) {
	var files []string
	save := func(p *plot.Plot, name string, w, h vg.Length) error {
		path := filepath.Join(dir, name)
		if err := p.Save(w, h, path); err != nil {
			return err
		}
		files = append(files, path)
		return nil
	}
	rep := r.rep

	// Echo throughput against callers, one chart per connection count.
	for _, conns := range r.set.EchoConns {
		p := newPlot(fmt.Sprintf("Echo of the 581-byte message over %d connection(s)", conns), "concurrent callers", "calls/s (log scale)")
		p.X.Scale = plot.LogScale{}
		var ticks []plot.Tick
		for _, c := range r.set.EchoCallers {
			ticks = append(ticks, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		n := 0
		for _, pi := range rep.Peers {
			var xys plotter.XYs
			for _, e := range rep.Echo {
				if e.Peer == pi.Name && e.Conns == conns && e.Throughput > 0 {
					xys = append(xys, plotter.XY{X: float64(e.Callers), Y: e.Throughput})
				}
			}
			if len(xys) == 0 {
				continue
			}
			if err := addLine(p, pi, xys); err != nil {
				return files, err
			}
			n++
		}
		if n > 0 {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = commaTicks{plot.LogTicks{Prec: -1}}
			if err := save(p, fmt.Sprintf("echo-throughput-%dconn.png", conns), 8*vg.Inch, 5*vg.Inch); err != nil {
				return files, err
			}
		}
	}

	// Echo latency percentiles over one connection, one chart per number
	// of callers.
	nines := func(pct float64) float64 {
		if pct >= 100 {
			return 5
		}
		return -math.Log10(1 - pct/100)
	}
	for _, callers := range r.set.EchoCallers {
		p := newPlot(fmt.Sprintf("Echo latency, 1 connection, %d callers", callers), "percentile", "latency (ms, log scale)")
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Tick.Marker = plot.ConstantTicks{
			{Value: nines(50), Label: "50%"}, {Value: nines(90), Label: "90%"}, {Value: nines(99), Label: "99%"},
			{Value: nines(99.9), Label: "99.9%"}, {Value: nines(99.99), Label: "99.99%"}, {Value: nines(100), Label: "max"},
		}
		n := 0
		for _, pi := range rep.Peers {
			e, ok := r.echoRow(pi.Name, 1, callers)
			if !ok || len(e.Latency.Curve) != len(curvePercentiles) {
				continue
			}
			var xys plotter.XYs
			for i, pct := range curvePercentiles {
				if pct < 50 || e.Latency.Curve[i] <= 0 {
					continue
				}
				xys = append(xys, plotter.XY{X: nines(pct), Y: float64(e.Latency.Curve[i]) / 1e6})
			}
			if err := addLine(p, pi, xys); err != nil {
				return files, err
			}
			n++
		}
		if n > 0 {
			p.Legend.Top, p.Legend.Left = true, true
			if err := save(p, fmt.Sprintf("echo-latency-1conn-%d.png", callers), 8*vg.Inch, 5*vg.Inch); err != nil {
				return files, err
			}
		}
	}

	// MathService.Add: calls/s per test.
	if len(rep.Math) > 0 {
		var groups []string
		var keys []func(MathResult) bool
		for i, n := range r.set.MathLong {
			groups = append(groups, fmt.Sprintf("long conn, %s calls", num(float64(n))))
			idx := i
			keys = append(keys, func(m MathResult) bool { return m.Test == "long" && r.longIndex(m) == idx })
		}
		groups = append(groups, "short conns", fmt.Sprintf("%d processes", r.set.MathProcs))
		keys = append(keys, func(m MathResult) bool { return m.Test == "short" }, func(m MathResult) bool { return m.Test == "procs" })
		p := newPlot("MathService.Add", "", "calls/s")
		err := r.groupedBars(p, groups, func(peer string, g int) (float64, bool) {
			for _, m := range rep.Math {
				if m.Peer == peer && keys[g](m) {
					return m.Throughput, true
				}
			}
			return 0, false
		})
		if err != nil {
			return files, err
		}
		if err := save(p, "math.png", 9*vg.Inch, 5*vg.Inch); err != nil {
			return files, err
		}
	}

	// Handler latency: ratio to the Little's-law limit.
	if len(rep.Latency) > 0 {
		var groups []string
		type gk struct {
			sleep   int64
			callers int
		}
		var gks []gk
		for _, s := range r.set.LatencySleeps {
			for _, c := range r.set.LatencyCallers {
				groups = append(groups, fmt.Sprintf("%s, %d callers", sleepString(s), c))
				gks = append(gks, gk{int64(s), c})
			}
		}
		p := newPlot("Handler latency: throughput ÷ Little's-law limit", "handler sleep, callers on 1 connection", "ratio to limit")
		err := r.groupedBars(p, groups, func(peer string, g int) (float64, bool) {
			for _, l := range rep.Latency {
				if l.Peer == peer && int64(l.Sleep) == gks[g].sleep && l.Callers == gks[g].callers {
					return l.Ratio, true
				}
			}
			return 0, false
		})
		if err != nil {
			return files, err
		}
		p.Y.Min = 0
		if err := save(p, "latency.png", 9*vg.Inch, 5*vg.Inch); err != nil {
			return files, err
		}
	}

	// Log shipping: entries/s per mode.
	if len(rep.Logs) > 0 {
		groups := []string{LogAck, LogOneway, LogOnewayZstd}
		p := newPlot(fmt.Sprintf("Log shipping, batches of %d entries", peers.LogBatchSize), "mode", "entries/s")
		err := r.groupedBars(p, groups, func(peer string, g int) (float64, bool) {
			for _, l := range rep.Logs {
				if l.Peer == peer && l.Mode == groups[g] {
					return l.EntriesPerSec, true
				}
			}
			return 0, false
		})
		if err != nil {
			return files, err
		}
		if err := save(p, "logs.png", 9*vg.Inch, 5*vg.Inch); err != nil {
			return files, err
		}
	}
	return files, nil
}

// longIndex is the position of a "long" math result among its peer's.
func (r *runner) longIndex(m MathResult) int {
	i := 0
	for _, o := range r.rep.Math {
		if o.Peer != m.Peer || o.Test != "long" {
			continue
		}
		if o == m {
			return i
		}
		i++
	}
	return -1
}

func addLine(p *plot.Plot, pi PeerInfo, xys plotter.XYs) error {
	// Leave room above the lines for the legend (the axes are log scale).
	for _, xy := range xys {
		p.Y.Max = max(p.Y.Max, 4*xy.Y)
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	l.LineStyle, s.GlyphStyle = peerStyle(pi.Name)
	p.Add(l, s)
	p.Legend.Add(pi.Title, l, s)
	return nil
}

// groupedBars adds one bar per peer in each group; value reports a peer's
// value in a group.
func (r *runner) groupedBars(p *plot.Plot, groups []string, value func(peer string, g int) (float64, bool)) error {
	var present []PeerInfo
	for _, pi := range r.rep.Peers {
		for g := range groups {
			if _, ok := value(pi.Name, g); ok {
				present = append(present, pi)
				break
			}
		}
	}
	if len(present) == 0 {
		return nil
	}
	// Groups are one data unit apart; fill about 80% of the space.
	w := vg.Points(math.Min(28, 0.8*0.85*9*72/float64(len(groups))/float64(len(present))))
	top := 0.0
	for i, pi := range present {
		vals := make(plotter.Values, len(groups))
		for g := range groups {
			vals[g], _ = value(pi.Name, g)
			top = max(top, vals[g])
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		b.Color = peerColor(pi.Name)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(present)-1)/2)
		p.Add(b)
		p.Legend.Add(pi.Title, b)
	}
	p.NominalX(groups...)
	p.Legend.Top, p.Legend.Left = true, false
	// Leave room for the legend above the bars.
	p.Y.Min, p.Y.Max = 0, top*(1.15+0.06*float64(len(present)))
	p.Y.Tick.Marker = commaTicks{plot.DefaultTicks{}}
	return nil
}

// commaTicks labels another ticker's ticks with thousands separators.
type commaTicks struct{ plot.Ticker }

func (c commaTicks) Ticks(min, max float64) []plot.Tick {
	ts := c.Ticker.Ticks(min, max)
	for i, t := range ts {
		if t.Label == "" {
			continue
		}
		if t.Value >= 1000 && t.Value == math.Trunc(t.Value) {
			ts[i].Label = num(t.Value)
		}
	}
	return ts
}
