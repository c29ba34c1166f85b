package replay

import (
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// usageSeries is one line of the usage plot: a figure of one configuration.
type usageSeries struct {
	Name string
	XYs  plotter.XYs
}

// usageLines are the lines of the usage plot, in % of GPU capacity against
// % arrived: per configuration, stranded as the leader counts it,
// stranded with the pods without GPU, and fragmentation.
func (r *Report) usageLines() []usageSeries {
	var out []usageSeries
	for _, x := range r.Replayed {
		if len(x.Usage) == 0 {
			continue
		}
		figures := []struct {
			name string
			of   func(UsagePoint) float64
		}{
			{"stranded", UsagePoint.StrandedPct},
			{"stranded, all pods", func(u UsagePoint) float64 { return pct(u.StrandedAllPodsMiB, u.CapacityMiB) }},
			{"fragmentation", UsagePoint.FragmentationPct},
		}
		for _, f := range figures {
			s := usageSeries{Name: x.Config + ": " + f.name}
			for _, u := range x.Usage {
				s.XYs = append(s.XYs, plotter.XY{X: 100 * u.Arrived, Y: f.of(u)})
			}
			out = append(out, s)
		}
	}
	return out
}

// writeUsagePlot draws usageLines into a PNG at path.
func (r *Report) writeUsagePlot(path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("gpuadmit's usage figures, %s seed %d, %d nodes", r.Settings.Workload, r.Settings.Seed, r.Settings.Nodes)
	p.X.Label.Text = "arrived workload (% of GPU capacity)"
	p.Y.Label.Text = "% of GPU capacity"
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, s := range r.usageLines() {
		line, err := plotter.NewLine(s.XYs)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Name, err)
		}
		line.Color = plotutil.Color(i / 3)
		line.Dashes = plotutil.Dashes(i % 3)
		line.Width = vg.Points(1.5)
		p.Add(line)
		p.Legend.Add(s.Name, line)
	}
	if err := p.Save(16*vg.Centimeter, 11*vg.Centimeter, path); err != nil {
		return fmt.Errorf("save plot %s: %w", path, err)
	}
	return nil
}
