package webhook

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// tally keeps, by placement key (a node, or pendingPrefix+pool), the running
// sum of the GPU requests of gpuadmit's pods there, updated by the Pod
// informer's events. A decision reads a pool's sums in time proportional to
// its nodes; listing and adding up the pods per decision grew with every
// pod waiting for a node, and cost more than the decision itself.
type tally struct {
	mu    sync.Mutex
	byPod map[types.NamespacedName]placed
	sums  map[string]map[string]int64
}

// placed is where one pod counts, and what.
type placed struct {
	key string
	req map[string]int64
}

func newTally() *tally {
	return &tally{byPod: map[types.NamespacedName]placed{}, sums: map[string]map[string]int64{}}
}

// set counts p where it now holds capacity, instead of where it did, and
// returns where and what (key "" for a pod that holds nothing).
func (t *tally) set(p *corev1.Pod) placed {
	next := placed{key: placement(p)}
	if next.key != "" {
		next.req = heldRequests(p)
	}
	id := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop(id)
	if next.key == "" {
		return next
	}
	t.byPod[id] = next
	sum := t.sums[next.key]
	if sum == nil {
		sum = map[string]int64{}
		t.sums[next.key] = sum
	}
	for r, q := range next.req {
		sum[r] += q
	}
	return next
}

// remove stops counting p. Pods are told apart by namespace and name: at
// any moment one pod has them, and a pod made again under them is a delete
// and an add.
func (t *tally) remove(p *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
}

// drop takes a pod's contribution out; t.mu is held.
func (t *tally) drop(id types.NamespacedName) {
	old, ok := t.byPod[id]
	if !ok {
		return
	}
	delete(t.byPod, id)
	sum := t.sums[old.key]
	for r, q := range old.req {
		if sum[r] -= q; sum[r] == 0 {
			delete(sum, r)
		}
	}
	if len(sum) == 0 {
		delete(t.sums, old.key)
	}
}

// get is a copy of the sums at key; nil when nothing counts there.
// onNodes is what the pods on each of nodes (sorted by name, as a pool's
// are) hold, for the nodes whose pods
// hold anything, under one lock: from the nodes, or, where fewer nodes have
// pods than nodes are asked for, from the sums.
func (t *tally) onNodes(nodes []inventory.Node) map[string]map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[string]int64{}
	if len(t.sums) < len(nodes) {
		for key, s := range t.sums {
			if _, ok := slices.BinarySearchFunc(nodes, key, func(n inventory.Node, name string) int { return strings.Compare(n.Name, name) }); ok {
				out[key] = maps.Clone(s)
			}
		}
		return out
	}
	for _, n := range nodes {
		if s, ok := t.sums[n.Name]; ok {
			out[n.Name] = maps.Clone(s)
		}
	}
	return out
}

func (t *tally) get(key string) map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sums[key]; ok {
		return maps.Clone(s)
	}
	return nil
}
