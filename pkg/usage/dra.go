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
