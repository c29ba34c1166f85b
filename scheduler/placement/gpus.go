package placement

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// shape is what turning a node's GPUs into milli-GPU depends on: the pool's
// mode, a GPU's capacity (bytes of a DRA device's memory, or the shares a
// device plugin offers per GPU) and, in DRA pools, the device's capacity
// request policy, which rounds every share up to whole units.
type shape struct {
	dra            bool
	capacity       int64
	min, step, def int64 // 0 where the device is not shared
}

// gpuView is a node's GPUs as the plugin models them: what each has left,
// in the units of its shape, in the order the node side tries them.
type gpuView struct {
	shape shape
	left  []int64 // never changed once the view is made
	kept  *base   // see base
	// model is the GPU model of the node's GPUs (in a DRA view, the model
	// attribute of its devices; in a device-plugin view, the model the
	// agent publishes of its share-serving GPUs), by which it pays the
	// scarcity price; "" where they are of more than one: the plugin then
	// prices none and predicts no alternative of a model there. In a DRA
	// view, mig is the MIG devices no claim holds, by the DeviceClass of
	// their profile, and migKey spells it.
	model  string
	mig    map[string]int64
	migKey string
	// id is the number of the view's node state, as nodeStates.ids
	// numbered it in its epoch idEpoch (idEpoch 0: not numbered); -1 where it has
	// none.
	id      int32
	idEpoch uint32
	// modelNum is the number of model (nodeStates.models); 0 until a
	// cycle numbers it.
	modelNum uint32
}

// take is how much of a GPU of shape s item it takes (0 when the pool's
// mode does not serve it).
func (s shape) take(it item) int64 {
	switch {
	case !s.dra:
		return it.shares
	case it.shares > 0:
		return 0
	case s.step == 0: // not shared: every claim takes the device whole
		return s.capacity
	case it.whole || it.memory == 0:
		return s.def
	case it.memory <= s.min:
		return s.min
	}
	return s.min + (it.memory-s.min+s.step-1)/s.step*s.step
}

// choose is the GPU of v the node side gives need: the DRA allocator's
// first fit in slice order, or the device plugin's best fit
// (allocator.BestFit, what its GetPreferredAllocation prefers).
func (v *gpuView) choose(need int64) (int, bool) {
	if need <= 0 {
		return 0, false
	}
	if !v.shape.dra {
		return allocator.BestFit(v.left, need)
	}
	for i, l := range v.left {
		if l >= need {
			return i, true
		}
	}
	return 0, false
}

// milli is x units of s in milli-GPU, rounded up so that "x fits in y"
// means the same in both.
func (s shape) milli(x int64) int64 {
	return (x*allocator.MilliPerGPU + s.capacity - 1) / s.capacity
}

// model is the FragNode model (and task spec) of a shape's pool mode, so
// that kinds of one mode count as unable to run on nodes of the other.
func (s shape) model() string {
	if s.dra {
		return allocator.NodeModeDRA
	}
	return allocator.NodeModeDevicePlugin
}

// draView is the node's GPUs in gpuadmit's ResourceSlices: one entry per
// device of type gpu, in slice order, with what the claims h holds consumed
// of its memory, and the count of MIG instances no claim holds (they are
// not shares: only a prediction of alternatives counts them). nil when the
// node has neither, or GPUs of different sizes.
func draView(nodeSlices []*resourceapi.ResourceSlice, h held) *gpuView {
	return parseLayout(nodeSlices).view(h)
}

// layout is what draView reads of a node's slices, parsed once for as
// long as the slices stay as they are: a node's view is built afresh
// whenever a pod comes or goes, and parsing its slices (each device's
// attributes by name) was about half of that, some 20 µs a node in the
// 400-node replay. nil is a node without gpuadmit's GPUs (or with GPUs of
// different sizes), whose view is nil.
type layout struct {
	shape shape
	model string // "" where the devices are of more than one
	gpus  []deviceKey
	migs  []migDevice
}

// migDevice is a MIG device and the DeviceClass of its profile.
type migDevice struct {
	key   deviceKey
	class string
}

func parseLayout(nodeSlices []*resourceapi.ResourceSlice) *layout {
	l := &layout{shape: shape{dra: true}}
	found, gpus, mixed := false, false, false
	for _, sl := range current(nodeSlices) {
		for _, d := range sl.Spec.Devices {
			switch typ := attr(d, allocator.DRAAttrType); typ {
			case allocator.DRATypeGPU:
				c, ok := d.Capacity[allocator.DRACapacityMemory]
				if !ok || c.Value.Value() <= 0 {
					continue
				}
				s := deviceShape(d, c)
				if !gpus {
					l.shape, gpus = s, true
				} else if l.shape != s {
					return nil
				}
				l.gpus = append(l.gpus, deviceKey{pool: sl.Spec.Pool.Name, device: d.Name})
			case allocator.DRATypeMIG:
				l.migs = append(l.migs, migDevice{key: deviceKey{pool: sl.Spec.Pool.Name, device: d.Name},
					class: allocator.DRAMIGClass(attr(d, allocator.DRAAttrProfile))})
			default:
				continue
			}
			m := attr(d, allocator.DRAAttrModel)
			if found && m != l.model {
				mixed = true
			}
			l.model, found = m, true
		}
	}
	if !found {
		return nil
	}
	if mixed {
		l.model = ""
	}
	return l
}

// view is the node's view with what h holds taken.
func (l *layout) view(h held) *gpuView {
	if l == nil {
		return nil
	}
	v := &gpuView{shape: l.shape, model: l.model, left: make([]int64, 0, len(l.gpus))}
	for _, k := range l.gpus {
		v.left = append(v.left, l.shape.capacity-h.consumed(k.pool, k.device, l.shape))
	}
	if len(l.migs) > 0 {
		v.mig = map[string]int64{}
		for _, d := range l.migs {
			if !h.whole[d.key] {
				v.mig[d.class]++
			}
		}
	}
	v.migKey = spellMIG(v.mig)
	return v
}

// spellMIG spells MIG counts, sorted by class, for a comparable key.
func spellMIG(m map[string]int64) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d;", k, m[k])
	}
	return b.String()
}

// attr is a string attribute of a device of gpuadmit's driver, by its bare
// or its driver-qualified name; "" when it has none.
func attr(d resourceapi.Device, name string) string {
	for _, k := range []resourceapi.QualifiedName{resourceapi.QualifiedName(name), resourceapi.QualifiedName(allocator.DRADriver + "/" + name)} {
		if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

// current keeps the slices of each pool's newest generation, ordered by
// pool and name.
func current(in []*resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	gen := map[string]int64{}
	for _, s := range in {
		gen[s.Spec.Pool.Name] = max(gen[s.Spec.Pool.Name], s.Spec.Pool.Generation)
	}
	var out []*resourceapi.ResourceSlice
	for _, s := range in {
		if s.Spec.Pool.Generation == gen[s.Spec.Pool.Name] {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *resourceapi.ResourceSlice) int {
		return cmp.Or(cmp.Compare(a.Spec.Pool.Name, b.Spec.Pool.Name), cmp.Compare(a.Name, b.Name))
	})
	return out
}

func deviceShape(d resourceapi.Device, c resourceapi.DeviceCapacity) shape {
	s := shape{dra: true, capacity: c.Value.Value()}
	p := c.RequestPolicy
	if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || p == nil || p.ValidRange == nil ||
		p.ValidRange.Min == nil || p.ValidRange.Step == nil || p.Default == nil {
		return s
	}
	s.min, s.step, s.def = p.ValidRange.Min.Value(), p.ValidRange.Step.Value(), p.Default.Value()
	return s
}

// offers caches what device-plugin nodes publish, parsed, by node name:
// Score reads it for every node of every cycle, and the annotations change
// only when the agent rediscovers. Entries are never changed once stored,
// so concurrent Score calls share them.
type offers struct{ m sync.Map }

type offer struct {
	gpus, share string // the annotations it was parsed from
	offer       allocator.ShareOffer
	healthy     int    // GPUs that serve shares and are healthy
	model       string // their model; "" where they are of more than one
}

func (o *offers) get(n *corev1.Node) *offer {
	g, s := n.Annotations[allocator.AnnotationGPUs], n.Annotations[allocator.AnnotationShare]
	if s == "" {
		return nil
	}
	if v, ok := o.m.Load(n.Name); ok && v.(*offer).gpus == g && v.(*offer).share == s {
		return v.(*offer)
	}
	e := &offer{gpus: g, share: s}
	var gpus []allocator.NodeGPU
	if json.Unmarshal([]byte(s), &e.offer) != nil || json.Unmarshal([]byte(g), &gpus) != nil || e.offer.SharesPerGPU <= 0 {
		e.offer = allocator.ShareOffer{}
	}
	mixed := false
	for _, gpu := range gpus {
		if gpu.Shares() && gpu.Healthy {
			if e.healthy > 0 && gpu.Model != e.model {
				mixed = true
			}
			e.healthy++
			e.model = gpu.Model
		}
	}
	if mixed {
		e.model = ""
	}
	o.m.Store(n.Name, e)
	return e
}

// devicePluginView is a device-plugin node's GPUs: SharesPerGPU units on
// each healthy GPU without MIG, less the units of the pods on the node,
// packed as the agent's best fit would have packed them, in the order the
// pods were created. The scheduler cannot know which GPU a running
// container's devices are on; this is the layout they have unless pods
// ended in between. nil when the node serves no shares of res, or its pods
// hold more than the model has room for.
func devicePluginView(n fwk.NodeInfo, o *offer, res corev1.ResourceName) *gpuView {
	if o == nil || o.offer.Resource != string(res) || o.healthy == 0 {
		return nil
	}
	per := o.offer.SharesPerGPU
	free := make([]int64, o.healthy)
	for i := range free {
		free[i] = per
	}
	pods := n.GetPods()
	held := make([]*corev1.Pod, 0, len(pods))
	for _, p := range pods {
		held = append(held, p.GetPod())
	}
	slices.SortStableFunc(held, func(a, b *corev1.Pod) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	var needs []int64
	for _, p := range held {
		for _, c := range p.Spec.Containers {
			if u := quantity(c.Resources, res); u > 0 {
				needs = append(needs, u)
			}
		}
	}
	at, err := allocator.Pack(free, needs)
	if err != nil {
		return nil
	}
	for i, g := range at {
		free[g] -= needs[i]
	}
	return &gpuView{shape: shape{capacity: per}, left: free, model: o.model}
}
