package usage

import (
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
)

// Compute is where the GPUs of in go. It reads in and changes nothing.
func Compute(in Input) Report {
	s := newState(in)
	for _, p := range in.Pods {
		s.count(p)
	}
	for _, p := range in.Others {
		s.occupy(p)
	}
	r := Report{Quotas: quotas(in.Quotas), GPUs: s.gpuAllocations(), Prices: in.Config.PricePerGPUHour}
	for _, ps := range s.pools {
		r.Pools = append(r.Pools, ps.finish(in.Config.Sizes, s.pending[NoPool]))
	}
	if none := s.pending[NoPool]; none != nil {
		r.Pools = append(r.Pools, Pool{Name: NoPool, Pending: none.waiting})
	}
	return r
}

// state is Compute's working state.
type state struct {
	in      Input
	pools   []*poolState
	byNode  map[string]*nodeState
	pending map[string]*pendingPods // by pool name; NoPool for none
}

// poolState is one pool as Compute counts it.
type poolState struct {
	pool      *inventory.Pool
	nodes     []*nodeState
	allocated map[Holder]int64
	pending   *pendingPods
	kinds     map[demand]int64 // the pool's pods by kind, for fragmentation
}

// nodeState is one node of a pool: what is held there, and its free CPU and memory.
type nodeState struct {
	pool     *poolState
	node     inventory.Node
	held     map[string]int64 // GPU resources of bound pods
	heldMiB  int64
	milliCPU int64 // allocatable less gpuadmit's pods
	memMiB   int64
	gpus     []GPU // nil unless known one by one
}

// unbounded is the free CPU or memory of a node that does not say what it
// has (no Node object, or none in its allocatable): it limits no demand.
const unbounded = math.MaxInt64 / 4

// pendingPods are one pool's pods waiting for a node.
type pendingPods struct {
	waiting map[Waiter]Waiting
	demands []demand
}

func newState(in Input) *state {
	s := &state{in: in, byNode: map[string]*nodeState{}, pending: map[string]*pendingPods{}}
	alloc := map[string]corev1.ResourceList{}
	for i := range in.Nodes {
		alloc[in.Nodes[i].Name] = in.Nodes[i].Status.Allocatable
	}
	if in.Inventory == nil {
		return s
	}
	for _, p := range in.Inventory.Pools {
		ps := &poolState{pool: p, allocated: map[Holder]int64{}, kinds: map[demand]int64{}}
		ps.pending = s.pendingOf(p.Name)
		for _, n := range p.Nodes {
			a := alloc[n.Name]
			ns := &nodeState{pool: ps, node: n, held: map[string]int64{}, gpus: in.GPUs[n.Name],
				milliCPU: unbounded, memMiB: unbounded}
			if q, ok := a[corev1.ResourceCPU]; ok {
				ns.milliCPU = q.MilliValue()
			}
			if q, ok := a[corev1.ResourceMemory]; ok {
				ns.memMiB = q.Value() >> 20
			}
			ps.nodes = append(ps.nodes, ns)
			s.byNode[n.Name] = ns
		}
		s.pools = append(s.pools, ps)
	}
	return s
}

func (s *state) pendingOf(pool string) *pendingPods {
	pp := s.pending[pool]
	if pp == nil {
		pp = &pendingPods{waiting: map[Waiter]Waiting{}}
		s.pending[pool] = pp
	}
	return pp
}

// count adds one of gpuadmit's pods: held where it is bound, waiting where
// it is not; a finished pod holds nothing.
func (s *state) count(p *corev1.Pod) {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true})
	if p.Spec.NodeName != "" {
		if ns, ok := s.byNode[p.Spec.NodeName]; ok {
			ns.bind(p, req, &s.in)
		}
		return
	}
	if ns, ok := s.byNode[s.in.PodClaims[p.Namespace+"/"+p.Name].Node]; ok {
		ns.bind(p, req, &s.in) // allocated there, not bound yet
		return
	}
	name := mutate.PoolOf(p)
	var pool *inventory.Pool
	if s.in.Inventory != nil {
		pool, _ = s.in.Inventory.Pool(name)
	}
	if pool == nil {
		name = NoPool
	}
	d := demandOf(p, req, podMiB(req, pool), s.in.ClaimDevices)
	pp := s.pendingOf(name)
	w := Waiter{Namespace: p.Namespace, Reason: ReasonOf(p)}
	got := pp.waiting[w]
	pp.waiting[w] = Waiting{Pods: got.Pods + 1, MiB: got.MiB + d.mib*d.gpus}
	pp.demands = append(pp.demands, d)
	if pool != nil {
		s.poolState(pool).kinds[d]++
	}
}

func (s *state) poolState(p *inventory.Pool) *poolState {
	for _, ps := range s.pools {
		if ps.pool == p {
			return ps
		}
	}
	return nil
}

// occupy takes the CPU and memory of a pod that is not gpuadmit's from its
// node, if it is bound to a GPU node and not finished.
func (s *state) occupy(p *corev1.Pod) {
	ns, ok := s.byNode[p.Spec.NodeName]
	if !ok || p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return
	}
	req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{SkipPodLevelResources: true})
	ns.milliCPU -= req.Cpu().MilliValue()
	ns.memMiB -= req.Memory().Value() >> 20
}

// bind counts a pod bound to the node, or whose claims are allocated
// there. It holds the GPU memory of its allocated claims where in knows
// them (in.PodClaims: a pod with DRA alternatives holds what it got, not
// the largest alternative it is charged), else what its accounting says.
func (ns *nodeState) bind(p *corev1.Pod, req corev1.ResourceList, in *Input) {
	pool := ns.pool.pool
	mib := podMiB(req, pool)
	if pc, ok := in.PodClaims[p.Namespace+"/"+p.Name]; ok && pc.Node == ns.node.Name && pc.MiB > 0 {
		mib = pc.MiB
	}
	ns.heldMiB += mib
	for r, q := range req {
		if inventory.IsGPUResource(string(r)) {
			ns.held[string(r)] += q.Value()
		}
	}
	ns.milliCPU -= req.Cpu().MilliValue()
	ns.memMiB -= req.Memory().Value() >> 20
	ns.pool.allocated[Holder{Namespace: p.Namespace, Form: formOf(req, pool)}] += mib
	ns.pool.kinds[demandOf(p, req, mib, in.ClaimDevices)]++
}

// podMiB is the real GPU memory a pod holds: its accounting request, which
// the webhook sets to the real MiB of what each container receives; for a
// pod without one, its GPU resources at the pool's size of each.
func podMiB(req corev1.ResourceList, pool *inventory.Pool) int64 {
	if q, ok := req[inventory.ResourceMemoryMiB]; ok && q.Value() > 0 {
		return q.Value()
	}
	var mib int64
	for r, q := range req {
		if pool != nil && inventory.IsGPUResource(string(r)) {
			mib += q.Value() * pool.UnitMiB(string(r))
		}
	}
	return mib
}

// formOf is the form in which a pod holds its pool's memory. On a DRA pool
// of whole GPUs, a pod that asks no nvidia.com/gpu holds a share by claim.
func formOf(req corev1.ResourceList, pool *inventory.Pool) Form {
	switch pool.Mode {
	case inventory.MIGMixed, inventory.MIGSingle:
		return FormMIG
	case inventory.Shared:
		return FormShare
	case inventory.TimeSliced:
		return FormTime
	}
	if q, ok := req[inventory.ResourceGPU]; ok && q.Value() > 0 {
		return FormWhole
	}
	return FormShare
}

// finish computes the pool's figures once every pod is counted. Pods
// waiting on no pool (DRA: the scheduler picks the pool) count as demand
// on the DRA pools.
func (ps *poolState) finish(sizes []Size, unpooled *pendingPods) Pool {
	p := ps.pool
	out := Pool{Name: p.Name, Model: p.Model, Mode: p.Mode, GPUMemoryMiB: p.GPUMemoryMiB,
		Allocated: ps.allocated, Pending: ps.pending.waiting}
	demands := append(sizeDemands(sizes), ps.pending.demands...)
	if p.DRA && unpooled != nil {
		demands = append(demands, unpooled.demands...)
	}
	demands = distinct(demands)
	work := ps.workload(sizes)
	for _, ns := range ps.nodes {
		out.GPUs += ns.gpuCount()
		capa := ns.capacityMiB()
		out.CapacityMiB += capa
		out.FreeMiB += max(capa-ns.allocatedMiB(), 0)
		pieces := ns.pieces()
		out.StrandedMiB += stranded(ns, pieces, demands)
		out.FragmentationMiB += allocator.Fragmentation(ns.fragNode(pieces), work)
	}
	out.StrandedMiB = min(out.StrandedMiB, out.FreeMiB)
	return out
}

// capacityMiB is the memory the node hands out: its GPUs where known one
// by one, else its accounting capacity.
func (ns *nodeState) capacityMiB() int64 {
	if ns.gpus != nil {
		var c int64
		for _, g := range ns.gpus {
			c += g.CapacityMiB
		}
		return c
	}
	return ns.pool.pool.NodeAccounting(ns.node)[inventory.ResourceMemoryMiB]
}

// allocatedMiB is what the node's GPUs hold: what claims hold of them
// where they are known one by one (the scheduler's own allocation), else
// what the bound pods' accounting says.
func (ns *nodeState) allocatedMiB() int64 {
	if ns.gpus == nil {
		return ns.heldMiB
	}
	var a int64
	for _, g := range ns.gpus {
		a += g.AllocatedMiB
	}
	return a
}

// gpuCount is the node's physical GPUs: GFD's nvidia.com/gpu.count where
// it says, else its memory over one GPU's. Under the single MIG strategy
// GFD's count (like nvidia.com/gpu) counts MIG devices, not GPUs: see
// migSingleGPUs.
func (ns *nodeState) gpuCount() int64 {
	if ns.pool.pool.Mode == inventory.MIGSingle {
		return ns.migSingleGPUs()
	}
	if n, err := parseCount(ns.node.Labels[inventory.LabelCount]); err == nil && n > 0 {
		return n
	}
	if m := ns.pool.pool.GPUMemoryMiB; m > 0 {
		return (ns.capacityMiB() + m/2) / m
	}
	return 0
}

// migSingleGPUs is the GPUs of a mig-single node: its MIG devices (GFD's
// nvidia.com/gpu.count, which the single strategy sets to them, else its
// allocatable nvidia.com/gpu) over the devices of the pool's one profile
// that fit a GPU (the catalog's or the agent's MaxInstances), rounded up.
// The single strategy's layouts (mig-parted's all-<profile>) make that
// many of each GPU; a GPU cut into fewer is not seen, so this is a lower
// bound there. A profile whose instance limit neither the catalog nor the
// agent gives counts no GPUs, rather than one per MIG device.
func (ns *nodeState) migSingleGPUs() int64 {
	devices, err := parseCount(ns.node.Labels[inventory.LabelCount])
	if err != nil || devices <= 0 {
		devices = ns.node.Allocatable[inventory.ResourceGPU]
	}
	p := ns.pool.pool
	if len(p.Profiles) == 0 || p.Profiles[0].MaxInstances <= 0 {
		return 0
	}
	return ceilDiv(devices, int64(p.Profiles[0].MaxInstances))
}

func quotas(rqs []corev1.ResourceQuota) []Quota {
	name := corev1.ResourceName("requests." + inventory.ResourceMemoryMiB)
	var out []Quota
	for _, rq := range rqs {
		hard, ok := rq.Status.Hard[name]
		if !ok {
			hard, ok = rq.Spec.Hard[name]
		}
		if !ok {
			continue
		}
		used := rq.Status.Used[name]
		out = append(out, Quota{Namespace: rq.Namespace, HardMiB: hard.Value(), UsedMiB: used.Value()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// gpuAllocations lists the GPUs known one by one, by pool and node, a
// GPU's devices (its MIG instances) summed under its UUID; a device
// without a UUID joins nothing and is left out.
func (s *state) gpuAllocations() []GPUAllocation {
	var out []GPUAllocation
	for _, ps := range s.pools {
		for _, ns := range ps.nodes {
			at := map[string]int{}
			for _, g := range ns.gpus {
				if g.UUID == "" {
					continue
				}
				if i, ok := at[g.UUID]; ok {
					out[i].CapacityMiB += g.CapacityMiB
					out[i].AllocatedMiB += g.AllocatedMiB
					continue
				}
				at[g.UUID] = len(out)
				out = append(out, GPUAllocation{GPU: g, Node: ns.node.Name, Pool: ps.pool.Name, Model: ps.pool.Model})
			}
		}
	}
	return out
}
