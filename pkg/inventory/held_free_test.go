package inventory

import (
	"math/rand/v2"
	"testing"
)

// mapFree is a node's free resources as a map, the form FitsNode and
// PoolFree used to build for every node: the reference they must agree with.
func mapFree(h Held, n Node) map[string]int64 {
	out := make(map[string]int64, len(n.Allocatable))
	for r, q := range n.Allocatable {
		out[r] = max(q-h.ByNode[n.Name][r], 0)
	}
	return out
}

// TestHeldWithoutMapsMatchesFree: FitsNode and PoolFree, which read each
// node's free resources without building a map per node, give what the map gives.
func TestHeldWithoutMapsMatchesFree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	res := []string{"nvidia.com/gpu", "gpuadmit.io/gpu-memory-mib", "gpuadmit.io/h100-80gb-mib", "nvidia.com/mig-1g.10gb"}
	for range 500 {
		pool := &Pool{}
		h := Held{ByNode: map[string]map[string]int64{}, Pending: map[string]int64{}}
		for i := range 1 + r.IntN(6) {
			n := Node{Name: string(rune('a' + i)), Allocatable: map[string]int64{}}
			h.ByNode[n.Name] = map[string]int64{}
			for _, x := range res {
				if r.IntN(4) > 0 {
					n.Allocatable[x] = int64(r.IntN(9))
				}
				if r.IntN(3) == 0 {
					h.ByNode[n.Name][x] = int64(r.IntN(12))
				}
			}
			pool.Nodes = append(pool.Nodes, n)
		}
		pool.Allocatable = map[string]int64{}
		for _, n := range pool.Nodes {
			for x, q := range n.Allocatable {
				pool.Allocatable[x] += q
			}
		}
		h.ByNode["elsewhere"] = map[string]int64{res[0]: 3} // a node of another pool counts for none here
		demand := map[string]int64{}
		for _, x := range res {
			if r.IntN(2) == 0 {
				demand[x] = int64(r.IntN(6))
			}
			h.Pending[x] = int64(r.IntN(5))
		}
		wantFits := false
		for _, n := range pool.Nodes {
			ok := true
			for x, q := range demand {
				if mapFree(h, n)[x] < q {
					ok = false
				}
			}
			wantFits = wantFits || ok
		}
		if got := h.FitsNode(pool.Nodes, demand, nil); got != wantFits {
			t.Fatalf("FitsNode = %v, Free says %v (nodes %+v, held %+v, demand %v)", got, wantFits, pool.Nodes, h.ByNode, demand)
		}
		got := h.PoolFree(pool, demand)
		for x := range demand {
			var sum int64
			for _, n := range pool.Nodes {
				sum += mapFree(h, n)[x]
			}
			if want := max(sum-h.Pending[x], 0); got[x] != want {
				t.Fatalf("PoolFree[%s] = %d, Free says %d", x, got[x], want)
			}
		}
	}
}
