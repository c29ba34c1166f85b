package webhook

import (
	"context"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
)

// pendingPrefix starts the index key of a pool's pods on no node; a node's
// name cannot contain ':', so it never collides with one.
const pendingPrefix = "pool:"

// placement is where a pod holds capacity: the node it is bound or
// nominated to, or, on none yet, pendingPrefix+its pool; "" for a pod that
// finished, which holds nothing.
func placement(p *corev1.Pod) string {
	switch {
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		return ""
	case p.Spec.NodeName != "":
		return p.Spec.NodeName
	case p.Status.NominatedNodeName != "":
		return p.Status.NominatedNodeName
	}
	if pool := mutate.PoolOf(p); pool != "" {
		return pendingPrefix + pool
	}
	return ""
}

// capacity is decide.Capacity over the webhook's cache of gpuadmit's pods
// (label gpuadmit.io/managed), summed by placement as its events arrive
// (tally), and the ledger of what this replica admitted that the cache has
// not shown yet.
type capacity struct {
	tally  *tally
	ledger *ledger
	// claims are the allocated claims of pods with DRA alternatives; nil
	// where the cluster serves no DRA.
	claims *altClaims
	// workload is what the pick of one pool knows of the cached pods
	// (decide.Demand), kept with the tally from the same events.
	workload *workload
	log      logr.Logger
}

var _ decide.Capacity = (*capacity)(nil)

// newCapacity counts the pods its Handler is told of, which the caller wires
// to the cache's Pod informer. A nil clock is the real one.
func newCapacity(clk clock.PassiveClock, log logr.Logger) *capacity {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &capacity{tally: newTally(), ledger: newLedger(clk, ledgerTTL), workload: newWorkload(), log: log}
}

// Held is what the pool's pods hold, node by node and pending; on a DRA
// pool, with what pods with DRA alternatives were allocated on its nodes.
func (c *capacity) Held(_ context.Context, pool *inventory.Pool) inventory.Held {
	h := inventory.Held{ByNode: c.tally.onNodes(pool.Nodes), Pending: c.ledger.pending(pool.Name)}
	for r, q := range c.tally.get(pendingPrefix + pool.Name) {
		h.Pending[r] += q
	}
	if c.claims != nil && pool.DRA {
		c.claims.addTo(h.ByNode, pool)
	}
	return h
}

// heldRequests are the pod's GPU and accounting requests as the scheduler
// counts them, and its CPU (millicores) and memory (bytes) requests, which
// a pool's room is checked against node by node (inventory.Held.FitsNode).
func heldRequests(p *corev1.Pod) map[string]int64 {
	out := map[string]int64{}
	for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true}) {
		if inventory.IsGPUResource(string(r)) {
			out[string(r)] = q.Value()
		}
	}
	for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
		switch r {
		case corev1.ResourceCPU:
			out[inventory.ResourceCPU] = q.MilliValue()
		case corev1.ResourceMemory:
			out[inventory.ResourceMemory] = q.Value()
		}
	}
	return out
}

// Admitted counts pod against pool until the cache shows it.
func (c *capacity) Admitted(pod *corev1.Pod, pool string, demand map[string]int64) {
	c.ledger.add(pod, pool, demand)
}

// Handler keeps the tally in step with the cache, and drops a pod's
// admission from the ledger once the cache shows the pod: the tally counts
// it first, so the pod is never missing from both.
func (c *capacity) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				c.workload.set(p, c.tally.set(p))
				c.ledger.seen(p)
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				c.workload.set(p, c.tally.set(p))
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				c.tally.remove(p)
				c.workload.remove(p)
			}
		},
	}
}
