package agent

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// TestDiscoverNode is `--discover` against the driver's NVML. Where there is
// none (developers' and CI machines) it must say so and what to check;
// where there is a GPU it must find it, and it logs how NVML's profiles
// differ from the catalog's, since the agent trusts NVML.
func TestDiscoverNode(t *testing.T) {
	r, err := DiscoverNode(Options{})
	if err != nil {
		if !strings.Contains(err.Error(), "NVIDIA driver") {
			t.Errorf("DiscoverNode without NVML: %v; want a hint about the NVIDIA driver", err)
		}
		t.Skipf("no NVML on this machine: %v", err)
	}
	for _, g := range r.GPUs {
		if g.UUID == "" || g.MemoryMiB <= 0 || g.Product == "" {
			t.Errorf("GPU %d read incompletely: %+v", g.Index, g)
		}
		if m, ok := allocator.Default().Model(g.Model); ok && g.Known {
			if diff := cmp.Diff(m.Profiles, g.Profiles); diff != "" {
				t.Logf("GPU %d (%s): NVML's profiles differ from the catalog's (-catalog +NVML):\n%s", g.Index, g.Model, diff)
			}
		}
	}
	t.Logf("discovered %d GPUs, capacity %v", len(r.GPUs), r.Capacity)
}
