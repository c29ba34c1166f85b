package agent

import (
	"slices"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// MIG modes of a GPU, as the annotation writes them.
const (
	MIGEnabled     = allocator.MIGEnabled
	MIGDisabled    = allocator.MIGDisabled
	MIGUnsupported = allocator.MIGUnsupported
)

// GPU is what the agent knows of one GPU, the element of the node annotation
// gpuadmit.io/gpus; the inventory reads the same type.
type GPU = allocator.NodeGPU

// Instance is a MIG GPU instance that exists on a GPU.
type Instance = allocator.MIGInstance

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
