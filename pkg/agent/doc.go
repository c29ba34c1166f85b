// Package agent is gpuadmit's node agent: it discovers a node's GPUs with
// NVML, publishes them on the Node (an annotation with per-GPU detail and the
// accounting capacity of DESIGN.md, "Quotas"), and serves a kubelet device
// plugin that hands out GPU memory in units of gpuadmit.io/gpu-mem.
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
// # The device plugin
//
// Every GPU without MIG offers one device per memory unit (1024 MiB by
// default), with IDs "<gpu-uuid>::<n>" that name their GPU. Allocate reads
// the GPU from the IDs alone — no pod lookup, no lock — and refuses a
// container whose devices span GPUs. GetPreferredAllocation keeps each
// container on one GPU, best fit (allocator.BestFit), among the devices the
// kubelet offers: the kubelet's available devices are the truth about what
// is free (it leaves out those of running containers, and keeps that record
// in its checkpoint across plugin restarts), so the plugin keeps none of its
// own. GetPreferredAllocation never fails, since an error there fails the
// pod's admission; where nothing fits on one GPU it answers the kubelet's own
// order and Allocate refuses what spans GPUs. The plugin re-registers when the kubelet
// restarts (its socket is created again), and reports a GPU's devices
// unhealthy after a critical XID or when the GPU is lost, healthy again when
// it answers and stays quiet.
package agent
