package webhook

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// placementIndex indexes gpuadmit's pods in the cache by where they hold
// capacity: the node they are bound or nominated to, or, on none yet, their pool.
const placementIndex = "gpuadmit.placement"

// pendingPrefix starts the index key of a pool's pods on no node; a node's
// name cannot contain ':', so it never collides with one.
const pendingPrefix = "pool:"

// placementKeys is the IndexerFunc of placementIndex. Pods that finished
// hold nothing and are not indexed.
func placementKeys(o client.Object) []string {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	switch {
	case p.Spec.NodeName != "":
		return []string{p.Spec.NodeName}
	case p.Status.NominatedNodeName != "":
		return []string{p.Status.NominatedNodeName}
	}
	if pool := mutate.PoolOf(p); pool != "" {
		return []string{pendingPrefix + pool}
	}
	return nil
}

// capacity is mutate.Capacity over the webhook's cache of gpuadmit's pods
// (label gpuadmit.io/managed, indexed by placementIndex) and the ledger of
// what this replica admitted that the cache has not shown yet.
type capacity struct {
	pods   client.Reader
	ledger *ledger
	log    logr.Logger
}

var _ mutate.Capacity = (*capacity)(nil)

// newCapacity reads pods from a cache indexed by placementIndex; the caller
// wires Handler to that cache's Pod informer. A nil clock is the real one.
func newCapacity(pods client.Reader, clk clock.PassiveClock, log logr.Logger) *capacity {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &capacity{pods: pods, ledger: newLedger(clk, ledgerTTL), log: log}
}

// Held sums the GPU requests of the pool's pods, node by node and pending.
// A node whose pods cannot be listed counts as empty (allocatable only),
// and the failure is logged.
func (c *capacity) Held(ctx context.Context, pool *inventory.Pool) inventory.Held {
	h := inventory.Held{ByNode: make(map[string]map[string]int64, len(pool.Nodes)), Pending: c.ledger.pending(pool.Name)}
	for _, n := range pool.Nodes {
		used, err := c.sum(ctx, n.Name)
		if err != nil {
			c.log.Error(err, "count the pods on a node; taking its allocatable as free", "node", n.Name)
		}
		h.ByNode[n.Name] = used
	}
	pending, err := c.sum(ctx, pendingPrefix+pool.Name)
	if err != nil {
		c.log.Error(err, "count the pods waiting for a node", "pool", pool.Name)
	}
	for r, q := range pending {
		h.Pending[r] += q
	}
	return h
}

// sum adds up the GPU requests of the pods under one index key.
func (c *capacity) sum(ctx context.Context, key string) (map[string]int64, error) {
	var pods corev1.PodList
	if err := c.pods.List(ctx, &pods, client.MatchingFields{placementIndex: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list pods at %s: %w", key, err)
	}
	out := map[string]int64{}
	for i := range pods.Items {
		for r, q := range gpuRequests(&pods.Items[i]) {
			out[r] += q
		}
	}
	return out, nil
}

// gpuRequests are the pod's GPU and accounting requests as the scheduler counts them.
func gpuRequests(p *corev1.Pod) map[string]int64 {
	out := map[string]int64{}
	for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true}) {
		if inventory.IsGPUResource(string(r)) {
			out[string(r)] = q.Value()
		}
	}
	return out
}

// Admitted counts pod against pool until the cache shows it.
func (c *capacity) Admitted(pod *corev1.Pod, pool string, demand map[string]int64) {
	c.ledger.add(pod, pool, demand)
}

// Handler drops a pod's admission from the ledger once the cache shows the
// pod: from then on the index counts it. The indexer is updated before
// handlers run, so the pod is never missing from both.
func (c *capacity) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				c.ledger.seen(p)
			}
		},
	}
}
