package usage

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// Form is the form in which a pod holds GPU memory.
type Form string

// The forms of allocated GPU memory.
const (
	FormMIG   Form = "mig"         // a MIG slice (mixed or single strategy)
	FormShare Form = "share"       // a memory share of one GPU (device plugin or DRA)
	FormWhole Form = "whole"       // whole GPUs
	FormTime  Form = "time-sliced" // a time-slicing replica: no memory of its own
)

// Input is what Compute reads: one snapshot of the leader's caches.
type Input struct {
	// Inventory is the cluster's GPU pools.
	Inventory *inventory.Inventory
	// Nodes are the Node objects the inventory was built from; only their
	// name and allocatable CPU and memory are read.
	Nodes []corev1.Node
	// Pods are gpuadmit's pods (label gpuadmit.io/managed): the only pods
	// the leader caches, so the CPU and memory other pods hold on a GPU
	// node is not subtracted from its free CPU and memory (see doc.go).
	Pods []*corev1.Pod
	// Others are bound pods that are not gpuadmit's: only their CPU and
	// memory requests count, taken from their node's free CPU and memory.
	// The leader does not cache them (150,000 pods would not fit its
	// memory) and leaves this empty, so there stranded is a lower bound;
	// gpuadmit report offline and the replay benchmark fill it.
	Others []*corev1.Pod
	// Quotas are the gpuadmit ResourceQuotas of the namespaces.
	Quotas []corev1.ResourceQuota
	// GPUs are, by node, the GPUs whose allocation is known one by one (the
	// DRA nodes: each claim names its device); nil for a node means only
	// its node-wide resources are known.
	GPUs map[string][]GPU
	// ClaimDevices are the devices each ResourceClaim takes, by
	// "namespace/name" (ClaimDevices of the cluster's claims). A container
	// that holds GPU only through claims takes their devices; through a
	// claim not listed here, one.
	ClaimDevices map[string]int64
	// PodClaims are, by pod ("namespace/name"), where its claims were
	// allocated and the GPU memory they hold (PodClaims of the cluster's
	// slices and claims). A pod on no node yet whose claims are allocated
	// holds its devices there: it counts as held on that node's pool, not
	// as waiting (a pod with DRA alternatives would wait on no pool). A
	// pod's claims hold what they were allocated, which for a pod with
	// alternatives is less than the largest alternative it is charged.
	PodClaims map[string]PodClaim
	// Config is the policy set's data.gpuadmit.usage.
	Config Config
}

// GPU is one GPU (or MIG device) whose allocation is known: its UUID as
// NVML and DCGM's exporter name it, its memory, and what claims hold of it.
type GPU struct {
	UUID         string
	CapacityMiB  int64
	AllocatedMiB int64
}

// Report is where the GPUs go.
type Report struct {
	// Pools are the pools of the inventory, sorted by name, then one
	// pseudo-pool NoPool for pending pods no pool was chosen for yet.
	Pools []Pool
	// Quotas are the namespaces' gpuadmit quotas on GPU memory.
	Quotas []Quota
	// GPUs are the GPUs whose allocation is known, by node.
	GPUs []GPUAllocation
	// Prices are the price per GPU-hour by model (Config.PricePerGPUHour).
	Prices map[string]float64
}

// NoPool names the pending pods whose pool is not chosen at admission (on
// DRA pools the scheduler chooses it).
const NoPool = "none"

// Pool is one pool's GPU memory: what it has, who holds it, what is free,
// what of the free is stranded, and who waits.
type Pool struct {
	Name  string
	Model string
	Mode  inventory.Mode
	// GPUs counts the pool's physical GPUs; GPUMemoryMiB is one GPU's memory.
	GPUs         int64
	GPUMemoryMiB int64
	// CapacityMiB is the GPU memory the pool's nodes hand out (their
	// accounting capacity); FreeMiB the part no bound pod holds.
	CapacityMiB int64
	FreeMiB     int64
	// StrandedMiB is the free memory no pending pod and no typical size can
	// use (doc.go defines it).
	StrandedMiB int64
	// FragmentationMiB is the placement score's fragmentation measure
	// summed over the nodes, in MiB (doc.go).
	FragmentationMiB float64
	// Allocated is the memory bound pods hold, by namespace and form.
	Allocated map[Holder]int64
	// Pending is the pods waiting for a node, by namespace and reason.
	Pending map[Waiter]Waiting
}

// Holder is who holds memory and in which form.
type Holder struct {
	Namespace string
	Form      Form
}

// Waiter is who waits and why.
type Waiter struct {
	Namespace string
	Reason    Reason
}

// Waiting counts pending pods and the GPU memory they ask.
type Waiting struct {
	Pods int64
	MiB  int64
}

// Quota is one namespace's gpuadmit quota on GPU memory in every form.
type Quota struct {
	Namespace string
	HardMiB   int64
	UsedMiB   int64
}

// GPUAllocation is what is allocated of one GPU whose allocation is known.
type GPUAllocation struct {
	GPU
	Node  string
	Pool  string
	Model string
}
