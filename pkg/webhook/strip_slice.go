package webhook

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// sliceAttributes are the only device attributes any reader of the cache
// reads: the inventory a device's type, model and MIG profile
// (inventory's readDRADevice), the usage report the UUID DCGM names its
// GPU by, a MIG device's parent's (usage's uuidOf). Both look them up
// unqualified, as the agent writes them.
var sliceAttributes = []resourceapi.QualifiedName{
	allocator.DRAAttrType, allocator.DRAAttrModel, allocator.DRAAttrProfile,
	allocator.DRAAttrUUID, allocator.DRAAttrParentUUID,
}

// StripSlice is the ResourceSlice informer's transform
// (cache.TransformFunc): of the slices of gpuadmit's driver (the only ones
// the cache selects) it keeps what the cache's readers read, so that a DRA
// node's slices cost a few hundred bytes a device, not whole devices
// (every attribute, the request policies' defaults and bounds, taints,
// the owner reference to the Node). The readers and what they read:
//   - the inventory (inventory.BuildDRA): spec.driver, spec.nodeName, the
//     pool's name and generation (only the newest generation counts), and
//     each device's type, model and profile attributes, its memory
//     capacity, the step of that capacity's request policy and
//     allowMultipleAllocations (a shared GPU's step);
//   - the usage report and its cost view (usage.DRAGPUs, usage.PodClaims):
//     the same slices and pools, each device's name (an allocation result
//     names its device by pool and name), its uuid or parentUUID and its
//     memory capacity;
//   - the cache itself: name, UID and resourceVersion.
//
// Device taints are not read: the scheduler keeps new claims off a tainted
// device, and the inventory counts a node's devices as they are published.
// TestStripSliceKeepsWhatTheReadersRead builds the inventory and the usage
// report from whole and stripped slices of every kind of device the agent
// publishes. Anything that is not a *resourceapi.ResourceSlice (a
// tombstone) is returned as it is.
func StripSlice(obj any) (any, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return obj, nil
	}
	out := &resourceapi.ResourceSlice{TypeMeta: s.TypeMeta}
	out.Name, out.UID, out.ResourceVersion = s.Name, s.UID, s.ResourceVersion
	out.Spec.Driver, out.Spec.NodeName, out.Spec.Pool = s.Spec.Driver, s.Spec.NodeName, s.Spec.Pool
	if s.Spec.Devices != nil {
		out.Spec.Devices = make([]resourceapi.Device, len(s.Spec.Devices))
		for i := range s.Spec.Devices {
			out.Spec.Devices[i] = stripDevice(&s.Spec.Devices[i])
		}
	}
	return out, nil
}

// stripDevice keeps a device's name, the attributes readers read, its
// memory capacity with only its request policy's step, and
// allowMultipleAllocations.
func stripDevice(d *resourceapi.Device) resourceapi.Device {
	out := resourceapi.Device{Name: d.Name, AllowMultipleAllocations: d.AllowMultipleAllocations}
	for _, k := range sliceAttributes {
		if a, ok := d.Attributes[k]; ok {
			if out.Attributes == nil {
				out.Attributes = make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(sliceAttributes))
			}
			out.Attributes[k] = a
		}
	}
	if c, ok := d.Capacity[allocator.DRACapacityMemory]; ok {
		kept := resourceapi.DeviceCapacity{Value: c.Value}
		if p := c.RequestPolicy; p != nil && p.ValidRange != nil && p.ValidRange.Step != nil {
			kept.RequestPolicy = &resourceapi.CapacityRequestPolicy{ValidRange: &resourceapi.CapacityRequestPolicyRange{Step: p.ValidRange.Step}}
		}
		out.Capacity = map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{allocator.DRACapacityMemory: kept}
	}
	return out
}
