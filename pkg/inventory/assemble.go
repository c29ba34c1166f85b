package inventory

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// add puts a classified node into its pool, starting the pool if it is new.
func (inv *Inventory) add(g gpuNode, refs *nodeRefs) {
	name := poolName(g)
	p, ok := inv.byName[name]
	if !ok {
		p = newPool(name, g)
		inv.byName[name] = p
		inv.Pools = append(inv.Pools, p)
	} else if p.Product != g.product || p.Mode != g.mode || p.offer != g.offer || p.DRA != g.dra || p.ReplicasPerGPU != g.replicas || p.ShareUnitMiB != g.draStepMiB && g.dra {
		inv.warnf("node %s (%s, %s%s) disagrees with pool %s (%s, %s%s); left out",
			g.node.Name, g.product, g.mode, offerText(g.offer), name, p.Product, p.Mode, offerText(p.offer))
		return
	}
	p.Nodes = append(p.Nodes, Node{Name: g.node.Name, Allocatable: g.alloc, Compute: computeOf(g.node), Labels: g.node.Labels, Down: downTaints(g.node),
		ref: refs.get(g.node)})
	p.keepCommonLabels(g.node.Labels, len(p.Nodes) == 1)
	p.GPUsPerNode = max(p.GPUsPerNode, g.gpus)
	for r, q := range g.alloc {
		p.Allocatable[r] += q
	}
	p.Taints = mergeTaints(p.Taints, g.node.Spec.Taints)
	inv.addProfiles(p, g)
	if p.GPUMemoryMiB == 0 {
		p.GPUMemoryMiB = gpuMemory(g)
	}
}

func newPool(name string, g gpuNode) *Pool {
	p := &Pool{
		Name:        name,
		Model:       g.baseProduct,
		Product:     g.product,
		Mode:        g.mode,
		DRA:         g.dra,
		Allocatable: map[string]int64{},
		Taints:      []corev1.Taint{},
	}
	if g.known {
		p.Model, p.MemorySlices = g.model.Name, g.model.MemorySlices
	}
	switch g.mode {
	case Whole, MIGSingle:
		p.Resource = ResourceGPU
		if g.dra {
			p.ShareUnitMiB = g.draStepMiB // a DRA GPU pool also serves shares, as claims
		}
	case TimeSliced:
		p.Resource, p.ReplicasPerGPU = ResourceGPU, g.replicas
		if g.alloc[ResourceGPUReplica] > 0 {
			p.Resource = ResourceGPUReplica
		}
	case Shared:
		p.offer = g.offer
		p.Resource, p.ShareUnitMiB = ResourceShare, DefaultShareUnitMiB
		switch {
		case g.offer.Resource != "":
			p.Resource, p.ShareUnitMiB, p.SharesPerGPU = g.offer.Resource, g.offer.UnitMiB, g.offer.SharesPerGPU
		case g.alloc[ResourceShare] == 0:
			p.Resource = ResourceGPUShare
		}
	}
	return p
}

// offerText is a share offer as a disagreement warning shows it.
func offerText(o allocator.ShareOffer) string {
	if o.Resource == "" {
		return ""
	}
	return fmt.Sprintf(", %d shares of %d MiB per GPU as %s", o.SharesPerGPU, o.UnitMiB, o.Resource)
}

// gpuMemory is one GPU's memory: the agent's NVML reading, else GFD's
// label, else the catalog. On a mig-single node GFD reports the slice's
// memory, so that label does not count there.
func gpuMemory(g gpuNode) int64 {
	if mib := agentMemory(g.node); mib > 0 {
		return mib
	}
	if g.mode != MIGSingle {
		if mib := labelInt(g.node, LabelMemory); mib > 0 {
			return mib
		}
	}
	if g.known {
		return g.model.MemoryMiB
	}
	return 0
}

// addProfiles records the MIG profiles a node serves, preferring the node's
// own readings over the catalog: the agent's NVML profiles, then GFD's
// nvidia.com/mig-<profile>.memory label.
func (inv *Inventory) addProfiles(p *Pool, g gpuNode) {
	for _, name := range nodeProfiles(g) {
		if _, ok := p.Profile(name); ok {
			continue
		}
		pr, ok := g.model.Profile(name)
		if !g.known || !ok {
			pr = allocator.Profile{Name: name}
		}
		if mib := profileMemoryLabel(g, name); mib > 0 {
			pr.MemoryMiB = mib
		}
		if read, ok := agentProfile(g.node, name); ok {
			pr = read // the agent read it from NVML on this node
		}
		if pr.MemoryMiB == 0 {
			inv.warnf("node %s serves MIG profile %s of %s, whose memory neither the catalog nor the node's labels give; profile left out", g.node.Name, name, g.baseProduct)
			continue
		}
		res := MIGResource(name)
		if g.mode == MIGSingle {
			res = ResourceGPU
		}
		p.Profiles = append(p.Profiles, Profile{Profile: pr, Resource: res})
	}
	sort.SliceStable(p.Profiles, func(i, j int) bool { return profileLess(p.Profiles[i].Profile, p.Profiles[j].Profile) })
}

func nodeProfiles(g gpuNode) []string {
	if g.mode == MIGSingle {
		return []string{g.singleProfile}
	}
	var names []string
	for r := range g.alloc {
		if IsMIGResource(r) {
			names = append(names, allocator.NormalizeProfile(strings.TrimPrefix(r, resourceMIGPrefix)))
		}
	}
	sort.Strings(names)
	return names
}

func profileMemoryLabel(g gpuNode, profile string) int64 {
	if g.mode == MIGSingle {
		return labelInt(g.node, LabelMemory)
	}
	return labelInt(g.node, MIGResource(profile)+".memory")
}

func profileLess(a, b allocator.Profile) bool {
	if a.MemoryMiB != b.MemoryMiB {
		return a.MemoryMiB < b.MemoryMiB
	}
	if a.ComputeSlices != b.ComputeSlices {
		return a.ComputeSlices < b.ComputeSlices
	}
	return a.Name < b.Name
}

// mergeTaints adds a node's scheduling taints, leaving out the node
// lifecycle taints (not-ready, unreachable, …) that no pool means to carry.
func mergeTaints(have, add []corev1.Taint) []corev1.Taint {
	for _, t := range add {
		if t.Effect == corev1.TaintEffectPreferNoSchedule || lifecycleTaint(t.Key) || containsTaint(have, t) {
			continue
		}
		have = append(have, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	sort.Slice(have, func(i, j int) bool { return taintKey(have[i]) < taintKey(have[j]) })
	return have
}

// downTaints are the taints that keep new pods off n (Node.Down): its
// unschedulable, unreachable and not-ready taints that are not mere
// preferences, and spec.unschedulable as the scheduler's NodeUnschedulable
// plugin reads it, before the node controller has tainted the node.
func downTaints(n *corev1.Node) []corev1.Taint {
	var out []corev1.Taint
	cordon := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if n.Spec.Unschedulable {
		out = append(out, cordon)
	}
	for _, t := range n.Spec.Taints {
		switch {
		case t.Effect == corev1.TaintEffectPreferNoSchedule, containsTaint(out, t):
		case t.Key == corev1.TaintNodeUnschedulable, t.Key == corev1.TaintNodeUnreachable, t.Key == corev1.TaintNodeNotReady:
			out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
		}
	}
	return out
}

func lifecycleTaint(key string) bool {
	return strings.HasPrefix(key, "node.kubernetes.io/") || strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/")
}

func containsTaint(ts []corev1.Taint, t corev1.Taint) bool {
	for _, h := range ts {
		if h.Key == t.Key && h.Value == t.Value && h.Effect == t.Effect {
			return true
		}
	}
	return false
}

func taintKey(t corev1.Taint) string { return t.Key + "=" + t.Value + ":" + string(t.Effect) }

// finish sorts pools and fixes their node selectors once all nodes are in.
func (inv *Inventory) finish() {
	sort.Slice(inv.Pools, func(i, j int) bool { return inv.Pools[i].Name < inv.Pools[j].Name })
	for _, p := range inv.Pools {
		p.NodeCount = len(p.Nodes)
		p.NodeSelector = inv.selector(p)
		p.ModelResource = ModelResource(p.Model)
		p.AccountedNodes = p.accountedNodes()
	}
}

// selector pins a pod to the pool: by the operator's pool label, else by the
// product label and the MIG strategy label when all of the pool's nodes share it.
func (inv *Inventory) selector(p *Pool) map[string]string {
	if p.Name == p.nodeLabel(LabelPool) {
		return map[string]string{LabelPool: p.Name}
	}
	sel := map[string]string{LabelProduct: p.Product}
	for _, k := range []string{LabelMIGStrategy, allocator.LabelNodeMode} {
		if s := p.nodeLabel(k); s != "" {
			sel[k] = s
		}
	}
	return sel
}

// selectorLabels are the node labels a pool's selector may use.
var selectorLabels = []string{LabelPool, LabelMIGStrategy, allocator.LabelNodeMode}

// keepCommonLabels keeps the selector labels that every node of the pool shares.
func (p *Pool) keepCommonLabels(labels map[string]string, first bool) {
	if first {
		p.common = map[string]string{}
		for _, k := range selectorLabels {
			if v, ok := labels[k]; ok {
				p.common[k] = v
			}
		}
		return
	}
	for k, v := range p.common {
		if labels[k] != v {
			delete(p.common, k)
		}
	}
}

// nodeLabel is the value of a selector label all of the pool's nodes share, or "".
func (p *Pool) nodeLabel(key string) string { return p.common[key] }
