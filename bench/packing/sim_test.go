package packing

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSimulateMetrics(t *testing.T) {
	// 2 nodes × 2 GPUs = 4000 milli-GPU; each pod asks one GPU, the third
	// asks for a model nobody has and fails.
	nodes := []Node{{Name: "a", MilliCPU: 8000, MemoryMiB: 8192, GPUs: 2}, {Name: "b", MilliCPU: 8000, MemoryMiB: 8192, GPUs: 2}}
	gpu := Pod{MilliCPU: 1000, GPUs: 1, GPUMilli: 1000}
	pods := []Pod{gpu, gpu, {MilliCPU: 1000, GPUs: 1, GPUMilli: 1000, Spec: "A100"}, gpu, gpu}
	tick := time.Unix(0, 0)
	clock := func() time.Time { tick = tick.Add(time.Microsecond); return tick }
	run := Simulate(NewCluster(nodes), pods, BestFit{}, Options{Arrived: []float64{0.5, 0.75, 1, 1.25}, Now: clock})
	want := Run{
		Points: []Point{
			{Arrived: 0.5, AllocatedPct: 50, UnallocatedPct: 50},
			{Arrived: 0.75, AllocatedPct: 50, UnallocatedPct: 50},
			{Arrived: 1, AllocatedPct: 75, UnallocatedPct: 25},
			{Arrived: 1.25, AllocatedPct: 100, UnallocatedPct: 0},
		},
		Decisions: []time.Duration{time.Microsecond, time.Microsecond, time.Microsecond, time.Microsecond, time.Microsecond},
		Failed:    1,
	}
	if diff := cmp.Diff(want, run); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	tests := map[string]struct {
		q    float64
		want time.Duration
	}{
		"p50 is the 5th of 10": {q: 0.5, want: 5},
		"p99 is the largest":   {q: 0.99, want: 10},
		"p0 is the smallest":   {q: 0, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Percentile(ds, tc.q)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestInflate(t *testing.T) {
	pods := []Pod{{Name: "cpu", MilliCPU: 1}, {Name: "gpu", GPUs: 1, GPUMilli: 500}}
	got := Inflate(pods, 4000, 1.3, 42)
	var total int64
	for _, p := range got {
		total += p.GPUMilliTotal()
	}
	if total <= 5200 || total > 5200+500 {
		t.Errorf("GPU asked = %d milli, want just past 5200", total)
	}
	if diff := cmp.Diff(got, Inflate(pods, 4000, 1.3, 42)); diff != "" {
		t.Errorf("same seed, other workload (-first +second)\n%s", diff)
	}
	if cmp.Equal(got, Inflate(pods, 4000, 1.3, 43)) {
		t.Error("seeds 42 and 43 gave the same workload")
	}
}

// TestTiesGoToTheLowestRank: as in the artifact's kube-scheduler, a tie
// goes to the node first in the run's tie order, whatever the seed; Random
// alone draws among the nodes that fit; the tie order is a permutation the
// seed fixes.
func TestTiesGoToTheLowestRank(t *testing.T) {
	c := tiny()
	// Packing scores n1 and n2 49 for a whole GPU (TestScores), n0 31.
	for _, ranks := range [][3]int{{0, 1, 2}, {0, 2, 1}, {2, 0, 1}} {
		for i, n := range c.Nodes {
			n.TieRank = ranks[i]
		}
		want := "n1"
		if ranks[2] < ranks[1] {
			want = "n2"
		}
		for seed := range uint64(20) {
			if n := choose(c, whole, Packing{}, newRand(seed)); n == nil || n.Name != want {
				t.Fatalf("ranks %v, seed %d: chose %v, want %s", ranks, seed, n, want)
			}
		}
	}
	drawn := map[string]int{}
	for seed := range uint64(60) {
		drawn[choose(c, whole, Random{}, newRand(seed)).Name]++
	}
	if len(drawn) != 3 {
		t.Errorf("Random over 60 seeds drew %v, want every node that fits", drawn)
	}
	orders := map[[3]int]bool{}
	for seed := range uint64(30) {
		rankTies(c, newRand(seed))
		orders[[3]int{c.Nodes[0].TieRank, c.Nodes[1].TieRank, c.Nodes[2].TieRank}] = true
	}
	if len(orders) < 4 {
		t.Errorf("30 seeds gave %d tie orders of 3 nodes, want most of the 6", len(orders))
	}
}
