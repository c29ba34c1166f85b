package mutate

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/poolowner"
)

// LabelManaged marks every pod gpuadmit places on a GPU pool, so that a
// replica's pod cache (free capacity, share claim templates) holds those
// pods and no others.
const LabelManaged = "gpuadmit.io/managed"

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

// roomFunc says why pool has no room for demand (GPU resources) and
// compute (the pod's CPU and memory, podCompute) on nodes, or "".
type roomFunc func(pool *inventory.Pool, nodes []inventory.Node, demand, compute map[string]int64) string

// room is the free-capacity check of one decision: nil (allocatable only)
// where no Capacity is wired; on a re-decision of a pod gpuadmit already
// admitted, only the pool its record names has room, since the pools that
// were full then need not be now, and the pod's resources cannot change.
func (m *Mutator) room(ctx context.Context, req Request) roomFunc {
	c := m.opts.Capacity
	if c == nil {
		return nil
	}
	if req.recordedPool != "" {
		return func(pool *inventory.Pool, _ []inventory.Node, _, _ map[string]int64) string {
			if pool.Name == req.recordedPool {
				return ""
			}
			return fmt.Sprintf("gpuadmit's record names pool %s, taken when this pool looked full", req.recordedPool)
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

// noteAdmitted tells the Capacity what a freshly admitted pod will take.
// Dry runs and re-decisions of pods already admitted take nothing, and
// neither does a pod its namespace's gpuadmit ResourceQuota will refuse:
// the API server runs ResourceQuota after the webhook, so that pod never
// comes. Pods placed by DRA alternatives never get here (placeAlternatives):
// the scheduler counts their devices exactly, on no guess of the webhook's.
func (m *Mutator) noteAdmitted(req Request, pod *corev1.Pod, ch *choice) {
	if m.opts.Capacity == nil || req.DryRun || req.Template || req.recordedPool != "" {
		return
	}
	if quotaRefuses(req.Quota, ch.demand) != "" {
		return
	}
	m.opts.Capacity.Admitted(pod, ch.pool.Name, ch.demand)
}

// quotaRefuses names a resource of demand that the quota's status has less
// left of than demand asks, or "". The status is the quota's cached
// usage. Where it lags a deletion, a pod that will be created is not
// entered and goes uncounted until the cache shows it, for a moment; where
// it lags a creation, ResourceQuota may refuse a pod this lets through,
// and the ledger drops that pod's entry once the cache shows a later
// admission (pkg/webhook's ledgerOvertake).
func quotaRefuses(q *corev1.ResourceQuota, demand map[string]int64) string {
	for r, want := range demand {
		if left, ok := quotaLeft(q, r); ok && left < want {
			return r
		}
	}
	return ""
}

// bestEffort is the explanation's note on how the pool was checked.
func bestEffort(ch *choice) string {
	if len(ch.full) > 0 {
		return fmt.Sprintf("No pool offered had room (%s), so the pod waits for room on pool %s, the first whose nodes could hold it; "+
			"this is best effort: a pod's resources cannot change once it is created, and the scheduler decides where it runs.",
			strings.Join(ch.full, "; "), ch.pool.Name)
	}
	if !ch.roomChecked {
		return "Pools were checked against their nodes' allocatable only, not against what pods already hold (no pod cache is wired, as in the offline CLI)."
	}
	if ch.priced {
		return "gpuadmit took, of the pools that looked free after the pods bound, nominated or admitted to them, the one of least price " +
			"(the expected demand of pods that only some GPU models can serve, over its free GPU; ties keep the policy's order); this is best effort: " +
			"a pod's resources cannot change once it is created, and the scheduler decides where it runs."
	}
	return "gpuadmit took the first pool that looked free, after the pods bound, nominated or admitted to it; this is best effort: " +
		"a pod's resources cannot change once it is created, and the scheduler decides where it runs."
}

// poolMark precedes the pool's name in gpuadmit.io/decision (decisionText).
const poolMark = poolowner.PoolMark

// PoolOf is the pool gpuadmit's record on pod names, or "" when it has none.
func PoolOf(pod *corev1.Pod) string { return poolowner.PoolOf(pod) }

// PoolsOf is every pool gpuadmit's record lets pod wait on: PoolOf's, or
// the pools of its DRA alternatives; none when it has no record.
func PoolsOf(pod *corev1.Pod) []string { return poolowner.PoolsOf(pod) }

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
