package mutate

import (
	"fmt"

	"github.com/gpuadmit/gpuadmit/pkg/mutate/decide"
)

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
