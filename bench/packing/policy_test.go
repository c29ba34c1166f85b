package packing

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tiny is a cluster of three 2-GPU nodes with some state: n0 idle, n1 with
// one GPU at 300 left and little CPU, n2 with one whole GPU taken.
func tiny() *Cluster {
	c := NewCluster([]Node{
		{Name: "n0", MilliCPU: 32000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
		{Name: "n1", MilliCPU: 32000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
		{Name: "n2", MilliCPU: 32000, MemoryMiB: 65536, GPUs: 2, Model: "V100M16"},
	})
	c.Nodes[1].Assign(Pod{MilliCPU: 24000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 700}, []int{1})
	c.Nodes[2].Assign(Pod{MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 1000}, []int{0})
	return c
}

// nodesOf is c's nodes.
func nodesOf(c *Cluster) []Node {
	out := make([]Node, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Node
	}
	return out
}

var (
	share  = Pod{Name: "share", MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 250}
	whole  = Pod{Name: "whole", MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 1000}
	double = Pod{Name: "double", MilliCPU: 4000, MemoryMiB: 1024, GPUs: 2, GPUMilli: 1000}

	testWorkload = []Pod{share, share, whole, double}
)

func TestPolicyChoice(t *testing.T) {
	tests := map[string]struct {
		policy   string
		pod      Pod
		wantNode string
		wantGPUs []int
	}{
		"bestfit: share on the fullest node, best-fit GPU": {policy: "bestfit", pod: share, wantNode: "n1", wantGPUs: []int{1}},
		"bestfit: whole GPU on the fullest node":           {policy: "bestfit", pod: whole, wantNode: "n1", wantGPUs: []int{0}},
		"packing: share on the shared GPU":                 {policy: "packing", pod: share, wantNode: "n1", wantGPUs: []int{1}},
		"packing: whole GPU on a used node, fuller first":  {policy: "packing", pod: whole, wantNode: "n1", wantGPUs: []int{0}},
		"clustering: share beside shares":                  {policy: "clustering", pod: share, wantNode: "n1", wantGPUs: []int{1}},
		"clustering: whole GPU beside whole GPUs":          {policy: "clustering", pod: whole, wantNode: "n2", wantGPUs: []int{1}},
		"fgd: share fills the 300 hole":                    {policy: "fgd", pod: share, wantNode: "n1", wantGPUs: []int{1}},
		"gpuadmit: share fills the 300 hole":               {policy: "gpuadmit", pod: share, wantNode: "n1", wantGPUs: []int{1}},
		"gpuadmit: two GPUs only fit the idle node":        {policy: "gpuadmit", pod: double, wantNode: "n0", wantGPUs: []int{0, 1}},
		"only the idle node holds two GPUs":                {policy: "random", pod: double, wantNode: "n0", wantGPUs: []int{0, 1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := tiny()
			p, err := NewPolicy(tc.policy, testWorkload, nodesOf(c))
			if err != nil {
				t.Fatal(err)
			}
			r := newRand(1)
			n := choose(c, tc.pod, p, r)
			if n == nil {
				t.Fatal("no node chosen")
			}
			got := struct {
				Node string
				GPUs []int
			}{n.Name, p.GPUs(n, tc.pod, r)}
			want := struct {
				Node string
				GPUs []int
			}{tc.wantNode, tc.wantGPUs}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestFits(t *testing.T) {
	c := tiny()
	tests := map[string]struct {
		pod  Pod
		want []bool
	}{
		"share fits everywhere":          {pod: share, want: []bool{true, true, true}},
		"two whole GPUs only on idle n0": {pod: double, want: []bool{true, false, false}},
		"CPU short on n1":                {pod: Pod{MilliCPU: 10000, GPUs: 1, GPUMilli: 100}, want: []bool{true, false, true}},
		"memory short everywhere":        {pod: Pod{MilliCPU: 1000, MemoryMiB: 1 << 20}, want: []bool{false, false, false}},
		"model V100M16 only on n2":       {pod: Pod{MilliCPU: 1000, GPUs: 1, GPUMilli: 100, Spec: "V100M16|P100"}, want: []bool{false, false, true}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []bool
			for _, n := range c.Nodes {
				got = append(got, n.Fits(tc.pod))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestScores(t *testing.T) {
	c := tiny()
	tests := map[string]struct {
		policy Policy
		pod    Pod
		want   []float64
	}{
		// n0: ⌊100(1 − ½·28000/128000 − ½·1750/8000)⌋ = 78; n2: ⌊100(1 − ½·24000/128000 − ½·750/8000)⌋ = 85
		"bestfit share": {policy: BestFit{}, pod: share, want: []float64{78, 91, 85}},
		// ⌊100(1 − dot/2)⌋ with dot of (CPU, GPU) free and asked, over 128 CPUs and 8 GPUs:
		// n0 1 − ½(¼·1/16 + ¼·1/32); the integer score ties n1 and n2
		"dotprod 8-CPU share": {policy: DotProd{}, pod: Pod{MilliCPU: 8000, GPUs: 1, GPUMilli: 250}, want: []float64{98, 99, 99}},
		// idle n0: max(33−2, 2); used nodes: 50 − 1 idle GPU taken; the 300 hole: 100 − 30/10
		"packing whole GPU": {policy: Packing{}, pod: whole, want: []float64{31, 49, 49}},
		"packing share":     {policy: Packing{}, pod: share, want: []float64{31, 97, 49}},
		// band·25 + ⌊25·(8000 − GPU left)/8000⌋: idle 25+18, only shares 75+20, other class 0+21
		"clustering share": {policy: Clustering{}, pod: share, want: []float64{43, 95, 21}},
		// workload kinds share ½, whole ¼, double ¼ (see TestTypicalTasks);
		// n1: frag 400 → 300 on the 300 hole, Δ = −100 → ⌊100·σ(0.1)⌋ = 52
		"fgd share": {policy: NewFGD(testWorkload), pod: share, want: []float64{34, 52, 46}},
		// n0 Δ = +250 → 43; n1 400 → 150 and n2 250 → 0, both Δ = −250 → 56
		"fgd whole GPU": {policy: NewFGD(testWorkload), pod: whole, want: []float64{43, 56, 56}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []float64
			for _, n := range c.Nodes {
				got = append(got, tc.policy.Score(n, tc.pod))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestFirstFitVariants: the DRA allocator gives a share the first GPU with
// room. On a, that is the 300 hole of GPU 0; on b, the idle GPU 0 while the
// hole is GPU 1. gpuadmit-firstfit prices the GPU the pod will get, so it
// takes a; bestfit-firstfit sees equal nodes and takes the first, b.
func TestFirstFitVariants(t *testing.T) {
	tests := map[string]struct {
		policy   string
		wantNode string
		wantGPUs []int
	}{
		"gpuadmit-firstfit: the node whose first fit fills the hole": {policy: "gpuadmit-firstfit", wantNode: "a", wantGPUs: []int{0}},
		"bestfit-firstfit: the first GPU with room of a tied node":   {policy: "bestfit-firstfit", wantNode: "b", wantGPUs: []int{0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := NewCluster([]Node{
				{Name: "b", MilliCPU: 32000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
				{Name: "a", MilliCPU: 32000, MemoryMiB: 65536, GPUs: 2, Model: "T4"},
			})
			c.Nodes[0].Assign(Pod{MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 700}, []int{1})
			c.Nodes[1].Assign(Pod{MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 700}, []int{0})
			p, err := NewPolicy(tc.policy, testWorkload, nodesOf(c))
			if err != nil {
				t.Fatal(err)
			}
			r := newRand(1)
			n := choose(c, share, p, r)
			if n == nil {
				t.Fatal("no node chosen")
			}
			if diff := cmp.Diff([]any{tc.wantNode, tc.wantGPUs}, []any{n.Name, p.GPUs(n, share, r)}); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestGPUAdmitKeepsScarceModelsForPinnedPods: model A has one GPU, which
// the pods pinned to A (a tenth of the pods, 1.1 GPU of demand when the
// workload fills the cluster) need whole; B has ten. FGD's measure alone
// sends a pod that runs anywhere to A, whose idle GPU the more numerous
// B-pinned kind counts as a fragment; priced by scarcity (1 per milli-GPU
// on A, 0.22 on B) it goes to B, and the A-pinned pod that follows fits.
func TestGPUAdmitKeepsScarceModelsForPinnedPods(t *testing.T) {
	nodes := []Node{
		{Name: "a", MilliCPU: 64000, MemoryMiB: 65536, GPUs: 1, Model: "A"},
		{Name: "b", MilliCPU: 640000, MemoryMiB: 655360, GPUs: 10, Model: "B"},
	}
	any := Pod{Name: "any", MilliCPU: 4000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 1000}
	onA, onB := any, any
	onA.Name, onA.Spec = "on-a", "A"
	onB.Name, onB.Spec = "on-b", "B"
	var workload []Pod
	for i := range 10 {
		switch {
		case i == 0:
			workload = append(workload, onA)
		case i <= 2:
			workload = append(workload, onB)
		default:
			workload = append(workload, any)
		}
	}
	for _, tc := range []struct {
		name  string
		nodes []Node // the supply the policy is told
		want  string
	}{
		{"without supply", nil, "a"},
		{"priced by scarcity", nodes, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCluster(nodes)
			p := NewGPUAdmit(workload, tc.nodes)
			r := newRand(1)
			n := choose(c, any, p, r)
			if n == nil || n.Name != tc.want {
				t.Fatalf("pod that runs anywhere went to %v, want %s", n, tc.want)
			}
			n.Assign(any, p.GPUs(n, any, r))
			if got := choose(c, onA, p, r); (got != nil) != (tc.want == "b") {
				t.Errorf("A-pinned pod placed: %v; want placed only when A was kept", got != nil)
			}
		})
	}
}
