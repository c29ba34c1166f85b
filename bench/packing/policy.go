package packing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// Policy scores the nodes a pod fits and picks its GPUs on the chosen node.
// The simulator places a pod on a node of highest score, ties going to the
// first node of the run's seeded order, as in the artifact (choose).
type Policy interface {
	// Score is higher for a better node; it is only asked about nodes n
	// where n.Fits(p).
	Score(n *NodeState, p Pod) float64
	// GPUs returns the GPU indexes of n that p gets (none for a pod
	// without GPU); r is the run's random source.
	GPUs(n *NodeState, p Pod, r *rand.Rand) []int
}

// The normalisation constants of the FGD artifact (largest node of the
// trace): 128 CPUs and 8 GPUs.
const (
	maxSpecCPU = 128000
	maxSpecGPU = 8000
	maxScore   = 100
)

// Policies lists the policy names NewPolicy knows, in the paper's order.
var Policies = []string{"random", "dotprod", "clustering", "packing", "bestfit", "fgd", "gpuadmit"}

// NewPolicy returns the policy called name, one of Policies or Variants;
// FGD and gpuadmit need the target workload to learn its distribution of
// requests, gpuadmit also the cluster's nodes (their GPUs per model).
func NewPolicy(name string, workload []Pod, nodes []Node) (Policy, error) {
	if v, ok, err := ParseProductVariant(name); ok {
		if err != nil {
			return nil, err
		}
		return NewProductVariant(workload, nodes, v)
	}
	if order, ok := pinOrders[strings.ToLower(name)]; ok {
		return NewPinned(workload, nodes, order)
	}
	if base, found := strings.CutSuffix(strings.ToLower(name), "+names"); found {
		if order, ok := pinOrders[base]; ok {
			return newPinned(workload, nodes, order, uniformGPUMemoryMiB())
		}
	}
	switch strings.ToLower(name) {
	case "random":
		return Random{}, nil
	case "dotprod":
		return DotProd{}, nil
	case "clustering":
		return Clustering{}, nil
	case "packing":
		return Packing{}, nil
	case "bestfit", "best-fit":
		return BestFit{}, nil
	case "fgd":
		return NewFGD(workload), nil
	case "gpuadmit":
		return NewGPUAdmit(workload, nodes), nil
	case "gpuadmit-firstfit":
		return NewGPUAdmitFirstFit(workload, nodes), nil
	case "bestfit-firstfit":
		return BestFitFirstFit{}, nil
	case "product":
		return NewProduct(workload, nodes)
	}
	return nil, fmt.Errorf("unknown policy %q (known: %s)", name, strings.Join(append(slices.Clone(Policies), Variants...), ", "))
}

// Random places a pod on any node it fits, and a share on any GPU that holds it.
type Random struct{}

// Score is the same for every node, so the choice is uniform.
func (Random) Score(*NodeState, Pod) float64 { return 0 }

// GPUs picks a random GPU for a share, the first idle GPUs otherwise.
func (Random) GPUs(n *NodeState, p Pod, r *rand.Rand) []int {
	if !p.Shared() {
		return firstFree(n.GPULeft, p.GPUs)
	}
	var fit []int
	for i, g := range n.GPULeft {
		if g >= p.GPUMilli {
			fit = append(fit, i)
		}
	}
	return []int{fit[r.IntN(len(fit))]}
}

// DotProd is Tetris's alignment heuristic as FGD's artifact runs it: the
// smaller the dot product of the node's free (CPU, total GPU) and the pod's
// request, both scaled by the largest node, the better.
type DotProd struct{}

// Score is ⌊100·(1 − dot/2)⌋.
func (DotProd) Score(n *NodeState, p Pod) float64 {
	dot := float64(n.CPULeft) / maxSpecCPU * float64(p.MilliCPU) / maxSpecCPU
	dot += float64(n.GPUMilliLeft()) / maxSpecGPU * float64(p.GPUMilliTotal()) / maxSpecGPU
	return float64(int64(maxScore * (1 - dot/2)))
}

// GPUs is best fit.
func (DotProd) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return bestFitGPUs(n, p) }

// BestFit prefers the node with the least CPU and GPU left after placing,
// half weight each, scaled by the largest node.
type BestFit struct{}

// Score is ⌊100·(1 − ½(cpu left−req)/128 CPUs − ½(GPU left−req)/8 GPUs)⌋.
func (BestFit) Score(n *NodeState, p Pod) float64 {
	s := 0.5*float64(n.CPULeft-p.MilliCPU)/maxSpecCPU + 0.5*float64(n.GPUMilliLeft()-p.GPUMilliTotal())/maxSpecGPU
	return float64(int64((1 - s) * maxScore))
}

// GPUs is best fit.
func (BestFit) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return bestFitGPUs(n, p) }

// gpuTag is a pod's GPU-request class for GPU Clustering: a share, or the
// number of whole GPUs.
func gpuTag(p Pod) string {
	if p.Shared() {
		return "share"
	}
	return fmt.Sprintf("%d-gpu", p.GPUs)
}

// Clustering (GPU Clustering) puts pods of one GPU-request class together:
// nodes holding only that class first, then nodes holding it among others,
// then idle nodes, then nodes of other classes; within a band, fuller first.
type Clustering struct{}

// Score is band·25 + ⌊25·(8 GPUs − GPU left)/8 GPUs⌋; 0 for a pod without GPU.
func (Clustering) Score(n *NodeState, p Pod) float64 {
	if p.GPUs == 0 {
		return 0
	}
	band := int64(0)
	switch {
	case n.tags[gpuTag(p)] > 0 && len(n.tags) == 1:
		band = 3
	case n.tags[gpuTag(p)] > 0:
		band = 2
	case len(n.tags) == 0:
		band = 1
	}
	return float64(maxScore/4*(maxSpecGPU-n.GPUMilliLeft())/maxSpecGPU + band*maxScore/4)
}

// GPUs is best fit.
func (Clustering) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return bestFitGPUs(n, p) }

// Packing (GPU Packing) fills GPUs already shared first, then idle GPUs on
// nodes already in use, and idle nodes last.
type Packing struct{}

// Score: on a shared GPU 100 − (% left on the GPUs used)/10, at least 50; on
// idle GPUs of a used node 50 − idle GPUs taken, at least 33; on an idle
// node max(33 − its GPUs, its GPUs). A pod without GPU scores 0.
func (Packing) Score(n *NodeState, p Pod) float64 {
	if p.GPUs == 0 {
		return 0
	}
	free := n.FullyFree()
	if free == len(n.GPULeft) {
		return float64(max(maxScore/3-free, free))
	}
	idleTaken, pctLeft := packingUse(n.GPULeft, p)
	if idleTaken > 0 {
		return float64(max(maxScore/2-idleTaken, maxScore/3))
	}
	return float64(max(maxScore-pctLeft/10, maxScore/2))
}

// GPUs is best fit.
func (Packing) GPUs(n *NodeState, p Pod, _ *rand.Rand) []int { return bestFitGPUs(n, p) }

// packingUse walks the GPUs least-left first, as a best-fit placement
// would, and returns how many idle GPUs p takes and the sum of the percent
// left on the GPUs it takes.
func packingUse(left []int64, p Pod) (idleTaken int, pctLeft int64) {
	need := p.GPUs
	for _, i := range ascending(left) {
		if need == 0 {
			break
		}
		if left[i] >= p.GPUMilli {
			need--
			pctLeft += left[i] * 100 / milliPerGPU
			if left[i] == milliPerGPU {
				idleTaken++
			}
		}
	}
	return idleTaken, pctLeft
}

// ascending returns the GPU indexes by milli-GPU left, least first, ties by index.
func ascending(left []int64) []int {
	idx := make([]int, len(left))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return left[idx[a]] < left[idx[b]] })
	return idx
}
