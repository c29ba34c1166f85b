package inventory

import "github.com/gpuadmit/gpuadmit/pkg/allocator"

// Accounting resources: the webhook adds them to every
// GPU container with the real MiB the container receives, and nodes advertise
// them as capacity, so the API server's own ResourceQuota can cap GPU memory
// across MIG slices, shares and whole GPUs, and per GPU model.
// ResourceMemoryMiB counts GPU memory in MiB, whatever its form.
const ResourceMemoryMiB = allocator.ResourceMemoryMiB

// ModelResource is the per-model accounting resource, "gpuadmit.io/h100-80gb-mib".
func ModelResource(model string) string { return allocator.AccountingResource(model) }

// IsAccountingResource reports whether name is an accounting resource.
func IsAccountingResource(name string) bool { return allocator.IsAccountingResource(name) }

// NodeAccounting is what a node can hand out, in MiB of real GPU memory: the sum
// over its GPU resources of allocatable × the size of one (a MIG slice's real
// MiB, a share unit, a whole GPU). It is the capacity a node advertises under
// ResourceMemoryMiB and its model's resource, so accounting never makes a pod
// unschedulable that the GPU resources themselves would admit.
func (p *Pool) NodeAccounting(n Node) map[string]int64 {
	var total int64
	for r, q := range n.Allocatable {
		total += q * p.unitMiB(r)
	}
	if total == 0 {
		return nil
	}
	return map[string]int64{ResourceMemoryMiB: total, ModelResource(p.Model): total}
}

// unitMiB is the real memory behind one unit of a GPU resource of the pool.
func (p *Pool) unitMiB(resource string) int64 {
	switch {
	case IsAccountingResource(resource):
		return 0
	case p.Mode == Shared && resource == p.Resource:
		return p.ShareUnitMiB
	case p.Mode == Whole && resource == ResourceGPU:
		return p.GPUMemoryMiB
	case p.Mode == TimeSliced && resource == p.Resource:
		// A replica isolates no memory; it counts as its GPU's memory over
		// the replicas, so a node's replicas sum to its GPUs' memory.
		return p.GPUMemoryMiB / max(p.ReplicasPerGPU, 1)
	}
	for _, pr := range p.Profiles {
		if pr.Resource == resource {
			return pr.MemoryMiB
		}
	}
	return 0
}

// accountedNodes counts the pool's nodes that advertise the accounting
// resources (total and the pool's model).
func (p *Pool) accountedNodes() int {
	n := 0
	for _, node := range p.Nodes {
		if node.Allocatable[ResourceMemoryMiB] > 0 && node.Allocatable[ModelResource(p.Model)] > 0 {
			n++
		}
	}
	return n
}

// UnitMiB is the real GPU memory behind one unit of resource on the pool
// (a MIG slice's, a share unit's, a whole GPU's, a replica's share of its
// GPU); 0 for a resource the pool does not serve and for the accounting
// resources.
func (p *Pool) UnitMiB(resource string) int64 { return p.unitMiB(resource) }
