package report

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gpuadmit/gpuadmit/pkg/usage"
)

// chart is a horizontal bar chart drawn as inline SVG: one bar a row, each
// bar of segments.
type chart struct {
	Title  string
	Legend []segment // colour and name of each kind of segment
	Bars   []bar
	Width  int // of the SVG, in pixels
	Height int
}

type bar struct {
	Label string
	Value string // printed after the bar
	Y     int
	End   float64 // x where the bar ends
	Segs  []segment
}

type segment struct {
	Name, Color string
	X, W        float64
}

const (
	chartLabelW = 180.0 // pixels for a bar's label
	chartBarW   = 560.0 // pixels for the longest bar
	chartRowH   = 26
)

var (
	colAllocated = "#4e79a7"
	colFree      = "#59a14f"
	colStranded  = "#e15759"
)

// poolChart is each pool's GPU memory: allocated, free that some pending
// pod or typical size can use, and stranded, scaled to the largest pool.
func poolChart(v View) chart {
	c := chart{Title: "GPU memory by pool (GiB): allocated, free, stranded",
		Legend: []segment{{Name: "allocated", Color: colAllocated}, {Name: "free", Color: colFree}, {Name: "stranded", Color: colStranded}}}
	var max int64
	for _, p := range v.Pools {
		max = maxOf(max, p.CapacityMiB)
	}
	for _, p := range v.Pools {
		if p.Name == usage.NoPool {
			continue
		}
		scale := func(mib int64) float64 { return px(float64(mib) / float64(max) * chartBarW) }
		b := bar{Label: p.Name, Value: fmt.Sprintf("%s of %s", gib(p.AllocatedMiB), gib(p.CapacityMiB))}
		x := chartLabelW
		for _, s := range []struct {
			name, color string
			mib         int64
		}{{"allocated", colAllocated, p.AllocatedMiB}, {"free", colFree, p.FreeMiB - p.StrandedMiB}, {"stranded", colStranded, p.StrandedMiB}} {
			if s.mib <= 0 || max <= 0 {
				continue
			}
			b.Segs = append(b.Segs, segment{Name: s.name + " " + gib(s.mib) + " GiB", Color: s.color, X: x, W: scale(s.mib)})
			x += scale(s.mib)
		}
		b.End = x
		c.Bars = append(c.Bars, b)
	}
	return c.layout()
}

// namespaceChart is one figure of each namespace, scaled to the largest.
func namespaceChart(v View, title string, value func(NamespaceView) float64) chart {
	c := chart{Title: title}
	var max float64
	for _, n := range v.Namespaces {
		max = maxOf(max, value(n))
	}
	for _, n := range v.Namespaces {
		f := value(n)
		b := bar{Label: n.Name, Value: strconv.FormatFloat(f, 'f', 2, 64), End: chartLabelW}
		if f > 0 && max > 0 {
			w := px(f / max * chartBarW)
			b.Segs = []segment{{Name: b.Value, Color: colAllocated, X: chartLabelW, W: w}}
			b.End += w
		}
		c.Bars = append(c.Bars, b)
	}
	return c.layout()
}

// layout places the bars one under the other.
func (c chart) layout() chart {
	for i := range c.Bars {
		c.Bars[i].Y = i * chartRowH
	}
	c.Width, c.Height = int(chartLabelW+chartBarW+120), len(c.Bars)*chartRowH+4
	return c
}

// px rounds a coordinate to a tenth of a pixel, which no screen shows.
func px(f float64) float64 { return math.Round(f*10) / 10 }

func maxOf[T int64 | float64](a, b T) T {
	if b > a {
		return b
	}
	return a
}
