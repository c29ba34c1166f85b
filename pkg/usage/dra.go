package usage

import (
	"sort"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// DRAGPUs are, by node, the devices of gpuadmit's DRA driver that slices
// publish, each with what the allocated claims hold of it: a claim's
// consumed memory on a shared GPU, a whole device otherwise. A MIG device
// is named by its parent GPU's UUID, as DCGM's exporter labels a MIG
// device's series (with GPU_I_ID beside it), so its allocation joins DCGM's
// GPU; Report.GPUs sums a GPU's devices. Only the newest generation of
// each slice pool counts, as for the inventory.
func DRAGPUs(slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) map[string][]GPU {
	type key struct{ pool, device string }
	type at struct {
		node string
		i    int
	}
	newest := map[string]int64{}
	for _, s := range slices {
		if ours(s) {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	out := map[string][]GPU{}
	where := map[key]at{}
	for _, s := range slices {
		if !ours(s) || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		node := *s.Spec.NodeName
		for _, d := range s.Spec.Devices {
			where[key{s.Spec.Pool.Name, d.Name}] = at{node, len(out[node])}
			out[node] = append(out[node], GPU{UUID: uuidOf(d), CapacityMiB: memoryMiB(d)})
		}
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			a, ok := where[key{r.Pool, r.Device}]
			if r.Driver != allocator.DRADriver || !ok {
				continue
			}
			g := &out[a.node][a.i]
			if q, ok := r.ConsumedCapacity[allocator.DRACapacityMemory]; ok {
				g.AllocatedMiB += q.Value() >> 20
			} else {
				g.AllocatedMiB = g.CapacityMiB
			}
		}
	}
	for _, gs := range out {
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].UUID < gs[j].UUID })
	}
	return out
}

func ours(s resourceapi.ResourceSlice) bool {
	return s.Spec.Driver == allocator.DRADriver && s.Spec.NodeName != nil && *s.Spec.NodeName != ""
}

// uuidOf is the UUID DCGM names the device's GPU by: a MIG device's parent's.
func uuidOf(d resourceapi.Device) string {
	for _, name := range []string{allocator.DRAAttrParentUUID, allocator.DRAAttrUUID} {
		if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.StringValue != nil {
			return *a.StringValue
		}
	}
	return ""
}

func memoryMiB(d resourceapi.Device) int64 {
	if c, ok := d.Capacity[allocator.DRACapacityMemory]; ok {
		return c.Value.Value() >> 20
	}
	return 0
}

// ClaimDevices are the devices each ResourceClaim takes, by
// "namespace/name": the devices its allocation holds once allocated, else
// what its requests ask (an exact count, or the first alternative's; a
// request for all of a class's devices, whose number the pool decides, as
// one). Compute splits a pod's GPU memory over them: a claim of two whole
// GPUs is two devices of half the memory each, not one of all of it.
func ClaimDevices(claims []resourceapi.ResourceClaim) map[string]int64 {
	out := make(map[string]int64, len(claims))
	for _, c := range claims {
		var n int64
		if a := c.Status.Allocation; a != nil {
			n = int64(len(a.Devices.Results))
		} else {
			for _, r := range c.Spec.Devices.Requests {
				n += requestedDevices(r)
			}
		}
		out[c.Namespace+"/"+c.Name] = max(n, 1)
	}
	return out
}

func requestedDevices(r resourceapi.DeviceRequest) int64 {
	count := func(mode resourceapi.DeviceAllocationMode, n int64) int64 {
		if mode == resourceapi.DeviceAllocationModeAll {
			return 1
		}
		return max(n, 1) // ExactCount defaults to one
	}
	switch {
	case r.Exactly != nil:
		return count(r.Exactly.AllocationMode, r.Exactly.Count)
	case len(r.FirstAvailable) > 0:
		return count(r.FirstAvailable[0].AllocationMode, r.FirstAvailable[0].Count)
	}
	return 1
}
