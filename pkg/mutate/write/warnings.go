package write

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
)

// timeSlicedWarnings says, for each container given time-sliced replicas,
// that neither memory nor compute is its own: the GPU's other replicas go
// to other pods, and one of them can take the memory this one counted on.
func timeSlicedWarnings(ch *decide.Choice) []string {
	if ch.Pool.Mode != inventory.TimeSliced {
		return nil
	}
	var out []string
	for _, a := range ch.Assigns {
		asked := ""
		if a.Req.Form == intent.Memory {
			asked = fmt.Sprintf(" (it asked for %d MiB)", a.Req.MemoryMiB)
		}
		out = append(out, fmt.Sprintf("container %q gets %d time-sliced replica(s) of a %s on pool %s%s: GPU memory and compute "+
			"are shared with the pods on the GPU's other replicas and not isolated, so its memory is not guaranteed; "+
			"ask for a MIG slice, a memory share or a whole GPU where it must be",
			a.Req.Container, a.Quantity, ch.Pool.Model, ch.Pool.Name, asked))
	}
	return out
}

// severalSlicesWarnings warns for each container given more than one MIG
// slice: a CUDA process sees one MIG device, so the container must run a
// process per slice to use them all (tensor-parallel jobs that expect one
// process to see every GPU do not).
func severalSlicesWarnings(ch *decide.Choice) []string {
	var out []string
	for _, a := range ch.Assigns {
		if a.Profile == "" || a.Quantity < 2 {
			continue
		}
		out = append(out, fmt.Sprintf("container %q gets %d MIG %s slices; a CUDA process sees one MIG device, "+
			"so each slice needs its own process (one CUDA_VISIBLE_DEVICES each); ask for whole GPUs where one process must see them all",
			a.Req.Container, a.Quantity, a.Profile))
	}
	return out
}
