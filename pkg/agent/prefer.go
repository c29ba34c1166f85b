package agent

import (
	"cmp"
	"fmt"
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// unit is one device the kubelet offers, parsed.
type unit struct {
	id string
	n  int
}

// prefer chooses the devices of one container: the must-include devices,
// then the lowest-numbered free units of one GPU — the must-include devices'
// GPU, or the best fit among all. A unit is free when the kubelet offers it,
// its GPU is healthy, and the tracker does not know it in use. The error
// wraps allocator.ErrNoFit when no one GPU has enough free units.
func prefer(s *snapshot, t *tracker, req *pluginapi.ContainerPreferredAllocationRequest) ([]string, error) {
	must := req.GetMustIncludeDeviceIDs()
	pinned, err := pinnedGPU(s, must)
	if err != nil {
		return nil, err
	}
	free := freeUnits(s, t, req.GetAvailableDeviceIDs(), must)
	need := int(req.GetAllocationSize()) - len(must)
	if need <= 0 {
		return slices.Clone(must), nil
	}
	gpu := pinned
	if gpu < 0 {
		gpu = bestFit(free, need)
	}
	if gpu < 0 || len(free[gpu]) < need {
		return nil, noFit(s, free, pinned, need)
	}
	out := slices.Clone(must)
	for _, u := range free[gpu][:need] {
		out = append(out, u.id)
	}
	return out, nil
}

// pinnedGPU is the GPU of the must-include devices (the kubelet passes the
// devices an init container had, for reuse), or -1 when there are none.
func pinnedGPU(s *snapshot, must []string) (int, error) {
	gpu := -1
	for _, id := range must {
		_, i, err := s.gpu(id)
		if err != nil {
			return 0, err
		}
		if gpu >= 0 && i != gpu {
			return 0, fmt.Errorf("must-include devices span GPUs %s and %s", s.gpus[gpu].uuid, s.gpus[i].uuid)
		}
		gpu = i
	}
	return gpu, nil
}

// freeUnits groups the free units the kubelet offers by GPU, lowest unit
// number first. Devices the plugin does not serve are ignored: the kubelet
// may still offer those of a GPU that has just left.
func freeUnits(s *snapshot, t *tracker, available, must []string) [][]unit {
	free := make([][]unit, len(s.gpus))
	for _, id := range available {
		g, i, err := s.gpu(id)
		if err != nil || !g.healthy || t.inUse(id) || slices.Contains(must, id) {
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

func noFit(s *snapshot, free [][]unit, pinned, need int) error {
	if pinned >= 0 {
		return fmt.Errorf("%w: GPU %s, which the container must stay on, has %d free units, %d more needed",
			allocator.ErrNoFit, s.gpus[pinned].uuid, len(free[pinned]), need)
	}
	most := 0
	for _, units := range free {
		most = max(most, len(units))
	}
	return fmt.Errorf("%w: %d units must fit on one GPU, the most free on one GPU is %d",
		allocator.ErrNoFit, need, most)
}
