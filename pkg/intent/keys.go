package intent

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Resource names of the dialects: the forms in which a container asks for GPU.
const (
	// ResourceNativeGPU is gpuadmit's GPU count: an integer, or a fraction below 1 such as 500m.
	ResourceNativeGPU corev1.ResourceName = "gpuadmit.io/gpu"
	// ResourceNativeGPUMemory is gpuadmit's memory per GPU, a byte quantity such as 10Gi.
	ResourceNativeGPUMemory corev1.ResourceName = "gpuadmit.io/gpu-memory"
	// ResourceShareMemory is a share of one GPU's memory in GiB, the form the mutator writes.
	ResourceShareMemory corev1.ResourceName = "gpuadmit.io/gpu-mem"
	// ResourceNVIDIAGPU is the NVIDIA device plugin's whole-GPU count (also HAMi's count).
	ResourceNVIDIAGPU corev1.ResourceName = "nvidia.com/gpu"
	// ResourceNVIDIAReplica is the NVIDIA device plugin's count of
	// time-sliced replicas where it renames time-sliced GPUs (renameByDefault: true).
	ResourceNVIDIAReplica corev1.ResourceName = "nvidia.com/gpu.shared"
	// ResourceMIGPrefix starts every MIG resource: nvidia.com/mig-<profile>.
	ResourceMIGPrefix = "nvidia.com/mig-"
	// ResourceHAMiMemory is HAMi's memory per GPU in MiB.
	ResourceHAMiMemory corev1.ResourceName = "nvidia.com/gpumem"
	// ResourceHAMiMemoryPercentage is HAMi's share of each GPU's memory in percent.
	ResourceHAMiMemoryPercentage corev1.ResourceName = "nvidia.com/gpumem-percentage"
	// ResourceHAMiCores is HAMi's share of each GPU's compute in percent.
	ResourceHAMiCores corev1.ResourceName = "nvidia.com/gpucores"
	// ResourceHAMiPriority is HAMi's task priority, 0 (high) or 1 (low); read and dropped.
	ResourceHAMiPriority corev1.ResourceName = "nvidia.com/priority"
	// ResourceGPUShareMemory is Alibaba gpushare's memory in GiB.
	ResourceGPUShareMemory corev1.ResourceName = "aliyun.com/gpu-mem"
	// ResourceVolcanoNumber is Volcano's vGPU count.
	ResourceVolcanoNumber corev1.ResourceName = "volcano.sh/vgpu-number"
	// ResourceVolcanoMemory is Volcano's memory per vGPU in MiB.
	ResourceVolcanoMemory corev1.ResourceName = "volcano.sh/vgpu-memory"
	// ResourceVolcanoCores is Volcano's share of each GPU's compute in percent.
	ResourceVolcanoCores corev1.ResourceName = "volcano.sh/vgpu-cores"
	// ResourceVolcanoMemoryPercentage is Volcano's share of each vGPU's memory in percent.
	ResourceVolcanoMemoryPercentage corev1.ResourceName = "volcano.sh/vgpu-memory-percentage"
	// ResourceVolcanoShareMemory is the older Volcano GPU share: MiB of one GPU's memory.
	ResourceVolcanoShareMemory corev1.ResourceName = "volcano.sh/gpu-memory"
	// ResourceVolcanoShareNumber is the older Volcano plugin's count of whole GPUs.
	ResourceVolcanoShareNumber corev1.ResourceName = "volcano.sh/gpu-number"
)

// Pod annotations and labels gpuadmit reads.
const (
	// AnnotationClass is the workload class hint; it may also be a label.
	AnnotationClass = "gpuadmit.io/class"
	// LabelClass is the label spelling of AnnotationClass.
	LabelClass = AnnotationClass
	// AnnotationBackend is the backend hint: mig, shared, whole or time-sliced.
	AnnotationBackend = "gpuadmit.io/backend"
	// AnnotationModel names the catalog GPU model the pod insists on.
	AnnotationModel = "gpuadmit.io/model"
	// AnnotationKAIFraction is KAI's share of a GPU, a decimal above 0 and at most 1.
	AnnotationKAIFraction = "gpu-fraction"
	// AnnotationKAIMemory is KAI's memory per GPU in MiB.
	AnnotationKAIMemory = "gpu-memory"
	// AnnotationKAINumDevices is KAI's number of GPUs for a fraction or memory request.
	AnnotationKAINumDevices = "gpu-fraction-num-devices"
	// AnnotationKAIContainerName names the container KAI gives the GPU to.
	AnnotationKAIContainerName = "gpu-fraction-container-name"
)

// Limits on what a single request may ask for.
const (
	// MaxCount is the most GPUs (or MIG slices) one container may ask for.
	MaxCount = 256
	// MaxMemoryMiB is the most memory one container may ask for on each GPU (1 TiB).
	MaxMemoryMiB = 1 << 20
	// MaxPercent is the top of every percentage (memory share, compute share).
	MaxPercent = 100
)

// dialectKeys maps each fixed resource name to its dialect; nvidia.com/gpu
// becomes HAMi when a HAMi key is beside it, and MIG keys go by prefix.
var dialectKeys = map[corev1.ResourceName]Dialect{
	ResourceNativeGPU:               Native,
	ResourceNativeGPUMemory:         Native,
	ResourceShareMemory:             Share,
	ResourceNVIDIAGPU:               NVIDIA,
	ResourceNVIDIAReplica:           NVIDIAShared,
	ResourceHAMiMemory:              HAMi,
	ResourceHAMiMemoryPercentage:    HAMi,
	ResourceHAMiCores:               HAMi,
	ResourceHAMiPriority:            HAMi,
	ResourceGPUShareMemory:          GPUShare,
	ResourceVolcanoNumber:           Volcano,
	ResourceVolcanoMemory:           Volcano,
	ResourceVolcanoCores:            Volcano,
	ResourceVolcanoMemoryPercentage: Volcano,
	ResourceVolcanoShareMemory:      VolcanoShare,
	ResourceVolcanoShareNumber:      VolcanoShare,
}

// Resources lists every fixed GPU resource name of every dialect, sorted;
// MIG resources, named by profile, are every name that starts with ResourceMIGPrefix.
func Resources() []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(dialectKeys))
	for k := range dialectKeys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// IsGPUResource reports whether name is a GPU resource of any dialect,
// including every nvidia.com/mig-* name, valid profile or not, and the
// implicit extended resource of every gpuadmit DeviceClass (IsDeviceClassResource).
func IsGPUResource(name corev1.ResourceName) bool {
	return dialectOf(name) != ""
}

// dialectOf returns the dialect name belongs to, or "" for a non-GPU resource.
func dialectOf(name corev1.ResourceName) Dialect {
	if strings.HasPrefix(string(name), ResourceMIGPrefix) {
		return MIG
	}
	if IsDeviceClassResource(name) {
		return DeviceClass
	}
	return dialectKeys[name]
}
