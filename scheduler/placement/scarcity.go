package placement

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// The scarcity price. allocator.Placer prices a GPU of model M at
// allocator.Scarcity(M) per milli-GPU taken: the share of M's GPUs that the
// workload's pods pinned to few models are expected to need (see
// docs/placement.md, "Scarcity"). The plugin's placers see a node's pool
// mode as its model (so that kinds of one mode count as unable to run on
// the other), not its GPU model, so the plugin computes the price itself,
// as the simulator's gpuadmit policy does: the supply is the cluster's
// GPUs per model, from the nodes and slices the plugin watches; the demand
// is the derived workload's kinds, each with the models it accepts
// (models.go). The price is computed once per workload revision or change
// of supply, and a node pays it by its model, one map lookup per node.

// supply is the cluster's GPU models, as gpuadmit's agent publishes them:
// a DRA node's devices in its ResourceSlices (a GPU without MIG is one
// device, a GPU with MIG the parent of its instances), and a
// device-plugin node's healthy share-serving GPUs. It is rebuilt when a
// Node's labels or gpuadmit's annotations, or any of gpuadmit's
// ResourceSlices, changed. Not safe for concurrent use: placerCache calls
// it under its lock.
type supply struct {
	changes atomic.Uint64          // Node changes that can change it
	nodes   corelisters.NodeLister // nil without informers: no supply

	at     [2]uint64 // Node and slice changes it was built at
	built  bool
	gpus   map[string]int       // GPUs per model
	shapes map[string]modelInfo // by model
	of     []nodeModel          // every GPU node's model
	// accepted caches, by pin.nodes, the models whose nodes match them.
	accepted map[string]map[string]bool
	// models is gpus' models, sorted; sized caches accepts by all it
	// reads of a kind: a revision prices hundreds of kinds, most of them
	// priced alike at the revision before (several hundred microseconds
	// of the revision's cycle in the 400-node replay, uncached).
	models []string
	sized  map[acceptsKey]acceptsOut
}

// acceptsKey is what supply.accepts reads of a pinned kind.
type acceptsKey struct {
	dra, whole bool
	item       item
	pin        pin
}

type acceptsOut struct {
	spec  string
	milli int64
}

// modelInfo is what sizing a kind on a model needs: the shape of its GPUs
// in each pool mode it has nodes in.
type modelInfo struct {
	dra, dp       shape
	hasDRA, hasDP bool
}

type nodeModel struct {
	node  *corev1.Node
	model string
}

// nodeHandler counts the Node changes that can change the supply or which
// nodes a pod's constraints match: nodes added or deleted, labels or
// gpuadmit's GPU and share annotations changed (not status updates).
func (s *supply) nodeHandler() cache.ResourceEventHandler {
	bump := func(any) { s.changes.Add(1) }
	return cache.ResourceEventHandlerFuncs{AddFunc: bump, DeleteFunc: bump,
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Node)
			n, ok2 := newObj.(*corev1.Node)
			if !ok1 || !ok2 || !maps.Equal(o.Labels, n.Labels) ||
				o.Annotations[allocator.AnnotationGPUs] != n.Annotations[allocator.AnnotationGPUs] ||
				o.Annotations[allocator.AnnotationShare] != n.Annotations[allocator.AnnotationShare] {
				bump(newObj)
			}
		}}
}

// version is what the supply depends on: Node and slice changes.
func (pl *Plugin) supplyVersion() [2]uint64 {
	return [2]uint64{pl.supply.changes.Load(), pl.nodes.slices.Load()}
}

// refresh rebuilds the supply if the nodes or slices changed since.
func (pl *Plugin) refreshSupply(at [2]uint64) {
	s := &pl.supply
	if s.built && s.at == at {
		return
	}
	s.at, s.built = at, true
	s.gpus, s.shapes, s.of, s.accepted = map[string]int{}, map[string]modelInfo{}, nil, map[string]map[string]bool{}
	s.models, s.sized = nil, map[acceptsKey]acceptsOut{}
	if s.nodes == nil {
		return
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range nodes {
		model, gpus, sh, ok := pl.nodeGPUs(n)
		if !ok || gpus == 0 || model == "" {
			continue
		}
		s.gpus[model] += gpus
		info := s.shapes[model]
		switch {
		case sh.dra && !info.hasDRA:
			info.dra, info.hasDRA = sh, true
		case !sh.dra && !info.hasDP:
			info.dp, info.hasDP = sh, true
		}
		s.shapes[model] = info
		s.of = append(s.of, nodeModel{node: n, model: model})
	}
}

// nodeGPUs is n's GPU model, its GPUs and their shape: from gpuadmit's
// ResourceSlices where the node has some, else from its share offer. ok
// is false for a node with neither, or with GPUs of more than one model.
func (pl *Plugin) nodeGPUs(n *corev1.Node) (model string, gpus int, sh shape, ok bool) {
	if pl.slices != nil {
		if objs, err := pl.slices.ByIndex(sliceIndex, n.Name); err == nil && len(objs) > 0 {
			sl := make([]*resourceapi.ResourceSlice, 0, len(objs))
			for _, o := range objs {
				sl = append(sl, o.(*resourceapi.ResourceSlice))
			}
			return sliceGPUs(sl)
		}
	}
	o := pl.offers.get(n)
	if o == nil || o.offer.SharesPerGPU <= 0 || o.healthy == 0 || o.model == "" {
		return "", 0, shape{}, false
	}
	return o.model, o.healthy, shape{capacity: o.offer.SharesPerGPU}, true
}

// sliceGPUs counts a node's GPUs in its slices: devices of type gpu, and
// the GPUs (parents) of MIG instances.
func sliceGPUs(nodeSlices []*resourceapi.ResourceSlice) (model string, gpus int, sh shape, ok bool) {
	parents := map[string]bool{}
	sh = shape{dra: true}
	for _, sl := range current(nodeSlices) {
		for _, d := range sl.Spec.Devices {
			switch attr(d, allocator.DRAAttrType) {
			case allocator.DRATypeGPU:
				gpus++
				if c, has := d.Capacity[allocator.DRACapacityMemory]; has && sh.capacity == 0 {
					sh = deviceShape(d, c)
				}
			case allocator.DRATypeMIG:
				if p := attr(d, allocator.DRAAttrParentUUID); !parents[p] {
					parents[p] = true
					gpus++
				}
			default:
				continue
			}
			m := attr(d, allocator.DRAAttrModel)
			if model != "" && m != model {
				return "", 0, shape{}, false
			}
			model = m
		}
	}
	return model, gpus, sh, sh.capacity > 0 || gpus > 0
}

// prices is the scarcity price per milli-GPU of each model under the
// workload's kinds pinned (allocator.Scarcity, over the supply); nil
// where no kind is pinned to some models only.
func (pl *Plugin) prices(pinned []pinnedKind) map[string]float64 {
	s := &pl.supply
	if len(s.gpus) == 0 {
		return nil
	}
	tasks := make([]allocator.FragTask, 0, len(pinned))
	for _, p := range pinned {
		if p.gpus == 0 {
			continue
		}
		spec, milli := s.accepts(p)
		tasks = append(tasks, allocator.FragTask{GPUs: p.gpus, GPUMilli: milli, Spec: spec, Weight: p.weight})
	}
	return allocator.Scarcity(tasks, s.gpus)
}

// accepts is the models spec of the models p accepts ("" where that is
// every model of the cluster) and the milli-GPU it takes of each GPU,
// averaged over those models by their GPUs (over every model of its mode
// where it accepts none).
func (s *supply) accepts(p pinnedKind) (spec string, milli int64) {
	k := acceptsKey{dra: p.dra, whole: p.whole, item: p.item, pin: p.pin}
	if out, ok := s.sized[k]; ok {
		return out.spec, out.milli
	}
	spec, milli = s.size(p)
	if s.sized != nil {
		s.sized[k] = acceptsOut{spec: spec, milli: milli}
	}
	return spec, milli
}

// size is accepts, computed.
func (s *supply) size(p pinnedKind) (spec string, milli int64) {
	var ms []string
	for _, m := range s.sortedModels() {
		info := s.shapes[m]
		if (p.dra && !info.hasDRA) || (!p.dra && !info.hasDP) || !allocator.ModelAllowed(p.pin.models, m) || !s.matches(p, m) {
			continue
		}
		ms = append(ms, m)
	}
	switch {
	case len(ms) == len(s.gpus):
		spec = ""
	case len(ms) == 0:
		spec = noModel
	default:
		spec = strings.Join(ms, "|")
	}
	over := ms
	if len(over) == 0 {
		over = s.sortedModels()
	}
	var sum, gpus float64
	for _, m := range over {
		info := s.shapes[m]
		if p.whole {
			sum, gpus = sum+allocator.MilliPerGPU*float64(s.gpus[m]), gpus+float64(s.gpus[m])
			continue
		}
		sh, ok := info.dp, info.hasDP
		if p.dra {
			sh, ok = info.dra, info.hasDRA
		}
		if take := sh.take(p.item); ok && sh.capacity > 0 && take > 0 {
			sum, gpus = sum+float64(sh.milli(min(take, sh.capacity))*int64(s.gpus[m])), gpus+float64(s.gpus[m])
		}
	}
	if gpus == 0 {
		return spec, allocator.MilliPerGPU
	}
	return spec, int64(sum/gpus + 0.5)
}

// sortedModels is the supply's models, sorted, kept in models.
func (s *supply) sortedModels() []string {
	if len(s.models) != len(s.gpus) {
		s.models = slices.Sorted(maps.Keys(s.gpus))
	}
	return s.models
}

// matches reports whether some node of model m matches p's node
// constraints (true for a kind without any).
func (s *supply) matches(p pinnedKind, m string) bool {
	if p.pin.nodes == "" || p.match == nil {
		return true
	}
	ok, seen := s.accepted[p.pin.nodes]
	if !seen {
		ok = map[string]bool{}
		for _, n := range s.of {
			if ok[n.model] {
				continue
			}
			if yes, err := p.match.Match(n.node); err == nil && yes {
				ok[n.model] = true
			}
		}
		s.accepted[p.pin.nodes] = ok
	}
	return ok[m]
}
