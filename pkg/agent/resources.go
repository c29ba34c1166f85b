package agent

import "github.com/gpuadmit/gpuadmit/pkg/allocator"

// Names the agent writes on its Node and serves to the kubelet. They are the
// ones pkg/inventory reads (resources_test.go checks that they agree); the
// accounting names come from pkg/allocator, which both sides import.
const (
	// AnnotationGPUs holds the node's GPUs as a JSON list of GPU.
	AnnotationGPUs = allocator.AnnotationGPUs
	// ResourceShare is the shared-memory resource the device plugin serves.
	ResourceShare = allocator.ResourceShare
	// ResourceMemoryMiB is the accounting resource: GPU memory in MiB, any form.
	ResourceMemoryMiB = allocator.ResourceMemoryMiB
	// AnnotationShare holds the share the device plugin serves, as JSON
	// allocator.ShareOffer.
	AnnotationShare = allocator.AnnotationShare
)

// ModelResource is the per-model accounting resource (allocator.AccountingResource).
func ModelResource(model string) string { return allocator.AccountingResource(model) }

// isAccountingResource reports whether name is a resource the agent owns on
// the node's status, so a model resource it no longer has can be removed.
func isAccountingResource(name string) bool { return allocator.IsAccountingResource(name) }

// Accounting is the node's accounting capacity: the memory of its healthy
// GPUs under ResourceMemoryMiB and under each model's resource. A failed
// GPU's memory leaves the capacity, since the kubelet recomputes allocatable
// from capacity and would undo a smaller allocatable. ResourceMemoryMiB is
// always present, zero when no GPU is healthy.
func Accounting(gpus []GPU) map[string]int64 {
	out := map[string]int64{ResourceMemoryMiB: 0}
	for _, g := range gpus {
		if !g.Healthy {
			continue
		}
		out[ResourceMemoryMiB] += g.MemoryMiB
		out[ModelResource(g.Model)] += g.MemoryMiB
	}
	return out
}

// DRAAccounting is the accounting capacity of a node in DRA mode: each
// model's resource as Accounting gives it, and ResourceMemoryMiB at
// allocator.QuotaOnlyMiB, which never refuses a pod (see there): pods with
// DRA alternatives are charged their largest alternative, and the devices
// their claims get are what the scheduler fits. Without a healthy GPU it is
// zero, as in Accounting: the node serves nothing.
func DRAAccounting(gpus []GPU) map[string]int64 {
	out := Accounting(gpus)
	if out[ResourceMemoryMiB] > 0 {
		out[ResourceMemoryMiB] = allocator.QuotaOnlyMiB
	}
	return out
}
