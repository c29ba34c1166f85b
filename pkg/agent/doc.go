// Package agent is gpuadmit's node agent: it discovers a node's GPUs with
// NVML, publishes them on the Node (an annotation with per-GPU detail and the
// accounting capacity that ResourceQuota counts GPU memory against), and serves a kubelet device
// plugin that hands out GPU memory in shares of gpuadmit.io/gpu-mem. It
// serves only on nodes an operator marked for device-plugin mode
// (allocator.LabelNodeMode, which its DaemonSet selects).
//
// # Discovery
//
// Discover reads every GPU's UUID, product, memory, MIG mode, GPU instances
// and MIG profiles from NVML: each profile's memory, SMs, instance count and
// possible placements come from GetGpuInstanceProfileInfo and
// GetGpuInstancePossiblePlacements, never from the catalog, which only
// names the model. NVML is reached through small interfaces that both
// go-nvml's library and its mock satisfy; every nvml.Return becomes a Go
// error at that boundary (nvmlError).
//
// A GPU that does not answer (no handle, or its UUID, name, memory or MIG
// state cannot be read) is kept, unhealthy, with what was read and the
// reason in GPU.Error; the other GPUs keep serving. Only a failed device
// count fails discovery. Such a GPU still offers its SharesPerGPU devices —
// the count does not depend on memory — but reports them Unhealthy, as after
// a critical XID, so the kubelet counts them in capacity and never allocates
// them; its unknown memory does not set the share size. A GPU whose UUID is
// unknown offers none, since its devices could not be named. Every resync
// rediscovers, so a GPU that answers again serves again.
//
// # The device plugin
//
// Every GPU without MIG offers exactly SharesPerGPU devices (4 by default),
// with IDs "<gpu-uuid>::<n>" that name their GPU, and every device is the
// same share of memory: the smallest such GPU's memory divided by
// SharesPerGPU, rounded down. The agent publishes that share on its Node
// (allocator.AnnotationShare, an allocator.ShareOffer) beside the GPUs.
//
// One share size per node is what makes the stock scheduler safe here. It
// sees only the node's total of gpuadmit.io/gpu-mem, never which GPU a free
// device is on. But every container takes exactly one device (the request the
// webhook is to write for a pool that serves shares), and one device is one
// whole share that every GPU holds, so whenever the node has a free device,
// some GPU has a free share: a node the scheduler finds room on has room on
// one GPU. Shares of different sizes
// (units of a fixed MiB, several per pod) would break that: the node's free
// units could be scattered over GPUs none of which has enough.
//
// Allocate gives a container len(IDs) shares of the one GPU its IDs name —
// no pod lookup, no lock, no state — and refuses IDs that span GPUs.
//
// # CDI
//
// The container gets its GPU as a CDI device, never by an environment
// variable alone. At start and on every rediscovery the agent writes one
// node-wide spec, <cdi dir>/gpuadmit.io-gpu.json, made by package cdi with
// NVIDIA's nvcdi from the driver root (--driver-root, --dev-root,
// --nvidia-cdi-hook-path): a device per GPU without MIG, named by its
// UUID, with that GPU's /dev/nvidiaN and hooks, and as the spec's own edits
// the control nodes, driver libraries, their hooks and
// NVIDIA_VISIBLE_DEVICES=void. Allocate answers ContainerAllocateResponse.
// CdiDevices ["gpuadmit.io/gpu=<uuid>"], which the kubelet passes on in the
// CRI (NVIDIA's device plugin calls this the cdi-cri strategy), so a plain
// containerd 2.x with runc gives the container its GPU; and it sets
// NVIDIA_VISIBLE_DEVICES=void and GPUADMIT_MEMORY_LIMIT_MIB. Void, unlike
// NVIDIA's plugin, which sets no environment then: CUDA images carry
// NVIDIA_VISIBLE_DEVICES=all, which NVIDIA's legacy runtime would honour on
// a node whose runtime ignored the CDI device. A GPU whose edits cannot be
// made is left out of the spec, so a container given it fails to start.
// GetPreferredAllocation keeps a container on one GPU, best fit
// (allocator.BestFit), among the devices the kubelet offers. The kubelet's
// available devices are the truth about what is free: it leaves out those of
// running containers, frees a pod's devices when it ends, and keeps that
// record in its checkpoint across plugin restarts; so the plugin keeps none
// of its own. GetPreferredAllocation never returns an error, since the
// kubelet fails the pod's admission on one; where nothing fits on one GPU it
// answers the kubelet's own order, and Allocate refuses what spans GPUs.
//
// # MPS
//
// Nothing in a container holds it to its share unless the node runs CUDA's
// Multi-Process Service. With MPS (--mps, and deploy/agent/mps on the node)
// the agent's image runs a second time, as the node's MPS control daemon
// (--mode=mps-control, RunMPS): it starts nvidia-cuda-mps-control and sets,
// as NVIDIA's device plugin does, each GPU's default pinned device memory
// limit on the daemon to one share (set_default_device_pinned_mem_limit
// <GPU UUID> <MiB>M, read back to check), then records the limits in
// <mps root>/limits.json. Allocate makes each container an MPS client (its GPU
// is its CDI device): it mounts the daemon's pipe directory (CUDA_MPS_PIPE_DIRECTORY) and its
// shared memory (/dev/shm) from the MPS root on the host. The limit is the
// daemon's, out of the container's reach: a container that sets
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT itself can only lower it. It holds each
// client process, not each container, to one share: a container that runs
// two CUDA processes may use two shares' worth. Since the daemon's limit is
// one share, Allocate refuses a container of several shares under MPS, and
// one on a GPU whose limit limits.json does not show at the plugin's share
// size (the daemon is not running, or was started with another
// --shares-per-gpu): the kubelet then fails that pod rather than run it
// unlimited. So that the kubelet sends no pod there in the first place, a
// GPU's devices go to it unhealthy until limits.json holds that GPU at the
// share size; the agent reads the file with every discovery, at start and
// every resync.
//
// The plugin re-registers when the kubelet restarts (its socket is created
// again), and reports a GPU's devices unhealthy after a critical XID or when
// the GPU is lost, healthy again when it answers and stays quiet.
package agent
