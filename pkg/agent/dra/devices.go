package dra

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// DriverName is the DRA driver's name: the driver field of its
// ResourceSlices and the domain of its attributes.
const DriverName = allocator.DRADriver

// Attribute and capacity names of the published devices; those the
// inventory reads are allocator's constants. They are written
// unqualified, which puts them in the driver's domain: a CEL selector reads
// device.attributes["gpu.gpuadmit.io"].profile.
const (
	// AttrType is "gpu" for a whole GPU, "mig" for a MIG instance.
	AttrType = allocator.DRAAttrType
	// AttrUUID is NVML's UUID: the GPU's, or the MIG device's when known.
	AttrUUID = allocator.DRAAttrUUID
	// AttrProduct is the product NVML reports ("NVIDIA H100 80GB HBM3").
	AttrProduct = "product"
	// AttrModel is the catalog's model ("H100-80GB").
	AttrModel = allocator.DRAAttrModel
	// AttrIndex is NVML's index of the GPU (of the parent GPU for MIG).
	AttrIndex = "index"
	// AttrProfile is a MIG instance's profile ("3g.40gb").
	AttrProfile = allocator.DRAAttrProfile
	// AttrParentUUID is the UUID of a MIG instance's GPU.
	AttrParentUUID = allocator.DRAAttrParentUUID
	// CapacityMemory is the device's memory in bytes.
	CapacityMemory = allocator.DRACapacityMemory
)

// Values of AttrType.
const (
	TypeGPU = allocator.DRATypeGPU
	TypeMIG = allocator.DRATypeMIG
)

// maxAttributeValue is the API server's limit on a string attribute.
const maxAttributeValue = resourceapi.DeviceAttributeMaxValueLength

// InstanceKey names a MIG GPU instance on a node: its GPU and its GI id.
type InstanceKey struct {
	GPU string
	GI  int
}

// DeviceOptions shape the published devices. The zero value shares whole
// GPUs in 1 GiB steps and knows no MIG device UUIDs.
type DeviceOptions struct {
	// ShareUnitMiB is the step (and the smallest amount) a share of a GPU's
	// memory is rounded up to; zero means 1024.
	ShareUnitMiB int64
	// MIGUUIDs are the MIG devices' UUIDs, by which a MIG instance's CDI
	// edits are made; nil leaves MIG devices without AttrUUID, and
	// preparing them fails.
	MIGUUIDs map[InstanceKey]string
}

func (o DeviceOptions) unitMiB() int64 {
	if o.ShareUnitMiB <= 0 {
		return allocator.DefaultShareUnitMiB
	}
	return o.ShareUnitMiB
}

// device is one published device and what preparing it needs.
type device struct {
	api resourceapi.Device
	// visible is the UUID its CDI edits are made for: a GPU or MIG UUID.
	visible string
	// memoryMiB is its memory, the most its claims may consume together.
	memoryMiB int64
	// shared reports whether claims may share it (allowMultipleAllocations).
	shared bool
	// gpuIndex and start order the devices (see order).
	gpuIndex, start int
}

// Devices returns the ResourceSlice devices of a node's GPUs, in the order
// the scheduler should try them (see order).
func Devices(gpus []allocator.NodeGPU, o DeviceOptions) []resourceapi.Device {
	devs := devices(gpus, o)
	out := make([]resourceapi.Device, len(devs))
	for i, d := range devs {
		out[i] = d.api
	}
	return out
}

// Taint keys of the driver's devices.
const (
	// TaintUnhealthy marks a GPU (every MIG instance of it) the health
	// watcher or discovery holds unhealthy (after a critical XID), with
	// effect NoSchedule: the scheduler allocates it to no new claim, while
	// pods already on it keep running, as in device-plugin mode, since a
	// health verdict can be wrong or pass (the watcher recovers a quiet GPU
	// after --recover-after) and NoExecute would evict every pod sharing it
	// at once. A GPU that is lost (no longer discovered) is TaintGone.
	TaintUnhealthy = DriverName + "/unhealthy"
	// TaintGone marks, NoExecute, a device that prepared claims hold but
	// that is no longer there as they were prepared (a MIG instance
	// deleted, a GPU gone or now another GPU under the same name): the
	// controller-manager's device-taint eviction controller evicts the pods
	// of those claims, so they are replaced by their owners rather than
	// wait for ever on a Prepare that cannot succeed.
	TaintGone = DriverName + "/gone"
)

// devices builds one device per GPU without MIG and one per MIG instance
// of a GPU with MIG on. An unhealthy GPU's devices are published tainted
// (TaintUnhealthy) while its memory is known; one whose memory discovery
// could not read has nothing to publish.
func devices(gpus []allocator.NodeGPU, o DeviceOptions) []device {
	var out []device
	for _, g := range gpus {
		if !g.Healthy && g.MemoryMiB == 0 {
			continue
		}
		first := len(out)
		if g.Shares() {
			out = append(out, gpuDevice(g, o.unitMiB()))
		} else {
			for _, in := range g.Instances {
				out = append(out, migDevice(g, in, o.MIGUUIDs[InstanceKey{GPU: g.UUID, GI: in.ID}]))
			}
		}
		if !g.Healthy {
			for i := first; i < len(out); i++ {
				out[i].taint(TaintUnhealthy, resourceapi.DeviceTaintEffectNoSchedule)
			}
		}
	}
	order(out)
	return out
}

// taint marks the device under key with effect.
func (d *device) taint(key string, effect resourceapi.DeviceTaintEffect) {
	d.api.Taints = append(d.api.Taints, resourceapi.DeviceTaint{Key: key, Effect: effect})
}

// gone is the key of the device's NoExecute taint, empty for none: a
// device Prepare refuses, since its pods are to be evicted.
func (d device) gone() string {
	for _, t := range d.api.Taints {
		if t.Effect == resourceapi.DeviceTaintEffectNoExecute {
			return t.Key
		}
	}
	return ""
}

// goneDevice is what stays published of a device that prepared claims
// hold but that is no longer there: its name, its memory as prepared, and
// TaintGone, so that the pods of those claims are evicted.
func goneDevice(name string, memoryMiB int64) device {
	d := device{memoryMiB: memoryMiB, gpuIndex: -1, start: -1}
	d.api = resourceapi.Device{
		Name:     name,
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapacityMemory: {Value: mib(memoryMiB)}},
	}
	d.taint(TaintGone, resourceapi.DeviceTaintEffectNoExecute)
	return d
}

// order sorts devices smallest memory first, then by GPU index, then by MIG
// placement. The scheduler's allocator tries a pool's devices in slice order
// and takes the first that fits (k8s.io/dynamic-resource-allocation/structured),
// so a share lands on the smallest GPU with room and fills one GPU before
// the next, whole GPUs go where no share is, and a MIG request takes the
// lowest placement of its profile.
func order(devs []device) {
	slices.SortStableFunc(devs, func(a, b device) int {
		return cmp.Or(cmp.Compare(a.memoryMiB, b.memoryMiB), cmp.Compare(a.gpuIndex, b.gpuIndex),
			cmp.Compare(a.start, b.start))
	})
}

// gpuDevice is a whole GPU whose memory claims share in steps of unitMiB.
func gpuDevice(g allocator.NodeGPU, unitMiB int64) device {
	d := device{visible: g.UUID, memoryMiB: g.MemoryMiB, gpuIndex: g.Index, start: -1}
	d.api = resourceapi.Device{
		Name: GPUDeviceName(g.Index),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrType: str(TypeGPU), AttrUUID: str(g.UUID), AttrProduct: str(g.Product),
			AttrModel: str(g.Model), AttrIndex: {IntValue: ptr.To(int64(g.Index))},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			CapacityMemory: {Value: mib(g.MemoryMiB)},
		},
	}
	if policy := sharePolicy(g.MemoryMiB, unitMiB); policy != nil {
		d.shared = true
		d.api.AllowMultipleAllocations = ptr.To(true)
		d.api.Capacity[CapacityMemory] = resourceapi.DeviceCapacity{Value: mib(g.MemoryMiB), RequestPolicy: policy}
	}
	return d
}

// sharePolicy rounds a memory request up to whole units, and makes a request
// without one take every whole unit: the API server wants default − min to
// be a multiple of step, so the default is min + ⌊(capacity − min)/step⌋·step,
// and what is left (less than one step) fits no other claim. A GPU smaller
// than two units is not shared (nil).
func sharePolicy(memoryMiB, unitMiB int64) *resourceapi.CapacityRequestPolicy {
	if memoryMiB < 2*unitMiB {
		return nil
	}
	def := unitMiB + (memoryMiB-unitMiB)/unitMiB*unitMiB
	return &resourceapi.CapacityRequestPolicy{
		Default:    ptr.To(mib(def)),
		ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(mib(unitMiB)), Step: ptr.To(mib(unitMiB))},
	}
}

// migDevice is one MIG instance, used by one claim at a time.
func migDevice(g allocator.NodeGPU, in allocator.MIGInstance, uuid string) device {
	d := device{visible: uuid, memoryMiB: in.MemoryMiB, gpuIndex: g.Index, start: in.Placement.Start}
	d.api = resourceapi.Device{
		Name: MIGDeviceName(g.Index, in.Profile, in.ID),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrType: str(TypeMIG), AttrProfile: str(in.Profile), AttrParentUUID: str(g.UUID),
			AttrProduct: str(g.Product), AttrModel: str(g.Model), AttrIndex: {IntValue: ptr.To(int64(g.Index))},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			CapacityMemory: {Value: mib(in.MemoryMiB)},
		},
	}
	if uuid != "" {
		d.api.Attributes[AttrUUID] = str(uuid)
	}
	return d
}

// GPUDeviceName is the device name of the GPU with NVML index i: "gpu-0".
func GPUDeviceName(i int) string { return fmt.Sprintf("gpu-%d", i) }

// MIGDeviceName is the device name of a MIG instance, a DNS label:
// "gpu-0-mig-3g-40gb-1" for GPU instance 1 of profile 3g.40gb on GPU 0
// ("1g.10gb+me" is written "1g-10gb-me"; GI ids are unique per GPU).
func MIGDeviceName(gpu int, profile string, gi int) string {
	p := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, profile)
	return fmt.Sprintf("gpu-%d-mig-%s-%d", gpu, strings.Trim(p, "-"), gi)
}

func str(s string) resourceapi.DeviceAttribute {
	if len(s) > maxAttributeValue {
		s = s[:maxAttributeValue]
	}
	return resourceapi.DeviceAttribute{StringValue: &s}
}

// mib is n MiB as a quantity of bytes ("81559Mi").
func mib(n int64) resource.Quantity {
	return *resource.NewQuantity(n<<20, resource.BinarySI)
}
