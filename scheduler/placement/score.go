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
// better, but for the scarcity price: minus the placement cost
// (allocator.Placer.CostOn) of each item on the GPU the node side gives
// it, in turn, plus the best-fit tie-break. milli is what the items take
// in milli-GPU, on which the node pays its model's scarcity price
// (placerSet.prices): the node's score is raw − price × milli, composed
// where it is used (nodeStates.priced), so that a score kept from an
// earlier workload revision pays the prices of the current one.
// A pod without GPU costs what its CPU and memory strand of the node's
// GPUs, nothing on a node without GPUs the plugin knows of. ok is false
// when the model has no GPU for an item.
func (c *scorer) score(n fwk.NodeInfo, r request, v *gpuView) (raw float64, milli int64, ok bool) {
	if len(r.choices) > 0 {
		return c.scoreChoices(n, r, v)
	}
	return c.scoreAt(n, r, v, nil)
}

// scoreAt is score with the GPU of each item given (at, indexes into v's
// GPUs), or, with at nil, the one the node side picks.
func (c *scorer) scoreAt(n fwk.NodeInfo, r request, v *gpuView, at []int) (raw float64, milli int64, ok bool) {
	if v == nil && r.gpu() {
		return 0, 0, false
	}
	if v == nil {
		v = &gpuView{}
	}
	b := v.base(n, c)
	fn := b.fn
	var cost float64
	left := v.left
	if !r.gpu() && len(left) > 0 {
		t := allocator.FragTask{MilliCPU: r.milliCPU, MemoryMiB: r.memoryMiB}
		cost, _ = b.placer.CostOn(fn, b.before, t, nil)
		fn.MilliCPULeft -= t.MilliCPU
		fn.MemoryMiBLeft -= t.MemoryMiB
	}
	before, gpuLeft := b.before, b.gpuLeft
	for i, it := range r.items {
		need := v.shape.take(it)
		g, ok := (&gpuView{shape: v.shape, left: left}).choose(need)
		if at != nil {
			g, ok = at[i], need > 0 && left[at[i]] >= need
		}
		if !ok {
			return 0, 0, false
		}
		t := allocator.FragTask{GPUMilli: v.shape.milli(need), GPUs: 1}
		if it.whole {
			t.GPUMilli = allocator.MilliPerGPU
		}
		if i == 0 {
			t.MilliCPU, t.MemoryMiB = r.milliCPU, r.memoryMiB
		} else {
			before = b.placer.Fragmentation(fn)
		}
		cc, ok := b.placer.CostOn(fn, before, t, []int{g})
		if !ok {
			return 0, 0, false
		}
		cost += cc
		milli += t.GPUMilli
		gpuLeft += v.shape.milli(max(left[g]-need, 0)) - v.shape.milli(max(left[g], 0))
		fn.MilliCPULeft -= t.MilliCPU
		fn.MemoryMiBLeft -= t.MemoryMiB
		if i+1 < len(r.items) { // the next item sees this one placed
			if i == 0 {
				left = slices.Clone(left)
			}
			left[g] -= need
			fn.GPUMilliLeft = v.shape.millis(left)
		}
	}
	fit := math.Floor(100 * (1 - 0.5*float64(fn.MilliCPULeft)/bestFitCPU - 0.5*float64(gpuLeft)/bestFitGPU))
	return -cost + bestFitTie*fit, milli, true
}

// base is what scoring any request on a node starts from: the node as
// fragmentation sees it and its fragmentation, under the placer of the
// scorer's workload revision for the view's shape.
type base struct {
	rev     uint64
	placer  *allocator.Placer
	fn      allocator.FragNode // its GPUMilliLeft is never changed
	before  float64
	gpuLeft int64 // the sum of fn.GPUMilliLeft
}

// base returns v's base on node n for scorer c: the one v keeps when it
// was made under c's revision. v is the view of one node state (a node
// whose pods or Node object changed gets new views), which one goroutine
// at a time scores; the fragmentation depends on the revision's kinds,
// not on which scorer's placer computes it.
func (v *gpuView) base(n fwk.NodeInfo, c *scorer) *base {
	p := c.placer(v.shape)
	if b := v.kept; b != nil && b.rev == c.set.rev {
		b.placer = p
		return b
	}
	cpu, mem := cpuMemLeft(n)
	fn := allocator.FragNode{MilliCPULeft: cpu, MemoryMiBLeft: mem, Model: v.shape.model(), GPUMilliLeft: v.shape.millis(v.left)}
	v.kept = &base{rev: c.set.rev, placer: p, fn: fn, before: p.Fragmentation(fn)}
	for _, l := range fn.GPUMilliLeft {
		v.kept.gpuLeft += l
	}
	return v.kept
}

// rebase makes v's base under c's placer set where v has one of an earlier
// set: the same node, its fragmentation under the later workload. A nil
// view has none.
func (v *gpuView) rebase(c *scorer) {
	if v == nil || v.kept == nil || v.kept.rev >= c.set.rev {
		return
	}
	b, p := v.kept, c.placer(v.shape)
	v.kept = &base{rev: c.set.rev, placer: p, fn: b.fn, before: p.Fragmentation(b.fn), gpuLeft: b.gpuLeft}
}

// cpuMemLeft is the milli-CPU and MiB of memory n has left, as a node's base
// and its stateKey read them.
func cpuMemLeft(n fwk.NodeInfo) (milliCPU, memoryMiB int64) {
	alloc, used := n.GetAllocatable(), n.GetRequested()
	return alloc.GetMilliCPU() - used.GetMilliCPU(), (alloc.GetMemory() - used.GetMemory()) >> 20
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
