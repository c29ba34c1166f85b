package packing

import "github.com/gpuadmit/gpuadmit/pkg/allocator"

const milliPerGPU = allocator.MilliPerGPU

// NodeState is a node and what is left of it. Version changes on every
// placement, so a policy may cache what it computed from the state.
type NodeState struct {
	Node
	Index   int
	CPULeft int64
	MemLeft int64
	GPULeft []int64 // milli-GPU left on each GPU
	Version int
	// TieRank orders nodes whose scores tie, lowest first (see choose);
	// NewCluster sets the node's index, Simulate a seeded permutation.
	TieRank int
	tags    map[string]int // GPU-request classes of the pods placed (GPU Clustering)
}

// Cluster is the simulated cluster.
type Cluster struct {
	Nodes []*NodeState
}

// NewCluster returns nodes, all idle.
func NewCluster(nodes []Node) *Cluster {
	c := &Cluster{Nodes: make([]*NodeState, len(nodes))}
	for i, n := range nodes {
		left := make([]int64, n.GPUs)
		for g := range left {
			left[g] = milliPerGPU
		}
		c.Nodes[i] = &NodeState{Node: n, Index: i, CPULeft: n.MilliCPU, MemLeft: n.MemoryMiB,
			GPULeft: left, TieRank: i, tags: map[string]int{}}
	}
	return c
}

// CapacityMilli is the cluster's GPU capacity in milli-GPU.
func (c *Cluster) CapacityMilli() int64 {
	var s int64
	for _, n := range c.Nodes {
		s += int64(n.GPUs) * milliPerGPU
	}
	return s
}

// Fits reports whether p fits n: CPU, memory, GPU model (when p names one)
// and GPU (a share on one GPU with enough left, whole GPUs fully idle).
func (n *NodeState) Fits(p Pod) bool {
	if p.MilliCPU > n.CPULeft || p.MemoryMiB > n.MemLeft {
		return false
	}
	if p.GPUs == 0 {
		return true
	}
	if len(n.GPULeft) == 0 || !allocator.ModelAllowed(p.Spec, n.Model) {
		return false
	}
	return countAtLeast(n.GPULeft, p.GPUMilli) >= p.GPUs
}

// Assign places p on the GPUs gpus of n.
func (n *NodeState) Assign(p Pod, gpus []int) {
	n.CPULeft -= p.MilliCPU
	n.MemLeft -= p.MemoryMiB
	for _, g := range gpus {
		n.GPULeft[g] -= p.GPUMilli
	}
	if p.GPUs > 0 {
		n.tags[gpuTag(p)]++
	}
	n.Version++
}

// FullyFree is the number of GPUs of n with nothing allocated.
func (n *NodeState) FullyFree() int { return countAtLeast(n.GPULeft, milliPerGPU) }

// GPUMilliLeft is the milli-GPU left on n in all.
func (n *NodeState) GPUMilliLeft() int64 {
	var s int64
	for _, g := range n.GPULeft {
		s += g
	}
	return s
}

func countAtLeast(left []int64, milli int64) int {
	c := 0
	for _, g := range left {
		if g >= milli {
			c++
		}
	}
	return c
}

// firstFree returns the first k fully idle GPUs of n by index, as the
// simulator hands out whole GPUs.
func firstFree(left []int64, k int) []int {
	var out []int
	for i, g := range left {
		if len(out) == k {
			break
		}
		if g == milliPerGPU {
			out = append(out, i)
		}
	}
	return out
}

// bestFitGPUs is GPU selection by best fit: a share goes on the GPU with the
// least left that holds it, whole GPUs are the first idle ones.
func bestFitGPUs(n *NodeState, p Pod) []int {
	if !p.Shared() {
		return firstFree(n.GPULeft, p.GPUs)
	}
	g, _ := allocator.BestFit(n.GPULeft, p.GPUMilli)
	return []int{g}
}
