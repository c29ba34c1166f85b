package packing

import (
	"math/rand/v2"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// bestFitTie scales the best-fit score (0…100) into the tie-break of
// GPUAdmit: it decides between nodes whose fragmentation growth differs by
// less than about one milli-GPU.
const bestFitTie = 1.0 / 100

// GPUAdmit is gpuadmit's own placement policy, the one pkg/allocator serves:
// the node and GPU of least allocator.Placer cost (the growth of the node's
// expected fragmentation plus that of the GPU it strands for want of CPU),
// ties going to the best fit (least CPU and GPU left). It departs from FGD
// in five ways, each measured in docs/placement.md and docs/benchmarks.md:
//
//   - every kind of request of the workload counts, not only the most
//     popular ones covering 95% of pods;
//   - a kind's memory counts: a node too short of memory for a kind
//     strands its idle GPUs for that kind as surely as one short of CPU;
//   - the growth itself is compared, not ⌊100·sigmoid(−Δ/1000)⌋, whose
//     integer steps turn most choices into ties;
//   - GPU a node's CPU cannot feed at the workload's CPU per GPU counts as
//     stranded before any kind stops fitting;
//   - a GPU of a model that pinned kinds need is priced at the share of
//     that model they are expected to take (allocator.Scarcity).
type GPUAdmit struct {
	placer *allocator.Placer
	before fragCache
}

// NewGPUAdmit learns every kind of request in workload, with its memory,
// and the GPUs of each model among nodes (the cluster), which price the
// GPUs that pinned kinds need (allocator.Scarcity).
func NewGPUAdmit(workload []Pod, nodes []Node) *GPUAdmit {
	p := allocator.NewPlacer(typicalTasks(workload, 1, true))
	p.SetSupply(Supply(nodes))
	return &GPUAdmit{placer: p}
}

// Supply is nodes' GPUs per model: the supply allocator.Scarcity weighs
// the pinned kinds' demand against.
func Supply(nodes []Node) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		if n.GPUs > 0 {
			out[n.Model] += n.GPUs
		}
	}
	return out
}

// Score is −cost + best fit/100.
func (g *GPUAdmit) Score(n *NodeState, p Pod) float64 {
	growth, _ := g.place(n, p)
	return -growth + bestFitTie*BestFit{}.Score(n, p)
}

// GPUs is the GPU choice of the least growth.
func (g *GPUAdmit) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int {
	_, gpus := g.place(n, p)
	return gpus
}

func (g *GPUAdmit) place(n *NodeState, p Pod) (float64, []int) {
	cost, gpus, _ := g.placer.Cost(fragNode(n), g.fragOf(n), allocator.FragTask{
		MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, GPUMilli: p.GPUMilli, GPUs: p.GPUs})
	return cost, gpus
}

func (g *GPUAdmit) fragOf(n *NodeState) float64 {
	return g.before.get(n, g.placer.Fragmentation)
}
