package packing

import (
	"math/rand/v2"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Variants are policies NewPolicy knows besides Policies, which the study
// runs only when named: the GPU choice of a DRA cluster, where the
// scheduler picks only the node and the DRA allocator the device
// (gpuadmit-firstfit, bestfit-firstfit); the product's path on DRA pools
// (product, see Product); and the product's path on pools the webhook pins,
// by each way of picking the pool (pinned, pinned-mostfree,
// pinned-scarcity, pinned-expected; see Pinned and PinOrder). Besides
// these, "product+MOD+…" names the product's path with some of
// gpuadmit-scheduler's departures from it (ProductVariant), and
// "pinned…+names" a pinned pick with the pools ordered by name, as in the
// replay, where every model's GPU has the same memory.
var Variants = []string{"gpuadmit-firstfit", "bestfit-firstfit",
	"product", "pinned", "pinned-mostfree", "pinned-scarcity", "pinned-expected"}

// firstFitGPUs is the DRA allocator's choice (k8s.io/dynamic-resource-allocation/structured)
// on devices published in GPU order: a share goes on the first GPU with
// room, whole GPUs are the first idle ones.
func firstFitGPUs(n *NodeState, p Pod) []int {
	if !p.Shared() {
		return firstFree(n.GPULeft, p.GPUs)
	}
	for i, g := range n.GPULeft {
		if g >= p.GPUMilli {
			return []int{i}
		}
	}
	return nil
}

// GPUAdmitFirstFit is gpuadmit's placement as gpuadmit-scheduler makes it
// in a DRA pool: the node of least allocator.Placer cost for the GPU the
// DRA allocator will give the pod (Placer.CostOn on the first fit), ties to
// the best fit, and that GPU. Against GPUAdmit, which also picks the GPU
// of least cost, it measures what choosing the GPU is worth.
type GPUAdmitFirstFit struct{ *GPUAdmit }

// NewGPUAdmitFirstFit learns the workload as NewGPUAdmit does.
func NewGPUAdmitFirstFit(workload []Pod, nodes []Node) GPUAdmitFirstFit {
	return GPUAdmitFirstFit{NewGPUAdmit(workload, nodes)}
}

// Score is −cost on the first-fit GPUs + best fit/100.
func (g GPUAdmitFirstFit) Score(n *NodeState, p Pod) float64 {
	cost, _ := g.placer.CostOn(fragNode(n), g.fragOf(n), allocator.FragTask{
		MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, GPUMilli: p.GPUMilli, GPUs: p.GPUs}, firstFitGPUs(n, p))
	return -cost + bestFitTie*BestFit{}.Score(n, p)
}

// GPUs is the first fit.
func (GPUAdmitFirstFit) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return firstFitGPUs(n, p) }

// BestFitFirstFit is BestFit's node choice (which does not depend on the
// GPU) with DRA's first-fit GPU: about what a stock scheduler scoring
// MostAllocated does in a DRA pool.
type BestFitFirstFit struct{ BestFit }

// GPUs is the first fit.
func (BestFitFirstFit) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return firstFitGPUs(n, p) }
