package webhook

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// placed is where one object counts (a node, or pendingPrefix+pool for a
// pod; "" where it holds nothing), and what: amounts by name.
type placed struct {
	key string
	req map[string]int64
}

// keyedSums keeps what each object (a pod, a claim, told apart by
// namespace and name) holds and where, and the running sum by key, so a
// reader asks for a pool's nodes in time proportional to them instead of
// adding up every object. It takes no lock: its owner holds its own.
type keyedSums struct {
	byID map[types.NamespacedName]placed
	sums map[string]map[string]int64
}

func newKeyedSums() keyedSums {
	return keyedSums{byID: map[types.NamespacedName]placed{}, sums: map[string]map[string]int64{}}
}

// put counts id at its new place instead of where it was; a place with
// key "" counts nowhere.
func (s *keyedSums) put(id types.NamespacedName, at placed) {
	s.drop(id)
	if at.key == "" {
		return
	}
	s.byID[id] = at
	sum := s.sums[at.key]
	if sum == nil {
		sum = map[string]int64{}
		s.sums[at.key] = sum
	}
	for name, q := range at.req {
		sum[name] += q
	}
}

// drop takes id's contribution out.
func (s *keyedSums) drop(id types.NamespacedName) {
	old, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	sum := s.sums[old.key]
	for name, q := range old.req {
		if sum[name] -= q; sum[name] == 0 {
			delete(sum, name)
		}
	}
	if len(sum) == 0 {
		delete(s.sums, old.key)
	}
}

// onNodes is a copy of the sums of the nodes (sorted by name, as a pool's
// are) where anything counts: from the nodes, or, where fewer keys count
// than nodes are asked for, from the sums.
func (s *keyedSums) onNodes(nodes []inventory.Node) map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	if len(s.sums) < len(nodes) {
		for key, sum := range s.sums {
			if _, ok := slices.BinarySearchFunc(nodes, key, func(n inventory.Node, name string) int { return strings.Compare(n.Name, name) }); ok {
				out[key] = maps.Clone(sum)
			}
		}
		return out
	}
	for _, n := range nodes {
		if sum, ok := s.sums[n.Name]; ok {
			out[n.Name] = maps.Clone(sum)
		}
	}
	return out
}

// get is a copy of the sum at key; nil when nothing counts there.
func (s *keyedSums) get(key string) map[string]int64 {
	if sum, ok := s.sums[key]; ok {
		return maps.Clone(sum)
	}
	return nil
}
