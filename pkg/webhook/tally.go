package webhook

import (
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
	mu   sync.Mutex
	pods keyedSums
}

func newTally() *tally {
	return &tally{pods: newKeyedSums()}
}

// set counts p where it now holds capacity, instead of where it did, and
// returns where and what (key "" for a pod that holds nothing).
func (t *tally) set(p *corev1.Pod) placed {
	next := placed{key: placement(p)}
	if next.key != "" {
		next.req = heldRequests(p)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods.put(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, next)
	return next
}

// remove stops counting p. Pods are told apart by namespace and name: at
// any moment one pod has them, and a pod made again under them is a delete
// and an add.
func (t *tally) remove(p *corev1.Pod) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pods.drop(types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
}

// onNodes is what the pods on each of nodes (sorted by name, as a pool's
// are) hold, for the nodes whose pods hold anything, under one lock.
func (t *tally) onNodes(nodes []inventory.Node) map[string]map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods.onNodes(nodes)
}

// get is a copy of the sums at key; nil when nothing counts there.
func (t *tally) get(key string) map[string]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pods.get(key)
}
