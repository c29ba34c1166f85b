package placement

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// claimHolder is the part of the scheduler's ResourceClaim tracker that
// tells what a node's claims hold: the claim as the tracker has it, and
// the allocation of a claim in flight (reserved, not yet written).
type claimHolder interface {
	claimGetter
	GetPendingAllocation(claimUID types.UID) *resourceapi.AllocationResult
}

// deviceKey names a device of gpuadmit's driver: pool (the node) and device.
type deviceKey struct{ pool, device string }

// held is what claims hold of gpuadmit's devices on one node: the devices
// a claim has alone, and the memory the shares of each other device consumed.
type held struct {
	whole  map[deviceKey]bool
	memory map[deviceKey]int64
}

// heldOn reads what the claims of the pods on n hold (pods bound, assumed
// or binding: the node's pods as the scheduler's cache has them), each claim
// once, allocated as the tracker has it or in flight. It reads the node's
// pods rather than GatherAllocatedState's cluster-wide state, which copies
// every allocation in the cluster on every call (milliseconds once
// thousands of claims are allocated); what it leaves out is a claim still
// allocated after its pods left the node, until the resource-claim
// controller deallocates it.
func heldOn(n fwk.NodeInfo, claims claimHolder) held {
	var h held
	if claims == nil {
		return h
	}
	var seen claimsSeen
	for _, pi := range n.GetPods() {
		pod := pi.GetPod()
		for _, pc := range pod.Spec.ResourceClaims {
			name := claimName(pod, pc)
			if name == "" {
				continue
			}
			c, err := claims.Get(pod.Namespace, name)
			if err != nil || !seen.first(c.UID) {
				continue
			}
			a := c.Status.Allocation
			if a == nil {
				a = claims.GetPendingAllocation(c.UID)
			}
			if a != nil {
				h.add(a)
			}
		}
	}
	return h
}

// claimsSeen is the claims heldOn read: in an array while they are few,
// so that a view of a node with a few pods allocates no map for it.
type claimsSeen struct {
	few  [16]types.UID
	n    int
	many map[types.UID]bool
}

// first reports whether uid is seen for the first time, and marks it seen.
func (s *claimsSeen) first(uid types.UID) bool {
	if s.many != nil {
		if s.many[uid] {
			return false
		}
		s.many[uid] = true
		return true
	}
	if slices.Contains(s.few[:s.n], uid) {
		return false
	}
	if s.n < len(s.few) {
		s.few[s.n] = uid
		s.n++
		return true
	}
	s.many = make(map[types.UID]bool, 2*len(s.few))
	for _, u := range s.few {
		s.many[u] = true
	}
	s.many[uid] = true
	return true
}

// add counts what allocation a holds of gpuadmit's devices: a result
// without a share ID has its device alone, as the DRA allocator counts it.
func (h *held) add(a *resourceapi.AllocationResult) {
	for _, r := range a.Devices.Results {
		if r.Driver != allocator.DRADriver {
			continue
		}
		k := deviceKey{pool: r.Pool, device: r.Device}
		if r.ShareID == nil {
			if h.whole == nil {
				h.whole = map[deviceKey]bool{}
			}
			h.whole[k] = true
			continue
		}
		if q, ok := r.ConsumedCapacity[allocator.DRACapacityMemory]; ok {
			if h.memory == nil {
				h.memory = map[deviceKey]int64{}
			}
			h.memory[k] += q.Value()
		}
	}
}

// consumed is the memory of a device of shape s that claims hold.
func (h held) consumed(pool, device string, s shape) int64 {
	k := deviceKey{pool: pool, device: device}
	if h.whole[k] {
		return s.capacity
	}
	return min(h.memory[k], s.capacity)
}
