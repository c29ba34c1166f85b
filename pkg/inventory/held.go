package inventory

// Held is what pods already hold of one pool's GPU resources, as a cache of
// the cluster's pods (and what a replica admitted a moment ago) shows it.
// Allocatable minus Held is what the pool has free.
type Held struct {
	// ByNode sums, per node name, the GPU resources of the pods bound or
	// nominated to that node, and their CPU (ResourceCPU, millicores) and
	// memory (ResourceMemory, bytes) requests.
	ByNode map[string]map[string]int64
	// Pending sums the GPU resources of the pool's pods that are on no node
	// yet: the scheduler may put each on any node of the pool, so they are
	// counted against the pool as a whole.
	Pending map[string]int64
}

// FitsNode reports whether one of nodes has the GPU resources of demand
// free and, on a node that states its CPU and memory (Node.Compute), the
// CPU and memory of compute as well (keys ResourceCPU in millicores and
// ResourceMemory in bytes): a pod runs on one node, which must hold all of
// it at once. ByNode holds what the pods there request of both.
func (h Held) FitsNode(nodes []Node, demand, compute map[string]int64) bool {
	for _, n := range nodes {
		if h.fits(n, demand) && h.computeFits(n, compute) {
			return true
		}
	}
	return false
}

// computeFits reports whether n has compute free; a node that does not
// state its CPU and memory is not checked for them.
func (h Held) computeFits(n Node, compute map[string]int64) bool {
	if n.Compute == nil {
		return true
	}
	for r, q := range compute {
		if max(n.Compute[r]-h.ByNode[n.Name][r], 0) < q {
			return false
		}
	}
	return true
}

// free is what node n has left of resource r: decisions ask this of every
// node of a pool, so it makes no map.
func (h Held) free(n Node, r string) int64 {
	return max(n.Allocatable[r]-h.ByNode[n.Name][r], 0)
}

// fits reports whether n has demand free.
func (h Held) fits(n Node, demand map[string]int64) bool {
	for r, q := range demand {
		if h.free(n, r) < q {
			return false
		}
	}
	return true
}

// PoolFree is what the pool's nodes have free in all, less what its pending
// pods will take. A node's free is its allocatable less what its pods hold,
// never below zero; summed, that is the pool's Allocatable less, for the
// nodes whose pods hold anything, the lesser of held and allocatable, so
// a decision reads the nodes with pods, not every node of the pool.
func (h Held) PoolFree(p *Pool, demand map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(demand))
	for r := range demand {
		free := p.Allocatable[r]
		for name, used := range h.ByNode {
			if n, ok := p.node(name); ok {
				free -= min(max(used[r], 0), n.Allocatable[r])
			}
		}
		out[r] = max(free-h.Pending[r], 0)
	}
	return out
}
