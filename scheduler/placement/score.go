package placement

import (
	"math"
	"slices"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// The tie-break of the simulator's gpuadmit policy (bench/packing.GPUAdmit):
// best fit, ⌊100·(1 − ½·CPU left/128 CPUs − ½·GPU left/8 GPUs)⌋ after the
// placement (the FGD artifact's largest node), weighted 1/100, so that it
// decides only between nodes whose costs differ by less than about one
// milli-GPU.
const (
	bestFitTie = 1.0 / 100
	bestFitCPU = 128000
	bestFitGPU = 8 * allocator.MilliPerGPU
)

// score is the raw score of placing r on a node with view v, higher is
// better: minus the placement cost (allocator.Placer.CostOn) of each item
// on the GPU the node side gives it, in turn, plus the best-fit tie-break.
// A pod without GPU costs what its CPU and memory strand of the node's
// GPUs, nothing on a node without GPUs the plugin knows of. ok is false
// when the model has no GPU for an item.
func (c *scorer) score(n fwk.NodeInfo, r request, v *gpuView) (float64, bool) {
	if v == nil && r.gpu() {
		return 0, false
	}
	if v == nil {
		v = &gpuView{}
	}
	alloc, used := n.GetAllocatable(), n.GetRequested()
	left := slices.Clone(v.left)
	fn := allocator.FragNode{MilliCPULeft: alloc.GetMilliCPU() - used.GetMilliCPU(),
		MemoryMiBLeft: (alloc.GetMemory() - used.GetMemory()) >> 20, Model: v.shape.model()}
	fn.GPUMilliLeft = v.shape.millis(left)
	var cost float64
	if !r.gpu() && len(left) > 0 {
		p := c.placer(v.shape)
		t := allocator.FragTask{MilliCPU: r.milliCPU, MemoryMiB: r.memoryMiB}
		cost, _ = p.CostOn(fn, p.Fragmentation(fn), t, nil)
		fn.MilliCPULeft -= t.MilliCPU
		fn.MemoryMiBLeft -= t.MemoryMiB
	}
	for i, it := range r.items {
		p := c.placer(v.shape)
		need := v.shape.take(it)
		g, ok := (&gpuView{shape: v.shape, left: left}).choose(need)
		if !ok {
			return 0, false
		}
		t := allocator.FragTask{GPUMilli: v.shape.milli(need), GPUs: 1}
		if it.whole {
			t.GPUMilli = allocator.MilliPerGPU
		}
		if i == 0 {
			t.MilliCPU, t.MemoryMiB = r.milliCPU, r.memoryMiB
		}
		cc, ok := p.CostOn(fn, p.Fragmentation(fn), t, []int{g})
		if !ok {
			return 0, false
		}
		cost += cc
		left[g] -= need
		fn.MilliCPULeft -= t.MilliCPU
		fn.MemoryMiBLeft -= t.MemoryMiB
		fn.GPUMilliLeft = v.shape.millis(left)
	}
	var gpuLeft int64
	for _, l := range fn.GPUMilliLeft {
		gpuLeft += l
	}
	fit := math.Floor(100 * (1 - 0.5*float64(fn.MilliCPULeft)/bestFitCPU - 0.5*float64(gpuLeft)/bestFitGPU))
	return -cost + bestFitTie*fit, true
}

// millis is every GPU's left in milli-GPU.
func (s shape) millis(left []int64) []int64 {
	out := make([]int64, len(left))
	for i, l := range left {
		out[i] = s.milli(max(l, 0))
	}
	return out
}

// scoreScale keeps a raw score's fractions of a milli-GPU in Score's int64.
const scoreScale = 1e6

// unscored is the Score of a node the plugin cannot model.
const unscored = math.MinInt64

// normalize ranks the distinct raw scores, best first: the best gets
// MaxNodeScore, each next distinct score one less, down to MinNodeScore;
// unscored nodes get MinNodeScore. A rank, not a linear map, because only
// the order is comparable across nodes: a linear map of costs onto 0…100
// would tie the few best nodes whenever one far worse node stretches the
// range, and leave the choice between them to chance.
func normalize(scores fwk.NodeScoreList) {
	distinct := make([]int64, 0, len(scores))
	for _, s := range scores {
		if s.Score != unscored {
			distinct = append(distinct, s.Score)
		}
	}
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	for i := range scores {
		if scores[i].Score == unscored {
			scores[i].Score = fwk.MinNodeScore
			continue
		}
		j, _ := slices.BinarySearch(distinct, scores[i].Score)
		rank := int64(len(distinct) - 1 - j)
		scores[i].Score = max(fwk.MaxNodeScore-rank, fwk.MinNodeScore)
	}
}
