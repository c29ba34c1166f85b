package intent

// Dialect names the form in which a container asked for GPU.
type Dialect string

// The request dialects gpuadmit reads: gpuadmit's own, NVIDIA's and those of
// other GPU-sharing tools.
const (
	// Native is gpuadmit's own form: limits gpuadmit.io/gpu and/or gpuadmit.io/gpu-memory.
	Native Dialect = "native"
	// NVIDIA is nvidia.com/gpu: N on its own (whole GPUs).
	NVIDIA Dialect = "nvidia"
	// NVIDIAShared is nvidia.com/gpu.shared: N, N replicas of time-sliced
	// GPUs; it sends the whole pod to time-sliced GPUs (Pod.Backend).
	NVIDIAShared Dialect = "nvidia-shared"
	// MIG is nvidia.com/mig-<profile>: N, already in its final form.
	MIG Dialect = "mig"
	// Share is gpuadmit.io/gpu-mem: N, a memory share in the cluster's unit (GiB), already final.
	Share Dialect = "share"
	// HAMi is nvidia.com/gpu with nvidia.com/gpumem, gpumem-percentage or gpucores.
	HAMi Dialect = "hami"
	// GPUShare is Alibaba's aliyun.com/gpu-mem: N (GiB).
	GPUShare Dialect = "gpushare"
	// KAI is the KAI scheduler's pod annotations gpu-fraction / gpu-memory.
	KAI Dialect = "kai"
	// Volcano is volcano.sh/vgpu-number, vgpu-memory, vgpu-memory-percentage and vgpu-cores.
	Volcano Dialect = "volcano"
	// VolcanoShare is Volcano's older GPU share plugin: volcano.sh/gpu-memory
	// (MiB of one GPU) or volcano.sh/gpu-number (whole GPUs).
	VolcanoShare Dialect = "volcano-share"
	// DeviceClass is deviceclass.resource.kubernetes.io/<class>: N for one of
	// gpuadmit's DeviceClasses: whole GPUs or MIG slices (the share class is denied).
	DeviceClass Dialect = "deviceclass"
)

// Form is what a request amounts to once its dialect is read away.
type Form string

// The forms a request takes.
const (
	// Whole asks for Count whole GPUs.
	Whole Form = "whole"
	// Memory asks for Count GPUs with at least MemoryMiB each.
	Memory Form = "memory"
	// Fraction asks for Count GPUs with FractionMilli thousandths of each.
	Fraction Form = "fraction"
	// Profile asks for Count MIG slices of the named profile.
	Profile Form = "profile"
)

// Kind says how Kubernetes counts a container's resources.
type Kind string

// The kinds of container.
const (
	// App is an entry of spec.containers.
	App Kind = "app"
	// Init is an entry of spec.initContainers that runs to completion first.
	Init Kind = "init"
	// Sidecar is an init container with restartPolicy Always, running beside the app.
	Sidecar Kind = "sidecar"
)

// Backend is the pod-level hint gpuadmit.io/backend.
type Backend string

// The backends gpuadmit.io/backend accepts, and BackendAny when it is unset.
const (
	// BackendAny leaves the backend to the policy.
	BackendAny Backend = ""
	// BackendMIG asks for a MIG slice.
	BackendMIG Backend = "mig"
	// BackendShared asks for a share of a GPU's memory.
	BackendShared Backend = "shared"
	// BackendWhole asks for whole GPUs.
	BackendWhole Backend = "whole"
	// BackendTimeSliced asks for replicas of GPUs NVIDIA's device plugin
	// time-slices: a whole-GPU request takes one replica per GPU; one sized
	// in memory or as a fraction takes one replica per GPU only where the
	// policy lets such requests onto replicas (memoryOnTimeSlicedGPUs: warn).
	BackendTimeSliced Backend = "time-sliced"
)

// Request is one container's GPU request, normalized from its dialect.
type Request struct {
	// Container is the container's name.
	Container string `json:"name"`
	// Kind is app, init or sidecar.
	Kind Kind `json:"kind"`
	// Index is the container's index in spec.containers or spec.initContainers.
	Index int `json:"index"`
	// Dialect is the form the author used.
	Dialect Dialect `json:"dialect"`
	// Form is what the request amounts to.
	Form Form `json:"form"`
	// Count is the number of GPUs (or MIG slices); at least 1.
	Count int64 `json:"count"`
	// MemoryMiB is the memory asked for on each GPU; 0 unless Form is Memory.
	MemoryMiB int64 `json:"memoryMiB"`
	// FractionMilli is the share of each GPU in thousandths (1..1000); 0 unless Form is Fraction.
	FractionMilli int64 `json:"fractionMilli"`
	// CoresPercent is the share of compute asked for (HAMi gpucores, Volcano vgpu-cores); 0 when unset.
	CoresPercent int64 `json:"coresPercent"`
	// Profile is the MIG profile ("1g.10gb", "1g.10gb+me") when Form is Profile.
	Profile string `json:"profile,omitempty"`
	// Source lists the fields the request was read from, as "key=value", for explanations.
	Source []string `json:"source"`
	// Warnings name keys read but dropped (HAMi's nvidia.com/priority); Read
	// moves them to Pod.Warnings.
	Warnings []string `json:"-"`
}

// Pod is a pod's GPU intent: its GPU containers and the pod-level hints.
type Pod struct {
	// Requests holds one entry per container that asks for GPU, in pod order:
	// init containers (and sidecars), then app containers.
	Requests []Request `json:"containers"`
	// Class is gpuadmit.io/class (label or annotation); empty when unset.
	Class string `json:"class"`
	// Backend is gpuadmit.io/backend; BackendAny when unset.
	Backend Backend `json:"backend"`
	// Model is gpuadmit.io/model, a catalog model name the pod insists on; empty when unset.
	Model string `json:"model"`
	// UseTypes are HAMi's nvidia.com/use-gputype: the pod may only use GPUs
	// whose model or product contains one of them, ignoring case; nil when unset.
	UseTypes []string `json:"useTypes"`
	// AvoidTypes are HAMi's nvidia.com/nouse-gputype: GPUs whose model or
	// product contains one of them are not for the pod; nil when unset.
	AvoidTypes []string `json:"avoidTypes"`
	// Warnings name, key by key, what the pod asks for that gpuadmit reads
	// but cannot honour (a GPU UUID pin, another scheduler's packing hint).
	Warnings []string `json:"warnings,omitempty"`
}

// AsksForGPU reports whether any container asks for GPU.
func (p Pod) AsksForGPU() bool { return len(p.Requests) > 0 }
