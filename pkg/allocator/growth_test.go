package allocator

import (
	"math/rand/v2"
	"slices"
	"testing"
)

var growthTasks = []FragTask{
	{MilliCPU: 2000, MemoryMiB: 8192, GPUMilli: 500, GPUs: 1, Weight: 0.5},
	{MilliCPU: 4000, GPUMilli: 1000, GPUs: 1, Weight: 0.5},
}

func TestFragMemoMatchesFragmentation(t *testing.T) {
	m := NewFragMemo(growthTasks)
	for _, n := range []FragNode{
		{MilliCPULeft: 8000, MemoryMiBLeft: 16384, GPUMilliLeft: []int64{1000, 300}},
		{MilliCPULeft: 8000, MemoryMiBLeft: 16384, GPUMilliLeft: []int64{300, 1000}}, // same state, GPUs swapped
		{MilliCPULeft: 8000, MemoryMiBLeft: 4096, GPUMilliLeft: []int64{1000, 600}},  // too little memory for the share kind
		{MilliCPULeft: 1000, MemoryMiBLeft: 16384, GPUMilliLeft: []int64{1000, 600}},
	} {
		want := Fragmentation(n, growthTasks)
		if got := m.Fragmentation(n); got != want {
			t.Errorf("%+v: memo %v, Fragmentation %v", n, got, want)
		}
		if got := m.Fragmentation(n); got != want {
			t.Errorf("%+v: second (memoized) call %v, want %v", n, got, want)
		}
	}
}

// TestFragMemoSharesStatesThatCompareAlike: the memo keys a node's CPU and
// memory by the kinds' figures they reach, so nodes whose CPU and memory
// differ in between share one entry, and every answer, memoized or not, is
// Fragmentation's to the last bit: CPU and memory are drawn at each kind's
// figure and one either side, where a key off by one would show.
func TestFragMemoSharesStatesThatCompareAlike(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	tasks := []FragTask{
		{MilliCPU: 0, GPUMilli: 300, GPUs: 1, Weight: 0.2},
		{MilliCPU: 2000, MemoryMiB: 8192, GPUMilli: 500, GPUs: 1, Weight: 0.3},
		{MilliCPU: 4000, MemoryMiB: 1024, GPUMilli: 1000, GPUs: 2, Weight: 0.4},
		{MilliCPU: 16000, MemoryMiB: 65536, Weight: 0.1},
	}
	near := func(figures ...int64) int64 { return figures[r.IntN(len(figures))] + int64(r.IntN(3)-1) }
	m := NewFragMemo(tasks)
	exact := map[[4]int64]bool{}
	for range 5000 {
		n := FragNode{MilliCPULeft: near(0, 2000, 4000, 16000, 30000), MemoryMiBLeft: near(0, 1024, 8192, 65536, 100000),
			GPUMilliLeft: []int64{[]int64{0, 300, 700, 1000}[r.IntN(4)], []int64{0, 500, 1000}[r.IntN(3)]}}
		if got, want := m.Fragmentation(n), Fragmentation(n, tasks); got != want {
			t.Fatalf("%+v: memo %v, Fragmentation %v", n, got, want)
		}
		exact[[4]int64{n.MilliCPULeft, n.MemoryMiBLeft, n.GPUMilliLeft[0], n.GPUMilliLeft[1]}] = true
	}
	if len(m.memo) >= len(exact)/4 {
		t.Errorf("memo holds %d states for %d distinct nodes; want nodes that compare alike to share entries", len(m.memo), len(exact))
	}
}

func TestTaskFragmentMemory(t *testing.T) {
	n := FragNode{MilliCPULeft: 8000, MemoryMiBLeft: 4096, GPUMilliLeft: []int64{1000, 600}}
	if got := TaskFragment(n, growthTasks[0]); got != 1600 {
		t.Errorf("share kind asking 8 GiB on a node with 4 GiB left: fragment %d, want all 1600 idle", got)
	}
	if got := TaskFragment(n, growthTasks[1]); got != 600 {
		t.Errorf("kind asking no memory: fragment %d, want the 600 hole only", got)
	}
}

func TestGrowthChoosesLeastFragmentingGPU(t *testing.T) {
	m := NewFragMemo(growthTasks)
	n := FragNode{MilliCPULeft: 16000, MemoryMiBLeft: 65536, GPUMilliLeft: []int64{1000, 500, 700}}
	before := m.Fragmentation(n)
	// A 500 share on GPU 1 (500 left) leaves no hole; on GPU 2 it leaves
	// a 200 hole; on GPU 0 it breaks an idle GPU.
	g, gpus, ok := m.Growth(n, before, FragTask{MilliCPU: 1000, MemoryMiB: 1024, GPUMilli: 500, GPUs: 1})
	if !ok || !slices.Equal(gpus, []int{1}) {
		t.Fatalf("Growth = %v, %v, %v; want GPU 1", g, gpus, ok)
	}
	if g >= 0 {
		t.Errorf("filling the 500 hole exactly should shrink fragmentation, growth %v", g)
	}
	if _, _, ok := m.Growth(n, before, FragTask{GPUMilli: 1000, GPUs: 2}); ok {
		t.Error("two whole GPUs on a node with one idle GPU: want ok false")
	}
	g, gpus, ok = m.Growth(n, before, FragTask{MilliCPU: 4000, GPUMilli: 1000, GPUs: 1})
	if !ok || !slices.Equal(gpus, []int{0}) {
		t.Errorf("whole GPU: got %v, %v, want the idle GPU 0", gpus, ok)
	}
	_ = g
}

func TestPlacerCountsStrandedGPU(t *testing.T) {
	p := NewPlacer(growthTasks)
	// Kinds ask 0.5·2000+0.5·4000 = 3000 mCPU per 0.5·500+0.5·1000 = 750 mGPU: 4000 mCPU per GPU.
	if p.CPUPerGPU != 4000 {
		t.Fatalf("CPUPerGPU = %v, want 4000", p.CPUPerGPU)
	}
	// Two nodes alike but for CPU: on the one with 8 CPUs for 2 idle GPUs a
	// CPU-only pod of 4 CPUs strands a GPU; on the one with 16 CPUs it does not.
	tight := FragNode{MilliCPULeft: 8000, MemoryMiBLeft: 65536, GPUMilliLeft: []int64{1000, 1000}}
	roomy := FragNode{MilliCPULeft: 16000, MemoryMiBLeft: 65536, GPUMilliLeft: []int64{1000, 1000}}
	cpuOnly := FragTask{MilliCPU: 4000}
	ct, _, _ := p.Cost(tight, p.Fragmentation(tight), cpuOnly)
	cr, _, _ := p.Cost(roomy, p.Fragmentation(roomy), cpuOnly)
	if ct <= cr {
		t.Errorf("cost on the CPU-tight node %v should exceed the roomy node's %v", ct, cr)
	}
	if _, _, ok := p.Cost(tight, 0, FragTask{GPUMilli: 1000, GPUs: 3}); ok {
		t.Error("three GPUs on a two-GPU node: want ok false")
	}
}

func TestCostOnIsCostWhereCostWouldPlace(t *testing.T) {
	p := NewPlacer(growthTasks)
	n := FragNode{MilliCPULeft: 12000, MemoryMiBLeft: 65536, GPUMilliLeft: []int64{1000, 500, 700}}
	before := p.Fragmentation(n)
	for name, req := range map[string]FragTask{
		"a share":     {MilliCPU: 1000, MemoryMiB: 1024, GPUMilli: 500, GPUs: 1},
		"a whole GPU": {MilliCPU: 4000, GPUMilli: 1000, GPUs: 1},
	} {
		want, gpus, ok := p.Cost(n, before, req)
		if !ok {
			t.Fatalf("%s: Cost found no fit", name)
		}
		if got, ok := p.CostOn(n, before, req, gpus); !ok || got != want {
			t.Errorf("%s: CostOn(%v) = %v, %v; want Cost's %v", name, gpus, got, ok, want)
		}
	}
}

func TestCostOnAnotherGPUCostsMore(t *testing.T) {
	p := NewPlacer(growthTasks)
	n := FragNode{MilliCPULeft: 16000, MemoryMiBLeft: 65536, GPUMilliLeft: []int64{1000, 500, 700}}
	before := p.Fragmentation(n)
	share := FragTask{MilliCPU: 1000, MemoryMiB: 1024, GPUMilli: 500, GPUs: 1}
	// Cost fills GPU 1's 500 hole; a first fit would break idle GPU 0.
	best, _ := p.CostOn(n, before, share, []int{1})
	first, _ := p.CostOn(n, before, share, []int{0})
	if first <= best {
		t.Errorf("the share on idle GPU 0 costs %v, on the 500 hole %v; want more", first, best)
	}
	for name, gpus := range map[string][]int{
		"too little left": {2, 1}, "no such GPU": {3}, "none given": nil, "the same GPU twice": {0, 0},
	} {
		req := share
		if len(gpus) == 2 {
			req = FragTask{GPUMilli: 600, GPUs: 2}
			if name == "the same GPU twice" {
				req.GPUMilli = 100
			}
		}
		if _, ok := p.CostOn(n, before, req, gpus); ok {
			t.Errorf("%s (%v): want ok false", name, gpus)
		}
	}
}

// A memo given a limit never holds more states than that, and still gives
// Fragmentation's number once it starts over.
func TestFragMemoLimit(t *testing.T) {
	tasks := []FragTask{{GPUs: 1, GPUMilli: 300, Weight: 1}, {GPUs: 1, GPUMilli: MilliPerGPU, MilliCPU: 4000, Weight: 1}}
	m := NewFragMemo(tasks)
	m.Limit = 10
	for i := range 100 {
		n := FragNode{MilliCPULeft: int64(i) * 100, GPUMilliLeft: []int64{int64(i * 7 % 1000), 1000}}
		if got, want := m.Fragmentation(n), Fragmentation(n, tasks); got != want {
			t.Fatalf("node %d: %v, want %v", i, got, want)
		}
		if len(m.memo) > m.Limit {
			t.Fatalf("node %d: %d states remembered, limit %d", i, len(m.memo), m.Limit)
		}
	}
}
