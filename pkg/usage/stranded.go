package usage

import (
	"cmp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// demand is a request as stranding and fragmentation read it: gpus GPUs
// (or slices, or shares) of mib each, and CPU and memory of the node.
type demand struct {
	mib, gpus        int64
	milliCPU, memMiB int64
}

// demandOf is what a pod asks: its GPU memory, mib (podMiB, or what its
// allocated claims hold), split evenly over the GPU devices its
// containers take. A container takes its nvidia.com/gpu and MIG and
// replica counts, one device for a memory share, and for resource claims
// the devices the claims take (claims: ClaimDevices).
func demandOf(p *corev1.Pod, req corev1.ResourceList, mib int64, claims map[string]int64) demand {
	d := demand{milliCPU: req.Cpu().MilliValue(), memMiB: req.Memory().Value() >> 20}
	for _, c := range p.Spec.Containers {
		d.gpus += devices(p, c, claims)
	}
	d.gpus = max(d.gpus, 1)
	d.mib = ceilDiv(mib, d.gpus)
	return d
}

// devices is how many GPU devices a container takes, read from its
// requests (the API server defaults an extended resource's request to its
// limit, and refuses them unequal, so a pod read from it has both), else
// from the claims it names.
func devices(p *corev1.Pod, c corev1.Container, claims map[string]int64) int64 {
	var n int64
	for r, q := range c.Resources.Requests {
		switch name := string(r); {
		case name == inventory.ResourceGPU || name == inventory.ResourceGPUReplica || inventory.IsMIGResource(name):
			n += q.Value()
		case name == inventory.ResourceShare || name == inventory.ResourceGPUShare:
			n++
		}
	}
	if n > 0 {
		return n
	}
	for _, rc := range c.Resources.Claims {
		if k, ok := claims[p.Namespace+"/"+claimName(p, rc.Name)]; ok {
			n += k
		} else {
			n++
		}
	}
	return n
}

// claimName is the ResourceClaim the pod's claim entry name stands for:
// the one it names, or the one made from its template (the pod's status
// says which); "" when neither is known yet.
func claimName(p *corev1.Pod, entry string) string {
	for _, rc := range p.Spec.ResourceClaims {
		if rc.Name == entry && rc.ResourceClaimName != nil {
			return *rc.ResourceClaimName
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == entry && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

func sizeDemands(sizes []Size) []demand {
	out := make([]demand, 0, len(sizes))
	for _, s := range sizes {
		out = append(out, demand{mib: s.GPUMemoryMiB, gpus: max(s.GPUs, 1), milliCPU: s.MilliCPU, memMiB: s.MemoryMiB})
	}
	return out
}

// pieces are the node's free GPU memory as one container could take it:
// each GPU's free memory where the node's GPUs are known one by one (DRA);
// otherwise each free MIG slice, whole GPU, replica or agent share at its
// size; and the free units of a share resource served without an agent
// (gpushare), whose split over GPUs the control plane cannot see, as if
// they were packed onto as few GPUs as they fill — the most usable split,
// so stranding there is a lower bound.
func (ns *nodeState) pieces() []int64 {
	var out []int64
	if ns.gpus != nil {
		for _, g := range ns.gpus {
			if f := g.CapacityMiB - g.AllocatedMiB; f > 0 {
				out = append(out, f)
			}
		}
		return out
	}
	p := ns.pool.pool
	for _, r := range sortedKeys(ns.node.Allocatable) {
		free := ns.node.Allocatable[r] - ns.held[r]
		unit := p.UnitMiB(r)
		if free <= 0 || unit <= 0 {
			continue
		}
		if p.Mode == inventory.Shared && p.SharesPerGPU == 0 && p.UnitsPerGPU() > 0 {
			for per := p.UnitsPerGPU(); free > 0; free -= per {
				out = append(out, min(free, per)*unit)
			}
			continue
		}
		for range free {
			out = append(out, unit)
		}
	}
	return out
}

// fits reports whether d can run on the node: its CPU and memory are free
// and d.gpus of the pieces hold d.mib each.
func (ns *nodeState) fits(pieces []int64, d demand) bool {
	if ns.milliCPU < d.milliCPU || ns.memMiB < d.memMiB {
		return false
	}
	n := int64(0)
	for _, f := range pieces {
		if f >= d.mib {
			n++
		}
	}
	return n >= d.gpus
}

// stranded is the free memory of the node's pieces that no demand can
// take: a piece is usable when some demand fits on the node and the piece
// is one it could take (it holds the demand's MiB). So the pieces smaller
// than the smallest demand that fits the node are stranded, and all of
// them when none fits.
func stranded(ns *nodeState, pieces []int64, demands []demand) int64 {
	least := int64(-1)
	for _, d := range demands {
		if (least < 0 || d.mib < least) && ns.fits(pieces, d) {
			least = d.mib
		}
	}
	var out int64
	for _, f := range pieces {
		if least < 0 || f < least {
			out += f
		}
	}
	return out
}

// distinct is demands without repeats: a pool's pending pods are mostly a
// few kinds, and each is tried against every node.
func distinct(demands []demand) []demand {
	seen := make(map[demand]bool, len(demands))
	out := demands[:0:0]
	for _, d := range demands {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// fragNode is the node as the placement score's fragmentation measure
// reads it, with each free piece as a GPU and MiB for milli-GPU: the
// measure only compares and sums what is left against what is asked, so
// it is the same measure in any unit.
func (ns *nodeState) fragNode(pieces []int64) allocator.FragNode {
	return allocator.FragNode{MilliCPULeft: ns.milliCPU, MemoryMiBLeft: ns.memMiB, GPUMilliLeft: pieces}
}

// workload is the target workload of the fragmentation measure: the
// pool's pods (bound and pending) by kind, weighted by their share; with
// no pods, the typical sizes, equally weighted.
func (ps *poolState) workload(sizes []Size) []allocator.FragTask {
	kinds := ps.kinds
	if len(kinds) == 0 {
		kinds = map[demand]int64{}
		for _, d := range sizeDemands(sizes) {
			kinds[d]++
		}
	}
	var total int64
	for _, c := range kinds {
		total += c
	}
	out := make([]allocator.FragTask, 0, len(kinds))
	for d, c := range kinds {
		out = append(out, allocator.FragTask{MilliCPU: d.milliCPU, MemoryMiB: d.memMiB, GPUMilli: d.mib,
			GPUs: int(d.gpus), Weight: float64(c) / float64(total)})
	}
	// Map order would change the float sum's last bits from scrape to scrape.
	slices.SortFunc(out, func(a, b allocator.FragTask) int {
		return cmp.Or(cmp.Compare(a.GPUMilli, b.GPUMilli), cmp.Compare(a.GPUs, b.GPUs),
			cmp.Compare(a.MilliCPU, b.MilliCPU), cmp.Compare(a.MemoryMiB, b.MemoryMiB))
	})
	return out
}

func parseCount(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }

func ceilDiv(a, b int64) int64 {
	if b <= 0 {
		return a
	}
	return (a + b - 1) / b
}
