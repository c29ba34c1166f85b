package inventory

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// AnnotationGPUs is the node agent's per-GPU detail: what NVML reported on
// the node (real memory, MIG profiles and placements). It wins over GFD's
// labels and the catalog, which it was read to confirm.
const AnnotationGPUs = allocator.AnnotationGPUs

// agentGPUs reads the annotation; ok is false when it is absent or malformed.
func agentGPUs(n *corev1.Node) ([]allocator.NodeGPU, bool) {
	raw, ok := n.Annotations[AnnotationGPUs]
	if !ok {
		return nil, false
	}
	var gpus []allocator.NodeGPU
	if err := json.Unmarshal([]byte(raw), &gpus); err != nil || len(gpus) == 0 {
		return nil, false
	}
	return gpus, true
}

// agentMemory is one GPU's memory as the agent read it, 0 when unknown.
func agentMemory(n *corev1.Node) int64 {
	gpus, ok := agentGPUs(n)
	if !ok {
		return 0
	}
	return gpus[0].MemoryMiB
}

// agentProfile is a MIG profile as the agent read it from NVML.
func agentProfile(n *corev1.Node, name string) (allocator.Profile, bool) {
	gpus, _ := agentGPUs(n)
	for _, g := range gpus {
		for _, p := range g.Profiles {
			if p.Name == name {
				return p, true
			}
		}
	}
	return allocator.Profile{}, false
}
