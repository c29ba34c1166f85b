package inventory

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// DRA pools. On a node whose GPUs gpuadmit's DRA driver publishes as
// ResourceSlices, the stock scheduler allocates a device per claim and fits
// per GPU. Whole GPUs and MIG instances keep their extended-resource names
// (nvidia.com/gpu, nvidia.com/mig-<profile>) through DeviceClasses with
// extendedResourceName, so the inventory counts them under those names as if
// a device plugin advertised them.

// draDevice is one device of gpuadmit's driver, as the inventory reads it.
type draDevice struct {
	typ, model, profile string
	memoryMiB           int64
	// stepMiB is the step a shared GPU's claims are rounded up to (its
	// request policy); 0 for a device that claims cannot share.
	stepMiB int64
}

// draNodes reads gpuadmit's devices from ResourceSlices, by node. Only the
// newest generation of each pool counts: older slices are being replaced.
func draNodes(rs []resourceapi.ResourceSlice) map[string][]draDevice {
	newest := map[string]int64{}
	for _, s := range rs {
		if ours(s) {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	out := map[string][]draDevice{}
	for _, s := range rs {
		if !ours(s) || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for _, d := range s.Spec.Devices {
			out[*s.Spec.NodeName] = append(out[*s.Spec.NodeName], readDRADevice(d))
		}
	}
	return out
}

func ours(s resourceapi.ResourceSlice) bool {
	return s.Spec.Driver == allocator.DRADriver && s.Spec.NodeName != nil && *s.Spec.NodeName != ""
}

func readDRADevice(d resourceapi.Device) draDevice {
	attr := func(name string) string {
		if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	out := draDevice{typ: attr(allocator.DRAAttrType), model: attr(allocator.DRAAttrModel), profile: attr(allocator.DRAAttrProfile)}
	if c, ok := d.Capacity[allocator.DRACapacityMemory]; ok {
		out.memoryMiB = c.Value.Value() >> 20
		if p := c.RequestPolicy; p != nil && p.ValidRange != nil && p.ValidRange.Step != nil && ptr.Deref(d.AllowMultipleAllocations, false) {
			out.stepMiB = p.ValidRange.Step.Value() >> 20
		}
	}
	return out
}

// draShareStep is the step shares on a DRA node are rounded up to: the
// largest of its shareable GPUs' steps, so a share sized by it is valid on
// every one of them; 0 when no GPU of the node can be shared.
func draShareStep(devs []draDevice) int64 {
	var step int64
	for _, d := range devs {
		step = max(step, d.stepMiB)
	}
	return step
}

// draAllocatable is what a DRA node serves under extended-resource names:
// nvidia.com/gpu per GPU without MIG, nvidia.com/mig-<profile> per instance.
func draAllocatable(devs []draDevice) map[string]int64 {
	out := map[string]int64{}
	for _, d := range devs {
		switch d.typ {
		case allocator.DRATypeGPU:
			out[ResourceGPU]++
		case allocator.DRATypeMIG:
			out[MIGResource(d.profile)]++
		}
	}
	return out
}

// draConflict names what a device plugin advertises on a DRA node under a
// name the driver's DeviceClasses also serve, or "". The scheduler leaves a
// class's extended resource to the device plugin on a node that advertises
// it, so the driver's GPUs would be counted by a plugin that does not
// serve them, or the same GPUs served twice.
func draConflict(n map[string]int64) string {
	var names []string
	for r, q := range n {
		if q > 0 && (r == ResourceGPU || IsMIGResource(r) || r == ResourceShare || r == ResourceGPUShare) {
			names = append(names, fmt.Sprintf("%s=%d", r, q))
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return fmt.Sprintf("gpuadmit's DRA driver publishes its GPUs, and a device plugin also advertises %s: "+
		"the scheduler would count the plugin's devices for gpuadmit's DeviceClasses; stop NVIDIA's (or the share) "+
		"device plugin on nodes labelled %s=%s",
		strings.Join(names, ", "), allocator.LabelNodeMode, allocator.NodeModeDRA)
}

// servedByGpuadmit keeps the extended resources whose DeviceClass, as the
// scheduler picks it, is one of gpuadmit's driver's. Where another
// DeviceClass carries the same extendedResourceName and is newer, the
// scheduler hands that name to it on every node, so gpuadmit's DRA pools
// cannot serve it: the inventory says so once and leaves it out.
func (inv *Inventory) servedByGpuadmit(alloc map[string]int64) map[string]int64 {
	if inv.classFor == nil {
		return alloc
	}
	for r := range alloc {
		class := inv.classFor(r)
		if strings.HasSuffix(class, ".gpuadmit.io") {
			continue
		}
		delete(alloc, r)
		if inv.lost == nil {
			inv.lost = map[string]bool{}
		}
		if !inv.lost[r] {
			inv.lost[r] = true
			inv.warnf("the scheduler serves %s from DeviceClass %q, not gpuadmit's: where two DeviceClasses carry one "+
				"extendedResourceName the newest wins cluster-wide, so gpuadmit's DRA pools do not serve %s", r, class, r)
		}
	}
	return alloc
}
