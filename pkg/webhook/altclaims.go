package webhook

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// altClaims keeps, by node, what the allocated claims of pods with DRA
// alternatives hold there, as the ResourceClaim informer shows them (only
// claims made from alternatives templates, which carry
// claim.LabelAlternatives). Such a pod requests no GPU resource of any
// pool (the scheduler picks the alternative), so the pod tally cannot
// see its devices; without them, a pool whose devices such pods took
// looked free to the pods placed on one pool.
type altClaims struct {
	mu     sync.Mutex
	claims keyedSums // node → DeviceClass → devices (shares: MiB)
}

func newAltClaims() *altClaims {
	return &altClaims{claims: newKeyedSums()}
}

// heldBy reads what an allocated claim of an alternatives template holds
// of gpuadmit's driver's devices, and on which node; ok is false for
// another claim (a replica that also runs the usage report caches them
// all), one not allocated, or one allocated nothing of gpuadmit's on one
// node.
func heldBy(c *resourceapi.ResourceClaim) (placed, bool) {
	a := c.Status.Allocation
	if a == nil || c.Labels[claim.LabelAlternatives] != "true" {
		return placed{}, false
	}
	h := placed{key: allocatedNode(a), req: map[string]int64{}}
	for _, r := range a.Devices.Results {
		if r.Driver != allocator.DRADriver {
			continue
		}
		class := requestClass(c.Spec, r.Request)
		if q, ok := r.ConsumedCapacity[allocator.DRACapacityMemory]; ok && class == allocator.DRAClassShare {
			h.req[class] += q.Value() >> 20
		} else if class != "" {
			h.req[class]++
		}
	}
	return h, h.key != "" && len(h.req) > 0
}

// allocatedNode is the node an allocation is bound to: the structured
// allocator selects the node of a node-local slice by metadata.name.
func allocatedNode(a *resourceapi.AllocationResult) string {
	if a.NodeSelector == nil || len(a.NodeSelector.NodeSelectorTerms) != 1 {
		return ""
	}
	for _, f := range a.NodeSelector.NodeSelectorTerms[0].MatchFields {
		if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
			return f.Values[0]
		}
	}
	return ""
}

// requestClass is the DeviceClass of the request an allocation result
// names: "gpu/mig0" is subrequest mig0 of request gpu; "" when the spec
// has no such request.
func requestClass(spec resourceapi.ResourceClaimSpec, name string) string {
	req, sub, _ := strings.Cut(name, "/")
	for _, r := range spec.Devices.Requests {
		if r.Name != req {
			continue
		}
		if r.Exactly != nil && sub == "" {
			return r.Exactly.DeviceClassName
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}

// set counts c where it is allocated now, instead of where it was.
func (a *altClaims) set(c *resourceapi.ResourceClaim) {
	h, ok := heldBy(c)
	if !ok {
		h = placed{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims.put(types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, h)
}

// remove stops counting c.
func (a *altClaims) remove(c *resourceapi.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims.drop(types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
}

// addTo adds to byNode what the claims hold on the pool's nodes, under
// the names a pod placed on the pool requests the same devices by: a
// whole GPU as nvidia.com/gpu, a MIG device as nvidia.com/mig-<profile>,
// and each at its real MiB under the pool's per-model accounting resource
// (a share by the memory it consumes), which bounds what one pool takes.
func (a *altClaims) addTo(byNode map[string]map[string]int64, pool *inventory.Pool) {
	a.mu.Lock()
	sums := a.claims.onNodes(pool.Nodes)
	a.mu.Unlock()
	for node, s := range sums {
		held := byNode[node]
		if held == nil {
			held = map[string]int64{}
			byNode[node] = held
		}
		for class, n := range s {
			resource, mib := poolResource(pool, class)
			if resource != "" {
				held[resource] += n
			}
			held[pool.ModelResource] += n * mib
		}
	}
}

// poolResource is the resource a device of class counts under on pool,
// and the MiB of one; a share counts under none, at 1 MiB per unit (its
// sum is in MiB).
func poolResource(pool *inventory.Pool, class string) (string, int64) {
	switch class {
	case allocator.DRAClassShare:
		return "", 1
	case allocator.DRAClassGPU:
		return inventory.ResourceGPU, pool.GPUMemoryMiB
	}
	for _, pr := range pool.Profiles {
		if allocator.DRAMIGClass(pr.Name) == class {
			return inventory.MIGResource(pr.Name), pr.MemoryMiB
		}
	}
	return "", 0
}

// Handler keeps the claims in step with the informer.
func (a *altClaims) Handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if c, ok := obj.(*resourceapi.ResourceClaim); ok {
				a.set(c)
			}
		},
		UpdateFunc: func(_, obj any) {
			if c, ok := obj.(*resourceapi.ResourceClaim); ok {
				a.set(c)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if c, ok := obj.(*resourceapi.ResourceClaim); ok {
				a.remove(c)
			}
		},
	}
}
