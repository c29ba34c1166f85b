package webhook

import (
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// inventoryAttributes are the device attributes the inventory reads
// (inventory's readDRADevice): a device's type, model and MIG profile.
// idAttributes are those the usage report reads besides (usage's uuidOf):
// the UUID DCGM names its GPU by, a MIG device's parent's. Both look them
// up unqualified, as the agent writes them.
var (
	inventoryAttributes = []resourceapi.QualifiedName{allocator.DRAAttrType, allocator.DRAAttrModel, allocator.DRAAttrProfile}
	idAttributes        = []resourceapi.QualifiedName{allocator.DRAAttrUUID, allocator.DRAAttrParentUUID}
)

// maxInterned bounds each table of shared attribute and capacity maps: the
// driver's devices have a few dozen kinds (models, MIG profiles), so a
// table this full means values that do not repeat, and the rest are kept
// unshared.
const maxInterned = 4096

// SliceTransform is the ResourceSlice informer's transform
// (cache.TransformFunc) for a process of role r: of the slices of
// gpuadmit's driver (the only ones the cache selects) it keeps what that
// process's readers read, so that a DRA node's slices cost a few hundred
// bytes a device, not whole devices. A device is mostly its two maps (a
// Go map of up to 8 entries takes 8 slots: about 1.2 KB for attributes,
// whose values are 128-byte structs, and 650 bytes for capacities), so
// the maps devices have alike (the same type, model and profile, the same
// memory and step) are one map shared by those devices: the cache's
// objects are read, never written (a Get or List that is not
// UnsafeDisableDeepCopy copies them). The readers and what they read:
//   - the inventory (inventory.BuildDRA, every role): spec.driver,
//     spec.nodeName, the pool's name and generation (only the newest
//     generation counts), and each device's type, model and profile
//     attributes, its memory capacity, the step of that capacity's request
//     policy and allowMultipleAllocations (a shared GPU's step);
//   - the usage report and its cost view (usage.DRAGPUs, usage.PodClaims:
//     a role that reconciles): the same slices and pools, each device's
//     name (an allocation result names its device by pool and name), its
//     uuid or parentUUID and its memory capacity. A serving-only replica
//     drops the UUIDs, so its devices of one kind share one attribute map;
//   - the cache itself: name, UID and resourceVersion.
//
// Device taints are not read: the scheduler keeps new claims off a tainted
// device, and the inventory counts a node's devices as they are published.
// TestStripSliceKeepsWhatTheReadersRead builds the inventory and the usage
// report from whole and stripped slices of every kind of device the agent
// publishes. Anything that is not a *resourceapi.ResourceSlice (a
// tombstone) is returned as it is.
func SliceTransform(r Role) toolscache.TransformFunc {
	s := &sliceStripper{ids: r != RoleWebhook, attrs: map[attrKey]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{},
		strs: map[string]*string{}, caps: map[capKey]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
	return s.strip
}

// sliceStripper strips slices and keeps the tables of shared maps; one
// informer's transform, called from its goroutine, so the lock is
// uncontended.
type sliceStripper struct {
	ids bool // keep idAttributes (the usage report reads them): every role but RoleWebhook

	mu    sync.Mutex
	attrs map[attrKey]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	strs  map[string]*string
	caps  map[capKey]map[resourceapi.QualifiedName]resourceapi.DeviceCapacity
}

// attrKey is a device's inventoryAttributes, "" where it has none.
type attrKey struct{ typ, model, profile string }

// capKey is a memory capacity: its bytes, and its request policy's step
// (0: none).
type capKey struct{ value, step int64 }

func (s *sliceStripper) strip(obj any) (any, error) {
	in, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return obj, nil
	}
	out := &resourceapi.ResourceSlice{TypeMeta: in.TypeMeta}
	out.Name, out.UID, out.ResourceVersion = in.Name, in.UID, in.ResourceVersion
	out.Spec.Driver, out.Spec.NodeName, out.Spec.Pool = in.Spec.Driver, in.Spec.NodeName, in.Spec.Pool
	if in.Spec.Devices != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		out.Spec.Devices = make([]resourceapi.Device, len(in.Spec.Devices))
		for i := range in.Spec.Devices {
			d := &in.Spec.Devices[i]
			out.Spec.Devices[i] = resourceapi.Device{Name: d.Name, AllowMultipleAllocations: d.AllowMultipleAllocations,
				Attributes: s.attributes(d), Capacity: s.capacity(d)}
		}
	}
	return out, nil
}

// attributes are the device's attributes its readers read: one map shared
// by every device of its type, model and profile where none of its UUIDs
// is kept, a map of its own with them; nil for none. Only a string value
// of type, model or profile is read, so only that is kept.
func (s *sliceStripper) attributes(d *resourceapi.Device) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	key := attrKey{typ: stringAttr(d, allocator.DRAAttrType), model: stringAttr(d, allocator.DRAAttrModel), profile: stringAttr(d, allocator.DRAAttrProfile)}
	var ids []resourceapi.QualifiedName
	if s.ids {
		for _, k := range idAttributes {
			if _, ok := d.Attributes[k]; ok {
				ids = append(ids, k)
			}
		}
	}
	if shared, ok := s.attrs[key]; ok && len(ids) == 0 {
		return shared
	}
	var out map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	for i, v := range [...]string{key.typ, key.model, key.profile} { // inventoryAttributes' order
		if k := inventoryAttributes[i]; v != "" {
			if out == nil {
				out = make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(inventoryAttributes)+len(ids))
			}
			out[k] = resourceapi.DeviceAttribute{StringValue: s.str(v)}
		}
	}
	if len(ids) > 0 {
		if out == nil {
			out = make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(ids))
		}
		for _, k := range ids {
			out[k] = d.Attributes[k]
		}
		return out
	}
	if len(s.attrs) < maxInterned {
		s.attrs[key] = out
	}
	return out
}

// stringAttr is the device's attribute name as a string, "" when it has no
// string value: what the inventory reads.
func stringAttr(d *resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// str is v, one copy for every device that has it.
func (s *sliceStripper) str(v string) *string {
	if p, ok := s.strs[v]; ok {
		return p
	}
	p := &v
	if len(s.strs) < maxInterned {
		s.strs[v] = p
	}
	return p
}

// capacity is the device's memory capacity with only its request policy's
// step, as one map shared by every device of that memory and step.
func (s *sliceStripper) capacity(d *resourceapi.Device) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	c, ok := d.Capacity[allocator.DRACapacityMemory]
	if !ok {
		return nil
	}
	kept := resourceapi.DeviceCapacity{Value: c.Value}
	var step *resource.Quantity
	if p := c.RequestPolicy; p != nil && p.ValidRange != nil && p.ValidRange.Step != nil {
		step = p.ValidRange.Step
		kept.RequestPolicy = &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Step: step}}
	}
	key, ok := capKeyOf(c.Value, step)
	if shared, found := s.caps[key]; ok && found {
		return shared
	}
	out := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{allocator.DRACapacityMemory: kept}
	if ok && len(s.caps) < maxInterned {
		s.caps[key] = out
	}
	return out
}

// capKeyOf is the key of a capacity and step; ok is false where either is
// not a whole number of bytes that fits an int64 (never shared then).
func capKeyOf(value resource.Quantity, step *resource.Quantity) (capKey, bool) {
	v, ok := value.AsInt64()
	if !ok {
		return capKey{}, false
	}
	if step == nil {
		return capKey{value: v}, true
	}
	st, ok := step.AsInt64()
	return capKey{value: v, step: st}, ok && st > 0
}
