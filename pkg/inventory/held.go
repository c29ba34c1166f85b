package inventory

// Held is what pods already hold of one pool's GPU resources, as a cache of
// the cluster's pods (and what a replica admitted a moment ago) shows it.
// Allocatable minus Held is what the pool has free.
type Held struct {
	// ByNode sums, per node name, the GPU resources of the pods bound or
	// nominated to that node.
	ByNode map[string]map[string]int64
	// Pending sums the GPU resources of the pool's pods that are on no node
	// yet: the scheduler may put each on any node of the pool, so they are
	// counted against the pool as a whole.
	Pending map[string]int64
}

// FitsNode reports whether one of nodes has demand free.
func (h Held) FitsNode(nodes []Node, demand map[string]int64) bool {
	for _, n := range nodes {
		if h.fits(n, demand) {
			return true
		}
	}
	return false
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
