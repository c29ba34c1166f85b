package inventory_test

import (
	"testing"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/intent"
)

// pkg/intent imports nothing of the project, so it spells the resource names
// it reads itself; they must be the names the node side serves.
func TestIntentReadsTheNamesTheNodesServe(t *testing.T) {
	for got, want := range map[string]string{
		string(intent.ResourceShareMemory):    allocator.ResourceShare,
		string(intent.ResourceGPUShareMemory): allocator.ResourceGPUShare,
		string(intent.ResourceNVIDIAGPU):      allocator.ResourceGPU,
	} {
		if got != want {
			t.Errorf("intent reads %q where the node side serves %q", got, want)
		}
	}
}
