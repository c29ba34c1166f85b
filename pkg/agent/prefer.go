package agent

import (
	"cmp"
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// unit is one device the kubelet offers, parsed.
type unit struct {
	id string
	n  int
}

// prefer chooses the devices of one container, and never fails: the kubelet
// fails the pod's admission when GetPreferredAllocation returns an error
// (ManagerImpl.devicesToAllocate in k8s.io/kubernetes/pkg/kubelet/cm/devicemanager
// returns callGetPreferredAllocationIfAvailable's error). The kubelet is
// the truth about what is free: the devices it offers are the healthy ones
// no running container holds, from its checkpoint, across plugin restarts.
//
// The preference is the must-include devices, then the lowest-numbered
// offered devices of one GPU: the must-include devices' GPU, or the best fit
// among all. When no one GPU has room it is the kubelet's own order instead
// (kubeletOrder), and Allocate is where a container spanning GPUs is refused.
func prefer(s *snapshot, req *pluginapi.ContainerPreferredAllocationRequest) (ids []string, onOneGPU bool) {
	if ids, ok := oneGPU(s, req); ok {
		return ids, true
	}
	return kubeletOrder(req), false
}

// oneGPU is the preference that keeps the container on one GPU, if any.
func oneGPU(s *snapshot, req *pluginapi.ContainerPreferredAllocationRequest) ([]string, bool) {
	must := req.GetMustIncludeDeviceIDs()
	pinned, ok := pinnedGPU(s, must)
	if !ok {
		return nil, false
	}
	need := int(req.GetAllocationSize()) - len(must)
	if need <= 0 {
		return slices.Clone(must), true
	}
	free := freeUnits(s, req.GetAvailableDeviceIDs(), must)
	gpu := pinned
	if gpu < 0 {
		gpu = bestFit(free, need)
	}
	if gpu < 0 || len(free[gpu]) < need {
		return nil, false
	}
	out := slices.Clone(must)
	for _, u := range free[gpu][:need] {
		out = append(out, u.id)
	}
	return out, true
}

// pinnedGPU is the GPU of the must-include devices (the kubelet passes the
// devices an init container had, for reuse), -1 when there are none, and
// false when they are not all devices of one GPU the plugin serves.
func pinnedGPU(s *snapshot, must []string) (int, bool) {
	gpu := -1
	for _, id := range must {
		_, i, err := s.gpu(id)
		if err != nil || (gpu >= 0 && i != gpu) {
			return 0, false
		}
		gpu = i
	}
	return gpu, true
}

// freeUnits groups the offered devices by GPU, lowest unit number first,
// leaving out the must-include ones and those of a GPU the plugin has since
// found unhealthy or no longer serves (the kubelet's list may be a moment old).
func freeUnits(s *snapshot, available, must []string) [][]unit {
	free := make([][]unit, len(s.gpus))
	for _, id := range available {
		g, i, err := s.gpu(id)
		if err != nil || !g.healthy || slices.Contains(must, id) {
			continue
		}
		_, n, _ := ParseDeviceID(id)
		free[i] = append(free[i], unit{id: id, n: n})
	}
	for _, units := range free {
		slices.SortFunc(units, func(a, b unit) int { return cmp.Compare(a.n, b.n) })
	}
	return free
}

func bestFit(free [][]unit, need int) int {
	counts := make([]int64, len(free))
	for i, units := range free {
		counts[i] = int64(len(units))
	}
	gpu, ok := allocator.BestFit(counts, int64(need))
	if !ok {
		return -1
	}
	return gpu
}

// kubeletOrder is what the kubelet would choose without a preference: the
// must-include devices, then the offered devices in the order offered, up
// to the allocation size.
func kubeletOrder(req *pluginapi.ContainerPreferredAllocationRequest) []string {
	size := int(req.GetAllocationSize())
	out := slices.Clone(req.GetMustIncludeDeviceIDs())
	for _, id := range req.GetAvailableDeviceIDs() {
		if len(out) >= size {
			break
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}
