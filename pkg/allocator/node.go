package allocator

import "strings"

// What a GPU node publishes about itself. The node agent writes it, the
// inventory reads it; both import this package, so there is one type and one
// name for each part of that contract.
const (
	// AnnotationGPUs is the Node annotation holding the node's GPUs as a JSON
	// list of NodeGPU: what NVML reported on the node (real memory, MIG
	// profiles and placements, health).
	AnnotationGPUs = "gpuadmit.io/gpus"
	// AnnotationShare is the Node annotation holding the memory share the
	// node's device plugin serves, as JSON ShareOffer; absent where no
	// gpuadmit device plugin runs.
	AnnotationShare = "gpuadmit.io/share"

	// LabelNodeMode is the Node label by which an operator puts a GPU node in
	// one of the node side's two modes (NodeModeDevicePlugin, NodeModeDRA);
	// the agent's DaemonSets select on it, so a node without it gets neither.
	LabelNodeMode = "gpuadmit.io/node-mode"
	// NodeModeDevicePlugin: the agent serves ResourceShare as a device plugin.
	NodeModeDevicePlugin = "device-plugin"
	// NodeModeDRA: the agent is a DRA driver publishing ResourceSlices.
	NodeModeDRA = "dra"

	// ResourceGPU is a whole GPU (or, under MIG's single strategy, one slice),
	// as NVIDIA's device plugin serves it.
	ResourceGPU = "nvidia.com/gpu"
	// ResourceShare is gpuadmit's device-plugin resource: units of one GPU's memory.
	ResourceShare = "gpuadmit.io/gpu-mem"
	// ResourceGPUShare is gpushare's compatible share resource (GiB units).
	ResourceGPUShare = "aliyun.com/gpu-mem"
	// DefaultShareUnitMiB is the memory behind one unit of a share resource
	// when the node does not say otherwise.
	DefaultShareUnitMiB = 1024
)

// gpuadmit's DRA driver: the driver of its ResourceSlices and the domain of
// its device attributes, which the inventory reads to know DRA nodes.
const (
	// DRADriver is the driver name.
	DRADriver = "gpu.gpuadmit.io"
	// DRAClassGPU is the DeviceClass of a whole GPU (extendedResourceName
	// nvidia.com/gpu); DRAClassShare that of a share of one GPU's memory.
	DRAClassGPU   = "gpu.gpuadmit.io"
	DRAClassShare = "gpu-share.gpuadmit.io"
	// DRAClassSuffix ends the name of every DeviceClass of gpuadmit's (the
	// MIG classes too: "mig-1g.10gb.gpuadmit.io"), the names its claims
	// policy guards.
	DRAClassSuffix = ".gpuadmit.io"
	// DRAAttrType is "gpu" for a GPU without MIG, "mig" for a MIG instance.
	DRAAttrType = "type"
	// DRAAttrModel is the catalog model ("H100-80GB").
	DRAAttrModel = "model"
	// DRAAttrProfile is a MIG instance's profile ("3g.40gb").
	DRAAttrProfile = "profile"
	// DRAAttrUUID is NVML's UUID of the device: the GPU's, or the MIG
	// device's when known; DRAAttrParentUUID that of a MIG instance's GPU.
	// The usage metrics name GPUs by them, as DCGM's exporter does.
	DRAAttrUUID       = "uuid"
	DRAAttrParentUUID = "parentUUID"
	// DRACapacityMemory is a device's memory in bytes.
	DRACapacityMemory = "memory"
	// DRATypeGPU and DRATypeMIG are the values of DRAAttrType.
	DRATypeGPU = "gpu"
	DRATypeMIG = "mig"
)

// DRAMIGClass is the DeviceClass of a MIG profile: "mig-1g.10gb.me.gpuadmit.io"
// for "1g.10gb+me" ("+" is not allowed in a name). The driver's classes
// (pkg/agent/dra) and the webhook's claims (pkg/claim) name them by it.
func DRAMIGClass(profile string) string {
	return "mig-" + strings.ReplaceAll(profile, "+", ".") + DRAClassSuffix
}

// MIG modes of a GPU, as NodeGPU writes them.
const (
	MIGEnabled     = "Enabled"
	MIGDisabled    = "Disabled"
	MIGUnsupported = "Unsupported"
)

// NodeGPU is what a node knows of one of its GPUs: what NVML reports, and
// whether it is healthy. It is the element of AnnotationGPUs.
type NodeGPU struct {
	// Index is NVML's index of the GPU on the node.
	Index int `json:"index"`
	// UUID is NVML's GPU UUID ("GPU-5e1a…"), what NVIDIA_VISIBLE_DEVICES names.
	UUID string `json:"uuid"`
	// Product is the name NVML reports ("NVIDIA H100 80GB HBM3").
	Product string `json:"product"`
	// Model is the catalog's name for Product ("H100-80GB"), or, when the
	// catalog does not know it, Product written as GPU Feature Discovery
	// writes it ("NVIDIA-RTX-A6000"), as the inventory names such pools.
	Model string `json:"model"`
	// Known reports whether the catalog knows Product.
	Known bool `json:"known"`
	// MemoryMiB is the GPU's total memory as NVML reports it.
	MemoryMiB int64 `json:"memoryMiB"`
	// MIGMode is the current MIG mode: Enabled, Disabled or Unsupported.
	MIGMode string `json:"migMode"`
	// MIGPending is the MIG mode after the next GPU reset, when it differs.
	MIGPending string `json:"migPending,omitempty"`
	// Profiles are the MIG profiles NVML reports for this GPU, real MiB and
	// placements, sorted as the catalog sorts them; empty without MIG.
	Profiles []Profile `json:"profiles,omitempty"`
	// Instances are the GPU instances that exist now (MIG mode on).
	Instances []MIGInstance `json:"instances,omitempty"`
	// Healthy is false after a critical XID, when the GPU is lost, or when
	// discovery could not read it (Error then says why).
	Healthy bool `json:"healthy"`
	// Error is why discovery could not read the GPU; empty when it could.
	Error string `json:"error,omitempty"`
}

// MIGInstance is a MIG GPU instance that exists on a GPU.
type MIGInstance struct {
	// ID is NVML's GPU instance id on its GPU.
	ID int `json:"id"`
	// Profile is the instance's profile name ("3g.40gb").
	Profile string `json:"profile"`
	// Placement is where the instance sits, in memory slices.
	Placement Placement `json:"placement"`
	// MemoryMiB is the profile's memory.
	MemoryMiB int64 `json:"memoryMiB"`
}

// Shares reports whether the GPU can serve memory shares: MIG partitions a
// GPU's memory in hardware, so a GPU with MIG on is left to MIG.
func (g NodeGPU) Shares() bool {
	return g.MIGMode != MIGEnabled
}

// ShareOffer is the memory share a node's device plugin serves
// (AnnotationShare). Every GPU is cut into SharesPerGPU devices of UnitMiB
// each, and a container takes exactly one: one share size per pool, so the
// free devices on a node are always whole shares on some GPU and a node the
// stock scheduler finds room on (it sees only node totals) has room on one GPU.
type ShareOffer struct {
	// Resource is the extended resource the plugin serves.
	Resource string `json:"resource"`
	// UnitMiB is the GPU memory behind one device: one share.
	UnitMiB int64 `json:"unitMiB"`
	// SharesPerGPU is how many devices each GPU offers.
	SharesPerGPU int64 `json:"sharesPerGPU"`
}
