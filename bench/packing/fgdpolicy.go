package packing

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// typicalShare is the share of the workload's pods that the kinds FGD
// learns must cover, most popular kinds first (the artifact's
// podPopularityThreshold of 95%).
const typicalShare = 0.95

// FGD is Fragmentation Gradient Descent: place a pod where it increases the
// node's expected fragmentation (allocator.Fragmentation over the target
// workload's kinds of request) the least, and a share on the GPU of that node
// where it does.
type FGD struct {
	tasks []allocator.FragTask
	cache fragCache
}

// fragCache remembers each node's fragmentation as of one version of that
// node, indexed by NodeState.Index.
type fragCache []struct {
	node    *NodeState
	version int
	frag    float64
}

// get returns n's fragmentation, computing it with frag when n changed
// since the last call.
func (c *fragCache) get(n *NodeState, frag func(allocator.FragNode) float64) float64 {
	if len(*c) <= n.Index {
		*c = append(*c, make(fragCache, n.Index+1-len(*c))...)
	}
	e := &(*c)[n.Index]
	if e.node != n || e.version != n.Version {
		e.node, e.version, e.frag = n, n.Version, frag(fragNode(n))
	}
	return e.frag
}

// fragNode is what fragmentation reads of n.
func fragNode(n *NodeState) allocator.FragNode {
	return allocator.FragNode{MilliCPULeft: n.CPULeft, MemoryMiBLeft: n.MemLeft, GPUMilliLeft: n.GPULeft, Model: n.Model}
}

// NewFGD learns the target workload's distribution of requests from workload.
func NewFGD(workload []Pod) *FGD {
	return &FGD{tasks: TypicalTasks(workload, typicalShare)}
}

// TypicalTasks counts the kinds of request (CPU, GPU per GPU, GPU count,
// model) in workload, keeps the most popular until they cover share of the
// pods, and weighs each by its popularity among those kept.
func TypicalTasks(workload []Pod, share float64) []allocator.FragTask {
	return typicalTasks(workload, share, false)
}

// typicalTasks is TypicalTasks, with the kinds' memory when withMemory.
func typicalTasks(workload []Pod, share float64, withMemory bool) []allocator.FragTask {
	counts := map[allocator.FragTask]float64{}
	for _, p := range workload {
		k := allocator.FragTask{MilliCPU: p.MilliCPU, GPUMilli: p.GPUMilli, GPUs: p.GPUs, Spec: p.Spec}
		if withMemory {
			k.MemoryMiB = p.MemoryMiB
		}
		counts[k]++
	}
	kinds := make([]allocator.FragTask, 0, len(counts))
	for k, c := range counts {
		k.Weight = c
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return moreTypical(kinds[i], kinds[j]) })
	var cum float64
	n := 0
	for n < len(kinds) && cum < share*float64(len(workload)) {
		cum += kinds[n].Weight
		n++
	}
	kinds = kinds[:n]
	for i := range kinds {
		kinds[i].Weight /= cum
	}
	return kinds
}

// moreTypical orders kinds by count, then by CPU, GPU share, GPU count and
// model, all descending, so the order never depends on map iteration.
func moreTypical(a, b allocator.FragTask) bool {
	switch {
	case a.Weight != b.Weight:
		return a.Weight > b.Weight
	case a.MilliCPU != b.MilliCPU:
		return a.MilliCPU > b.MilliCPU
	case a.MemoryMiB != b.MemoryMiB:
		return a.MemoryMiB > b.MemoryMiB
	case a.GPUMilli != b.GPUMilli:
		return a.GPUMilli > b.GPUMilli
	case a.GPUs != b.GPUs:
		return a.GPUs > b.GPUs
	}
	return a.Spec > b.Spec
}

// Score is ⌊100·sigmoid(−Δfrag/1000)⌋ for the best GPU choice, Δfrag being
// the growth of the node's fragmentation in milli-GPU, as in the artifact.
func (f *FGD) Score(n *NodeState, p Pod) float64 {
	s, _ := f.best(n, p)
	return s
}

// GPUs is the share's GPU of least fragmentation growth, the first idle
// GPUs for whole GPUs.
func (f *FGD) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int {
	if !p.Shared() {
		return firstFree(n.GPULeft, p.GPUs)
	}
	_, g := f.best(n, p)
	return []int{g}
}

func (f *FGD) best(n *NodeState, p Pod) (score float64, gpu int) {
	before := f.fragOf(n)
	after := allocator.FragNode{MilliCPULeft: n.CPULeft - p.MilliCPU, GPUMilliLeft: append([]int64(nil), n.GPULeft...), Model: n.Model}
	if !p.Shared() {
		for _, g := range firstFree(n.GPULeft, p.GPUs) {
			after.GPUMilliLeft[g] -= p.GPUMilli
		}
		return fgdScore(before - allocator.Fragmentation(after, f.tasks)), -1
	}
	score, gpu = -1, -1
	for i, g := range n.GPULeft {
		if g < p.GPUMilli || seenBefore(n.GPULeft, i) {
			continue
		}
		after.GPUMilliLeft[i] -= p.GPUMilli
		if s := fgdScore(before - allocator.Fragmentation(after, f.tasks)); s > score {
			score, gpu = s, i
		}
		after.GPUMilliLeft[i] += p.GPUMilli
	}
	return score, gpu
}

// seenBefore reports whether a GPU before i has as much left as GPU i: the
// fragmentation is the same on either, and the first one wins.
func seenBefore(left []int64, i int) bool {
	for j := range i {
		if left[j] == left[i] {
			return true
		}
	}
	return false
}

func fgdScore(delta float64) float64 {
	return float64(int64(maxScore / (1 + math.Exp(-delta/1000))))
}

func (f *FGD) fragOf(n *NodeState) float64 {
	return f.cache.get(n, func(fn allocator.FragNode) float64 { return allocator.Fragmentation(fn, f.tasks) })
}
