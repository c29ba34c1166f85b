package decide

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// Capacity says what pods already hold of a pool, so that the fallback
// chain moves on from a pool that is full, not only from one too small.
type Capacity interface {
	// Held is what the pool's pods hold now: those bound or nominated to
	// each node, and those on no node yet, this replica's admissions that
	// its cache has not shown yet included.
	Held(ctx context.Context, pool *inventory.Pool) inventory.Held
	// Admitted notes that this replica just admitted pod to pool with
	// demand, so that the next decisions count it before the cache shows it.
	Admitted(pod *corev1.Pod, pool string, demand map[string]int64)
}

// Room is what the choice of one pool reads beyond the nodes'
// allocatable. The zero Room checks allocatable only and keeps the
// policy's order.
type Room struct {
	// Capacity, when set, makes the choice look at free capacity: a pool
	// is taken only if, after what its pods hold, one node the pod may run
	// on and the pool as a whole still have room for it. Nil checks the
	// nodes' allocatable only, as if the cluster were empty.
	Capacity Capacity
	// Demand, with Capacity, makes the pick take, among the pools with
	// room, the one whose model is of least price (pricer). Nil takes the
	// first pool with room in the policy's order.
	Demand Demand
	// Recorded is the pool gpuadmit's record names, where a pod it already
	// admitted is decided again: only that pool has room, since the pools
	// that were full then need not be now, and the pod's resources cannot
	// change; the pick keeps the policy's order. Empty for a new pod.
	Recorded string
}

// roomFunc says why pool has no room for demand (GPU resources) and
// compute (the pod's CPU and memory, podCompute) on nodes, or "".
type roomFunc func(pool *inventory.Pool, nodes []inventory.Node, demand, compute map[string]int64) string

// check is the free-capacity check of one decision: nil (allocatable only)
// where no Capacity is set; on a re-decision of a pod gpuadmit already
// admitted, only the pool its record names has room.
func (r Room) check(ctx context.Context) roomFunc {
	c := r.Capacity
	if c == nil {
		return nil
	}
	if r.Recorded != "" {
		return func(pool *inventory.Pool, _ []inventory.Node, _, _ map[string]int64) string {
			if pool.Name == r.Recorded {
				return ""
			}
			return fmt.Sprintf("gpuadmit's record names pool %s, taken when this pool looked full", r.Recorded)
		}
	}
	return func(pool *inventory.Pool, nodes []inventory.Node, demand, compute map[string]int64) string {
		return fullReason(c.Held(ctx, pool), pool, nodes, demand, compute)
	}
}

// fullReason says why the pool is full for demand, or "" when it has room:
// one node the pod may run on must have demand free, and the pod's CPU and
// memory (compute) beside it, and the pool as a whole must have demand free
// after its pods that wait for a node.
//
// The CPU and memory held on a node are those of gpuadmit's pods, the only
// pods the webhook caches: other pods (DaemonSets, CPU-only workloads) are
// not counted, so a node looks to have more free than it has. The check
// therefore skips a pool only where gpuadmit's own pods leave no node the
// CPU or memory the pod asks; it never skips one that has room.
func fullReason(held inventory.Held, pool *inventory.Pool, nodes []inventory.Node, demand, compute map[string]int64) string {
	if !held.FitsNode(nodes, demand, nil) {
		return fmt.Sprintf("full: no node of its %d the pod may run on has %s free (pods bound or nominated to them hold the rest)",
			len(nodes), formatDemand(demand))
	}
	if len(compute) > 0 && !held.FitsNode(nodes, demand, compute) {
		return fmt.Sprintf("full: no node of its %d the pod may run on with %s free also has %s free (gpuadmit's pods bound or nominated there hold the rest)",
			len(nodes), formatDemand(demand), formatCompute(compute))
	}
	free := held.PoolFree(pool, demand)
	for r, q := range demand {
		if free[r] < q {
			return fmt.Sprintf("full: pods admitted to it and not yet on a node will take %s=%d, which leaves %s=%d of the %s=%d asked",
				r, held.Pending[r], r, free[r], r, q)
		}
	}
	return ""
}

// podCompute is the pod's CPU (millicores) and memory (bytes) requests as
// the scheduler counts them (init containers, sidecars, overhead, pod-level
// resources); the webhook never changes them. Nil where it asks for neither.
func podCompute(pod *corev1.Pod) map[string]int64 {
	var out map[string]int64
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	if q, ok := reqs[corev1.ResourceCPU]; ok && !q.IsZero() {
		out = map[string]int64{inventory.ResourceCPU: q.MilliValue()}
	}
	if q, ok := reqs[corev1.ResourceMemory]; ok && !q.IsZero() {
		if out == nil {
			out = map[string]int64{}
		}
		out[inventory.ResourceMemory] = q.Value()
	}
	return out
}

// formatCompute writes compute as a pod's resources read: cpu=4, memory=16Gi.
func formatCompute(compute map[string]int64) string {
	var parts []string
	if c, ok := compute[inventory.ResourceCPU]; ok {
		parts = append(parts, "cpu="+resource.NewMilliQuantity(c, resource.DecimalSI).String())
	}
	if m, ok := compute[inventory.ResourceMemory]; ok {
		parts = append(parts, "memory="+resource.NewQuantity(m, resource.BinarySI).String())
	}
	return strings.Join(parts, ", ")
}
