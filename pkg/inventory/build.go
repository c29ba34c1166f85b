package inventory

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Inventory is the cluster's GPU pools at one moment. It is immutable once built.
type Inventory struct {
	// Pools are sorted by name.
	Pools []*Pool
	// Warnings say which nodes or profiles were left out and why.
	Warnings []string
	// Refused are the GPU nodes kept out of every pool because placing on
	// them could hand one GPU out twice; each is also a warning.
	Refused []Refusal
	byName  map[string]*Pool

	classFor func(resource string) string // see DRA.ClassFor
	lost     map[string]bool              // extended resources another DeviceClass took
}

// Pool returns the pool with that name.
func (inv *Inventory) Pool(name string) (*Pool, bool) {
	p, ok := inv.byName[name]
	return p, ok
}

// gpuNode is a node classified into a mode, before pools are formed.
type gpuNode struct {
	node          *corev1.Node
	mode          Mode
	product       string // the product label as on the node
	baseProduct   string // without a -MIG-<profile> or -SHARED suffix
	replicas      int64  // time-slicing replicas per GPU; 0: not time-sliced
	singleProfile string
	model         allocator.Model
	known         bool
	gpus          int64
	alloc         map[string]int64
	offer         allocator.ShareOffer // the agent's share offer; zero when it has none
	dra           bool                 // gpuadmit's DRA driver serves the GPUs
	draStepMiB    int64                // the step of its shareable GPUs; 0: none
}

// Build groups nodes into pools. Nodes without GPU resources are ignored;
// GPU nodes that cannot be pinned or that disagree with their pool are left
// out with a warning. A nil catalog means allocator.Default().
func Build(nodes []corev1.Node, cat *allocator.Catalog) *Inventory {
	return BuildWithSlices(nodes, nil, cat)
}

// BuildWithSlices is Build where some nodes' GPUs are gpuadmit's DRA
// driver's: those nodes are read from their ResourceSlices (dra.go).
func BuildWithSlices(nodes []corev1.Node, rs []resourceapi.ResourceSlice, cat *allocator.Catalog) *Inventory {
	return BuildDRA(nodes, DRA{Slices: rs}, cat)
}

// DRA is what the inventory reads of the cluster's DRA objects.
type DRA struct {
	// Slices are the cluster's ResourceSlices.
	Slices []resourceapi.ResourceSlice
	// ClassFor names the DeviceClass the scheduler uses for an extended
	// resource (where several carry one name, the newest wins cluster-wide);
	// nil takes gpuadmit's classes as the ones in use.
	ClassFor func(resource string) string
}

// BuildDRA is Build where some nodes' GPUs are gpuadmit's DRA driver's.
func BuildDRA(nodes []corev1.Node, d DRA, cat *allocator.Catalog) *Inventory {
	return buildDRA(nodes, d, cat, nil)
}

// buildDRA is BuildDRA whose nodes' affinity objects are refs' (nil: new ones).
func buildDRA(nodes []corev1.Node, d DRA, cat *allocator.Catalog, refs *nodeRefs) *Inventory {
	dra := draNodes(d.Slices)
	if cat == nil {
		cat = allocator.Default()
	}
	inv := &Inventory{byName: map[string]*Pool{}, classFor: d.ClassFor}
	sorted := make([]*corev1.Node, len(nodes))
	for i := range nodes {
		sorted[i] = &nodes[i]
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for _, n := range sorted {
		g, ok := inv.classify(n, dra[n.Name], cat)
		if !ok {
			continue
		}
		if g.product == "" && n.Labels[LabelPool] == "" {
			inv.warnf("node %s has GPU resources but neither %s nor %s; it is in no pool", n.Name, LabelProduct, LabelPool)
			continue
		}
		inv.add(g, refs)
	}
	inv.finish()
	inv.markOverlaps(sorted)
	return inv
}

// markOverlaps flags derived pools whose selector also matches nodes of a
// named pool (nodeSelector cannot say "without gpuadmit.io/pool").
func (inv *Inventory) markOverlaps(nodes []*corev1.Node) {
	for _, p := range inv.Pools {
		if _, named := p.NodeSelector[LabelPool]; named {
			continue
		}
		for _, n := range nodes {
			if n.Labels[LabelPool] != "" && labels.SelectorFromSet(p.NodeSelector).Matches(labels.Set(n.Labels)) {
				p.ExcludeNamed = true
				break
			}
		}
	}
}

func (inv *Inventory) warnf(format string, args ...any) {
	inv.Warnings = append(inv.Warnings, fmt.Sprintf(format, args...))
}

// classify reads a node's GPU resources and mode; ok is false for a node
// without GPU resources and for one the inventory refuses.
func (inv *Inventory) classify(n *corev1.Node, devs []draDevice, cat *allocator.Catalog) (gpuNode, bool) {
	offer, _, err := shareOffer(n)
	if err != nil {
		inv.warnf("node %s: %v; its share resource is read with the defaults", n.Name, err)
	}
	g := gpuNode{node: n, product: n.Labels[LabelProduct], alloc: gpuAllocatable(n, offer), offer: offer}
	if len(devs) > 0 {
		if why := draConflict(g.alloc); why != "" {
			inv.refuse(n, why)
			return g, false
		}
		g.dra, g.offer, g.draStepMiB = true, allocator.ShareOffer{}, draShareStep(devs)
		maps.Copy(g.alloc, inv.servedByGpuadmit(draAllocatable(devs)))
	}
	if share := doubleServed(g.alloc, offer); share != "" {
		inv.refuse(n, doubleServedReason(g.alloc, share))
		return g, false
	}
	g.baseProduct, g.replicas = strings.TrimSuffix(g.product, sharedSuffix), timeSlicing(n, g.alloc)
	if base, profile, ok := allocator.SplitMIGProduct(g.baseProduct); ok {
		g.baseProduct, g.singleProfile = base, allocator.NormalizeProfile(profile)
	}
	g.model, g.known = cat.ByProduct(g.baseProduct)
	switch {
	case hasMIG(g.alloc):
		g.mode = MIGMixed
	case g.replicas > 0 && g.singleProfile != "":
		inv.warnf("node %s time-slices MIG %s slices, which gpuadmit does not model; it is in no pool", n.Name, g.singleProfile)
		return g, false
	case g.alloc[ResourceGPU] > 0 && g.singleProfile != "":
		// Under the single strategy GFD names the profile in the product
		// label; a GPU without MIG enabled keeps its plain product and is whole.
		g.mode = MIGSingle
	case g.shares() > 0:
		g.mode = Shared
	case g.replicas > 0 && g.alloc[ResourceGPU]+g.alloc[ResourceGPUReplica] > 0:
		g.mode = TimeSliced
	case g.alloc[ResourceGPU] > 0:
		g.mode = Whole
	default:
		return g, false
	}
	g.gpus = labelInt(n, LabelCount)
	switch {
	case g.gpus > 0:
	case g.mode == Whole:
		g.gpus = g.alloc[ResourceGPU]
	case g.mode == TimeSliced:
		g.gpus = (g.alloc[ResourceGPU] + g.alloc[ResourceGPUReplica]) / g.replicas
	}
	return g, true
}

// timeSlicing is how many replicas of each GPU NVIDIA's device plugin
// makes on the node, 0 when it does not time-slice. GFD labels every node
// with nvidia.com/gpu.replicas (1 where nothing is shared); the -SHARED
// product and the renamed resource also say so, and then the replicas are
// the advertised count over the GPU count.
func timeSlicing(n *corev1.Node, alloc map[string]int64) int64 {
	if r := labelInt(n, LabelReplicas); r > 1 {
		return r
	}
	if !strings.HasSuffix(n.Labels[LabelProduct], sharedSuffix) && alloc[ResourceGPUReplica] == 0 {
		return 0
	}
	gpus, served := labelInt(n, LabelCount), alloc[ResourceGPU]+alloc[ResourceGPUReplica]
	if gpus > 0 && served >= gpus && served%gpus == 0 {
		return served / gpus
	}
	return 1
}

// shares is how many share devices the node advertises, of any share resource.
func (g gpuNode) shares() int64 {
	var n int64
	for _, r := range shareResources(g.offer) {
		n += g.alloc[r]
	}
	return n
}

func gpuAllocatable(n *corev1.Node, offer allocator.ShareOffer) map[string]int64 {
	out := map[string]int64{}
	for name, q := range n.Status.Allocatable {
		if (IsGPUResource(string(name)) || string(name) == offer.Resource) && q.Value() > 0 {
			out[string(name)] = q.Value()
		}
	}
	return out
}

func hasMIG(alloc map[string]int64) bool {
	for r := range alloc {
		if IsMIGResource(r) {
			return true
		}
	}
	return false
}

func labelInt(n *corev1.Node, key string) int64 {
	v, err := strconv.ParseInt(n.Labels[key], 10, 64)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// poolName is the operator's pool label, or one derived from model and mode.
func poolName(g gpuNode) string {
	if name := g.node.Labels[LabelPool]; name != "" {
		return name
	}
	model := g.baseProduct
	if g.known {
		model = g.model.Name
	}
	name := strings.ToLower(model) + "-" + string(g.mode)
	if g.mode == MIGSingle {
		name = strings.ToLower(model) + "-mig-" + strings.ReplaceAll(g.singleProfile, "+", ".")
	}
	if g.dra {
		name += "-dra"
	}
	return sanitize(name)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '-'
		}
	}
	return strings.Trim(string(b), "-.")
}
