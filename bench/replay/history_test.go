package replay

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// TestListedKindsAreThePodListAsGPUAdmitsArgs: pods asking alike count as
// one kind, weighted by their pods; a share is its milli-GPU in MiB, whole
// GPUs a count, a pod without GPU its CPU and memory only; a gpu_spec's
// models are listed once each, sorted, and kinds that differ only by them
// stay apart (the price reads them).
func TestListedKindsAreThePodListAsGPUAdmitsArgs(t *testing.T) {
	share := packing.Pod{MilliCPU: 6000, MemoryMiB: 12288, GPUs: 1, GPUMilli: 460}
	onT4 := share
	onT4.Spec = "T4"
	onV100 := packing.Pod{MilliCPU: 8000, MemoryMiB: 30000, GPUs: 2, GPUMilli: 1000, Spec: "V100M32|V100M16|V100M32"}
	cpuOnly := packing.Pod{MilliCPU: 4000, MemoryMiB: 8192}
	got := listedKinds([]packing.Pod{share, onT4, share, onV100, cpuOnly})
	want := []any{
		map[string]any{"cpu": "4000m", "memory": "8192Mi", "weight": 1},
		map[string]any{"cpu": "6000m", "memory": "12288Mi", "gpuMemory": "460Mi", "models": []string{"T4"}, "weight": 1},
		map[string]any{"cpu": "6000m", "memory": "12288Mi", "gpuMemory": "460Mi", "weight": 2},
		map[string]any{"cpu": "8000m", "memory": "30000Mi", "gpus": 2, "models": []string{"V100M16", "V100M32"}, "weight": 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestFixWorkloadSetsGPUAdmitsArgs: the kinds go into the profile's
// pluginConfig as GPUAdmit's workload, beside what is configured there; a
// profile that configures GPUAdmit already is refused rather than given
// two entries.
func TestFixWorkloadSetsGPUAdmitsArgs(t *testing.T) {
	spread := map[string]any{"name": "PodTopologySpread"}
	config := map[string]any{"profiles": []any{map[string]any{"pluginConfig": []any{spread}}}}
	kinds := []any{map[string]any{"gpus": 1, "weight": 1}}
	if err := fixWorkload(config, kinds); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"profiles": []any{map[string]any{"pluginConfig": []any{spread,
		map[string]any{"name": "GPUAdmit", "args": map[string]any{"workload": kinds}}}}}}
	if diff := cmp.Diff(want, config); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if err := fixWorkload(config, kinds); err == nil {
		t.Error("a second fixWorkload: no error")
	}
}
