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
	type at struct {
		node string
		i    int
	}
	out := map[string][]GPU{}
	where := map[deviceKey]at{}
	for _, s := range current(slices) {
		node := *s.Spec.NodeName
		for _, d := range s.Spec.Devices {
			where[deviceKey{s.Spec.Pool.Name, d.Name}] = at{node, len(out[node])}
			out[node] = append(out[node], GPU{UUID: uuidOf(d), CapacityMiB: memoryMiB(d)})
		}
	}
	for _, c := range claims {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			a, ok := where[deviceKey{r.Pool, r.Device}]
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

// deviceKey names a device of gpuadmit's driver as an allocation result does.
type deviceKey struct{ pool, device string }

// current are the slices of gpuadmit's driver of the newest generation of
// each pool: older slices are being replaced.
func current(slices []resourceapi.ResourceSlice) []resourceapi.ResourceSlice {
	newest := map[string]int64{}
	for _, s := range slices {
		if ours(s) {
			newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
		}
	}
	var out []resourceapi.ResourceSlice
	for _, s := range slices {
		if ours(s) && s.Spec.Pool.Generation == newest[s.Spec.Pool.Name] {
			out = append(out, s)
		}
	}
	return out
}

// PodClaims are, by the pod that owns allocated ResourceClaims
// ("namespace/name", the claims' controlling owner), where the scheduler
// allocated them and what they hold: the node of the slice that publishes
// each allocated device (its driver, pool and device), as DRAGPUs places
// it, and the GPU memory of the devices (a share's consumed memory, a MIG
// device's or GPU's own). The scheduler allocates a pod's claims before
// it binds the pod, and a pod with DRA alternatives names no pool in its
// record and is charged its largest alternative, so this is what says
// which pool holds its devices, and how much.
func PodClaims(slices []resourceapi.ResourceSlice, claims []resourceapi.ResourceClaim) map[string]PodClaim {
	type dev struct {
		node string
		mib  int64
	}
	devs := map[deviceKey]dev{}
	for _, s := range current(slices) {
		for _, d := range s.Spec.Devices {
			devs[deviceKey{s.Spec.Pool.Name, d.Name}] = dev{*s.Spec.NodeName, memoryMiB(d)}
		}
	}
	out := map[string]PodClaim{}
	for _, c := range claims {
		owner := podOwner(c)
		if c.Status.Allocation == nil || owner == "" {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			d, ok := devs[deviceKey{r.Pool, r.Device}]
			if !ok || r.Driver != allocator.DRADriver {
				continue
			}
			pc := out[c.Namespace+"/"+owner]
			pc.Node = d.node
			if q, ok := r.ConsumedCapacity[allocator.DRACapacityMemory]; ok {
				pc.MiB += q.Value() >> 20
			} else {
				pc.MiB += d.mib
			}
			out[c.Namespace+"/"+owner] = pc
		}
	}
	return out
}

// PodClaim is where a pod's allocated claims are, and the GPU memory they hold.
type PodClaim struct {
	Node string
	MiB  int64
}

// podOwner is the name of the pod that controls the claim (a claim made
// from a pod's template), or "".
func podOwner(c resourceapi.ResourceClaim) string {
	for _, o := range c.OwnerReferences {
		if o.Kind == "Pod" && o.APIVersion == "v1" && o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return ""
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
