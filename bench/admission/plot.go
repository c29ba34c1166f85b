package admission

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// palette colours the configurations alike in every panel.
var palette = map[string]color.Color{
	None:     color.RGBA{R: 150, G: 150, B: 150, A: 255},
	Noop:     color.RGBA{R: 86, G: 180, B: 233, A: 255},
	Patch:    color.RGBA{R: 0, G: 158, B: 115, A: 255},
	Gpuadmit: color.RGBA{R: 0, G: 114, B: 178, A: 255},
	OPA:      color.RGBA{R: 230, G: 159, B: 0, A: 255},
}

// WritePlot draws the client p50 and p99 Create latency by level, a line per
// configuration on a log scale, into a PNG at path.
func (r *Report) WritePlot(path string) error {
	panels := []struct {
		title string
		value func(Latency) float64
	}{
		{"p50", func(l Latency) float64 { return l.P50Ms }},
		{"p99", func(l Latency) float64 { return l.P99Ms }},
	}
	const w, h = 12 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	for i, panel := range panels {
		p, err := r.linePlot("pod Create latency, "+panel.title, panel.value)
		if err != nil {
			return err
		}
		p.Draw(tiles.At(dc, i, 0))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func (r *Report) linePlot(title string, value func(Latency) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "ms, client end to end (log scale)"
	p.X.Label.Text = "concurrent clients"
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, ticks125{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, cfg := range r.Settings.Configs {
		var pts plotter.XYs
		for j, level := range r.Settings.Levels {
			if res := r.result(cfg, level); res != nil && value(res.Latency) > 0 {
				pts = append(pts, plotter.XY{X: float64(j), Y: value(res.Latency)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		line.Color, points.Color = palette[cfg], palette[cfg]
		line.Width = vg.Points(2)
		points.Shape = shapesOf[i%len(shapesOf)]
		points.Radius = vg.Points(4)
		p.Add(line, points)
		p.Legend.Add(cfg, line, points)
	}
	names := make([]string, len(r.Settings.Levels))
	for j, level := range r.Settings.Levels {
		names[j] = fmt.Sprint(level)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.3, float64(len(names))-0.7
	return p, nil
}

// ticks125 labels a log axis at 1, 2 and 5 times the powers of ten, so that a
// range within one decade still has labels.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for p := math.Pow(10, math.Floor(math.Log10(lo))); p <= hi; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * p; v >= lo && v <= hi {
				out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	return out
}

var shapesOf = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}

func (r *Report) result(config string, level int) *Result {
	for i := range r.Results {
		if r.Results[i].Config == config && r.Results[i].Level == level {
			return &r.Results[i]
		}
	}
	return nil
}
