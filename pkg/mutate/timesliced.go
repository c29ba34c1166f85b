package mutate

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// fitReplicas sizes a request on a time-sliced pool: one replica per GPU
// asked. A replica sees its whole GPU's memory and compute, shared with the
// GPU's other replicas, so a memory request fits when the GPU is that big
// and a fraction fits any replica; nothing makes it the container's alone.
// A replica accounts for its GPU's memory over the replicas.
func fitReplicas(r intent.Request, pool *inventory.Pool) (assignment, error) {
	switch r.Form {
	case intent.Profile:
		return assignment{}, fmt.Errorf("%s is a MIG slice, not a time-sliced replica", r)
	case intent.Memory:
		if pool.GPUMemoryMiB < r.MemoryMiB {
			return assignment{}, fmt.Errorf("its GPUs have %d MiB, less than the %d MiB asked", pool.GPUMemoryMiB, r.MemoryMiB)
		}
	}
	if most := pool.GPUsPerNode * pool.ReplicasPerGPU; most > 0 && r.Count > most {
		return assignment{}, fmt.Errorf("%d replicas in one container, but its nodes have at most %d", r.Count, most)
	}
	per := pool.GPUMemoryMiB / max(pool.ReplicasPerGPU, 1)
	why := fmt.Sprintf("%d time-sliced replica(s), each of a %d MiB GPU cut %d ways in time", r.Count, pool.GPUMemoryMiB, pool.ReplicasPerGPU)
	return assignment{resource: pool.Resource, quantity: r.Count, givenMiB: per * r.Count, why: why}, nil
}

// timeSlicedWarnings says, for each container given time-sliced replicas,
// that neither memory nor compute is its own: the GPU's other replicas go
// to other pods, and one of them can take the memory this one counted on.
func timeSlicedWarnings(ch *choice) []string {
	if ch.pool.Mode != inventory.TimeSliced {
		return nil
	}
	var out []string
	for _, a := range ch.assigns {
		asked := ""
		if a.req.Form == intent.Memory {
			asked = fmt.Sprintf(" (it asked for %d MiB)", a.req.MemoryMiB)
		}
		out = append(out, fmt.Sprintf("container %q gets %d time-sliced replica(s) of a %s on pool %s%s: GPU memory and compute "+
			"are shared with the pods on the GPU's other replicas and not isolated, so its memory is not guaranteed; "+
			"ask for a MIG slice, a memory share or a whole GPU where it must be",
			a.req.Container, a.quantity, ch.pool.Model, ch.pool.Name, asked))
	}
	return out
}
