package packing

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot/vg"
)

func tinySummaries() []Summary {
	line := func(workload, policy string, us ...float64) Summary {
		s := Summary{Workload: workload, Policy: policy, Seeds: []uint64{42}}
		for i, u := range us {
			s.Points = append(s.Points, PointSummary{Arrived: 0.9 + 0.1*float64(i), Runs: 1, Unallocated: Stat{Mean: u}})
		}
		return s
	}
	return []Summary{line("default", "fgd", 12, 5, 2), line("default", "random", 15, 13, 9), line("multigpu20", "fgd", 11, 4)}
}

func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	if err := WritePlots(dir, tinySummaries()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"default.png", "multigpu20.png", "at100.png"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r := img.Bounds(); r.Dx() < 100 || r.Dy() < 100 {
			t.Errorf("%s is %v, want a real image", name, r)
		}
	}
}

func TestLinePlotDrawsEveryPolicyAndTheIdeal(t *testing.T) {
	p, err := LinePlot(tinySummaries(), "default")
	if err != nil {
		t.Fatal(err)
	}
	if p.Title.Text != "default" || p.X.Label.Text != arrivedLabel || p.Y.Label.Text != unallocatedLabel {
		t.Errorf("title %q, axes %q, %q", p.Title.Text, p.X.Label.Text, p.Y.Label.Text)
	}
	var buf bytes.Buffer
	w, err := p.WriterTo(4*vg.Inch, 3*vg.Inch, "png")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Errorf("not a PNG: %v", err)
	}
	if _, err := LinePlot(tinySummaries(), "gpushare40"); err == nil {
		t.Error("plotted a workload without results")
	}
}

func TestIdealLine(t *testing.T) {
	got := idealLine(tinySummaries()[:1])
	want := []struct{ x, y float64 }{{90, 10}, {100, 0}, {110, 0}}
	if len(got) != len(want) {
		t.Fatalf("ideal = %v, want %v", got, want)
	}
	for i, w := range want {
		if math.Abs(got[i].X-w.x) > 1e-9 || math.Abs(got[i].Y-w.y) > 1e-9 {
			t.Errorf("ideal[%d] = %v, want %v", i, got[i], w)
		}
	}
}
