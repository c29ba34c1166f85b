package agent

import (
	"slices"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// MIG modes of a GPU, as the annotation writes them.
const (
	MIGEnabled     = "Enabled"
	MIGDisabled    = "Disabled"
	MIGUnsupported = "Unsupported"
)

// GPU is what the agent knows of one GPU: what NVML reports, and whether it
// is healthy. It is the element of the node annotation gpuadmit.io/gpus.
type GPU struct {
	// Index is NVML's index of the GPU on the node.
	Index int `json:"index"`
	// UUID is NVML's GPU UUID ("GPU-5e1a…"), what NVIDIA_VISIBLE_DEVICES names.
	UUID string `json:"uuid"`
	// Product is the name NVML reports ("NVIDIA H100 80GB HBM3").
	Product string `json:"product"`
	// Model is the catalog's name for Product ("H100-80GB"), or, when the
	// catalog does not know it, Product written as GPU Feature Discovery
	// writes it ("NVIDIA-RTX-A6000"), as pkg/inventory names such pools.
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
	Profiles []allocator.Profile `json:"profiles,omitempty"`
	// Instances are the GPU instances that exist now (MIG mode on).
	Instances []Instance `json:"instances,omitempty"`
	// Healthy is false after a critical XID or when the GPU is lost.
	Healthy bool `json:"healthy"`
}

// Instance is a MIG GPU instance that exists on a GPU.
type Instance struct {
	// ID is NVML's GPU instance id on its GPU.
	ID int `json:"id"`
	// Profile is the instance's profile name ("3g.40gb").
	Profile string `json:"profile"`
	// Placement is where the instance sits, in memory slices.
	Placement allocator.Placement `json:"placement"`
	// MemoryMiB is the profile's memory.
	MemoryMiB int64 `json:"memoryMiB"`
}

// Shares reports whether the GPU serves memory shares: MIG partitions a
// GPU's memory in hardware, so a GPU with MIG on is left to MIG.
func (g GPU) Shares() bool {
	return g.MIGMode != MIGEnabled
}

// cloneGPUs returns a deep copy, so a snapshot handed to the plugin or the
// publisher never changes under them.
func cloneGPUs(gpus []GPU) []GPU {
	out := slices.Clone(gpus)
	for i := range out {
		out[i].Profiles = slices.Clone(out[i].Profiles)
		for j := range out[i].Profiles {
			out[i].Profiles[j].Placements = slices.Clone(out[i].Profiles[j].Placements)
		}
		out[i].Instances = slices.Clone(out[i].Instances)
	}
	return out
}
