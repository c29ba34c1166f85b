package agent

import (
	"fmt"
	"strconv"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Environment variables Allocate sets in a container.
const (
	// EnvVisibleDevices makes the NVIDIA container runtime expose the GPU.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// EnvMemoryLimitMiB tells the workload (and any in-container enforcer)
	// how much of the GPU's memory it was given.
	EnvMemoryLimitMiB = "GPUADMIT_MEMORY_LIMIT_MIB"
	// EnvMPSMemoryLimit makes the CUDA MPS server enforce the limit.
	EnvMPSMemoryLimit = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
)

// allocation is what one container gets: a GPU and how many shares of it.
type allocation struct {
	uuid   string
	shares int
}

// allocationOf derives a container's GPU from its device IDs alone: every ID
// must name a device the plugin serves, and all the same GPU, since a
// container's share of memory is on one GPU.
func allocationOf(s *snapshot, ids []string) (allocation, error) {
	if len(ids) == 0 {
		return allocation{}, fmt.Errorf("no devices to allocate")
	}
	if s.unitMiB == 0 {
		return allocation{}, fmt.Errorf("no share size: the memory of no GPU here is known")
	}
	var a allocation
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if seen[id] {
			return allocation{}, fmt.Errorf("device %q listed twice", id)
		}
		seen[id] = true
		g, _, err := s.gpu(id)
		if err != nil {
			return allocation{}, err
		}
		if a.uuid != "" && g.uuid != a.uuid {
			return allocation{}, fmt.Errorf("devices span GPUs %s and %s; a container's memory share must be on one GPU",
				a.uuid, g.uuid)
		}
		a.uuid = g.uuid
	}
	a.shares = len(ids)
	return a, nil
}

// response is the kubelet's instructions for one container.
func (a allocation) response(unitMiB int64, mps bool) *pluginapi.ContainerAllocateResponse {
	mib := int64(a.shares) * unitMiB
	envs := map[string]string{
		EnvVisibleDevices: a.uuid,
		EnvMemoryLimitMiB: strconv.FormatInt(mib, 10),
	}
	if mps {
		envs[EnvMPSMemoryLimit] = fmt.Sprintf("%s=%dM", a.uuid, mib)
	}
	return &pluginapi.ContainerAllocateResponse{Envs: envs}
}
