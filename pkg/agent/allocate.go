package agent

import (
	"fmt"
	"path/filepath"
	"strconv"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
)

// Environment variables Allocate sets in a container.
const (
	// EnvVisibleDevices is what the NVIDIA container runtime in legacy mode
	// reads to expose GPUs. Allocate sets it to VisibleNone: the GPU comes
	// as a CDI device.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// EnvMemoryLimitMiB tells the workload (and any in-container enforcer)
	// how much of the GPU's memory it was given.
	EnvMemoryLimitMiB = "GPUADMIT_MEMORY_LIMIT_MIB"
	// EnvMPSPipeDirectory is where an MPS client finds the control daemon's pipes.
	EnvMPSPipeDirectory = "CUDA_MPS_PIPE_DIRECTORY"
)

// VisibleNone is NVIDIA_VISIBLE_DEVICES for "no device": a legacy NVIDIA
// runtime (or its hook) adds nothing to a container that has it.
const VisibleNone = "void"

// CDIDevice is the fully qualified CDI device of a GPU in the node's spec
// (see writeSpec): "gpuadmit.io/gpu=<uuid>".
func CDIDevice(uuid string) string { return cdi.Kind + "=" + uuid }

// Where an MPS client container sees the control daemon's directories, as
// NVIDIA's device plugin mounts them: the pipes under /mps, and the daemon's
// shared memory as the container's /dev/shm.
const (
	MPSContainerPipeDir = "/mps/pipe"
	MPSContainerShmDir  = "/dev/shm"
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

// response is the kubelet's instructions for one container. With an MPS
// root (the host directory of the node's MPS control daemon, empty for none)
// the container is made an MPS client held to its memory.
//
// The GPU is the CDI device of its UUID in the node's spec, which the
// kubelet hands to the runtime in the CRI's CDIDevices (NVIDIA's device
// plugin calls this its cdi-cri strategy): containerd applies its device
// nodes, libraries and hooks, with no NVIDIA runtime needed. Unlike that
// plugin, which leaves the environment alone then, the container also gets
// NVIDIA_VISIBLE_DEVICES=void: CUDA images set it to "all", and on a node
// whose runtime ignores CDI devices but runs NVIDIA's legacy hook, "all"
// would hand the container every GPU; void hands it none (the spec sets
// void too, for a runtime that applies both).
func (a allocation) response(unitMiB int64, mpsRoot string) *pluginapi.ContainerAllocateResponse {
	mib := int64(a.shares) * unitMiB
	r := &pluginapi.ContainerAllocateResponse{
		Envs: map[string]string{
			EnvVisibleDevices: VisibleNone,
			EnvMemoryLimitMiB: strconv.FormatInt(mib, 10),
		},
		CdiDevices: []*pluginapi.CDIDevice{{Name: CDIDevice(a.uuid)}},
	}
	if mpsRoot != "" {
		mpsClient(r, mpsRoot)
	}
	return r
}

// mpsClient points a container at the MPS control daemon whose directories
// are under root on the host. Its memory limit is not the container's to
// set: the daemon holds every client of the GPU to one share (RunMPS), and
// a variable in the container could only lower that.
func mpsClient(r *pluginapi.ContainerAllocateResponse, root string) {
	r.Envs[EnvMPSPipeDirectory] = MPSContainerPipeDir
	r.Mounts = append(r.Mounts,
		&pluginapi.Mount{ContainerPath: MPSContainerPipeDir, HostPath: MPSPipeDir(root)},
		&pluginapi.Mount{ContainerPath: MPSContainerShmDir, HostPath: MPSShmDir(root)},
	)
}

// MPSPipeDir is the control daemon's pipe directory under an MPS root.
func MPSPipeDir(root string) string { return filepath.Join(root, "pipe") }

// MPSShmDir is the daemon's shared memory (a tmpfs) under an MPS root.
func MPSShmDir(root string) string { return filepath.Join(root, "shm") }
