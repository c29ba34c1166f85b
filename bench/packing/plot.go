package packing

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Axis labels of the line plots, as the paper's figures put them.
const (
	arrivedLabel     = "arrived workload (% of GPU capacity)"
	unallocatedLabel = "unallocated GPU (% of capacity)"
)

// WritePlots writes into dir, as PNG, the line plot of each workload of
// sums (<workload>.png) and the bar chart of all of them (at100.png).
func WritePlots(dir string, sums []Summary) error {
	for _, w := range workloadsOf(sums) {
		p, err := LinePlot(sums, w)
		if err != nil {
			return err
		}
		if err := savePNG(p, 16*vg.Centimeter, 11*vg.Centimeter, filepath.Join(dir, plotFile(w))); err != nil {
			return err
		}
	}
	p, err := At100Plot(sums)
	if err != nil {
		return err
	}
	return savePNG(p, at100Width(len(workloadsOf(sums))), 12*vg.Centimeter, filepath.Join(dir, "at100.png"))
}

// at100Width is the bar chart's width for n workloads: 26 cm, and 3 cm a
// workload past 8, so that 24 lists' names do not run into each other.
func at100Width(n int) vg.Length {
	return max(26, 3*vg.Length(n)+2) * vg.Centimeter
}

// plotFile names the line plot of workload w, a workload given as a file
// name ("x/openb_pod_list_y.csv") by the file's base name without .csv.
func plotFile(w string) string {
	return strings.TrimSuffix(filepath.Base(w), ".csv") + ".png"
}

func savePNG(p *plot.Plot, width, height vg.Length, path string) error {
	if err := p.Save(width, height, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}

// LinePlot draws workload w's unallocated GPU (mean over seeds) against the
// arrived workload, one line per policy in rows order, and the ideal: all
// that arrived allocated (100 − arrived, 0 from 100% on).
func LinePlot(sums []Summary, w string) (*plot.Plot, error) {
	rows := rowsOf(sums, w)
	if len(rows) == 0 {
		return nil, fmt.Errorf("plot %s: no results", w)
	}
	p := plot.New()
	p.Title.Text = w
	p.X.Label.Text = arrivedLabel
	p.Y.Label.Text = unallocatedLabel
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	ideal, err := plotter.NewLine(idealLine(rows))
	if err != nil {
		return nil, fmt.Errorf("plot %s: ideal: %w", w, err)
	}
	ideal.Color = color.Gray{Y: 96}
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(ideal)
	p.Legend.Add("ideal", ideal)
	for _, s := range rows {
		line, points, err := plotter.NewLinePoints(meanLine(s))
		if err != nil {
			return nil, fmt.Errorf("plot %s: %s: %w", w, s.Policy, err)
		}
		c := policyColor(sums, s.Policy)
		line.Color, points.Color = c, c
		points.Shape = plotutil.Shape(slices.Index(policiesOf(sums), s.Policy))
		p.Add(line, points)
		p.Legend.Add(s.Policy, line, points)
	}
	return p, nil
}

func meanLine(s Summary) plotter.XYs {
	xys := make(plotter.XYs, 0, len(s.Points))
	for _, pt := range s.Points {
		xys = append(xys, plotter.XY{X: 100 * pt.Arrived, Y: pt.Unallocated.Mean})
	}
	return xys
}

// idealLine runs over the arrival points of rows, with a corner at 100%.
func idealLine(rows []Summary) plotter.XYs {
	xs := []float64{100}
	for _, s := range rows {
		for _, pt := range s.Points {
			xs = append(xs, 100*pt.Arrived)
		}
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	xys := make(plotter.XYs, 0, len(xs))
	for _, x := range xs {
		xys = append(xys, plotter.XY{X: x, Y: max(0, 100-x)})
	}
	return xys
}

// At100Plot draws the unallocated GPU at 100% arrived (mean over seeds) of
// every policy, grouped by workload; a policy without that point for a
// workload has no bar there (height 0).
func At100Plot(sums []Summary) (*plot.Plot, error) {
	workloads := workloadsOf(sums)
	if len(workloads) == 0 {
		return nil, fmt.Errorf("plot at100: no results")
	}
	policies := policiesOf(sums)
	p := plot.New()
	p.Title.Text = "unallocated GPU at 100% arrived workload"
	p.Y.Label.Text = unallocatedLabel
	p.Legend.Top = true
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil // the workloads are categories
	p.Add(grid)
	// Bars of a group fill 80% of its slot on the canvas less its margins.
	width := 0.8 * (at100Width(len(workloads)) - 3*vg.Centimeter) / vg.Length(len(workloads)*len(policies))
	var top float64
	for i, pol := range policies {
		vals := at100Values(sums, workloads, pol)
		bars, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, fmt.Errorf("plot at100: %s: %w", pol, err)
		}
		bars.Color = policyColor(sums, pol)
		bars.LineStyle.Width = 0
		bars.Offset = vg.Length(float64(i)-float64(len(policies)-1)/2) * width
		p.Add(bars)
		p.Legend.Add(pol, bars)
		top = max(top, slices.Max(vals))
	}
	p.NominalX(workloads...)
	p.X.Min, p.X.Max = -0.5, float64(len(workloads))-0.5
	p.Y.Min = 0
	p.Y.Max = max(top, 1) / 0.6 // room for the legend above the bars
	return p, nil
}

func at100Values(sums []Summary, workloads []string, policy string) plotter.Values {
	vals := make(plotter.Values, len(workloads))
	for j, w := range workloads {
		for _, s := range sums {
			if s.Workload != w || s.Policy != policy {
				continue
			}
			if pt, ok := s.At(1); ok {
				vals[j] = pt.Unallocated.Mean
			}
		}
	}
	return vals
}

// policiesOf lists the policies of sums in the order of Policies, then the
// others as they first appear.
func policiesOf(sums []Summary) []string {
	var out []string
	for _, s := range sums {
		if !slices.Contains(out, s.Policy) {
			out = append(out, s.Policy)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return policyRank(a) - policyRank(b) })
	return out
}

// policyColor gives policy the same colour in every plot of sums.
func policyColor(sums []Summary, policy string) color.Color {
	i := slices.Index(policiesOf(sums), policy)
	return plotutil.DarkColors[i%len(plotutil.DarkColors)]
}
