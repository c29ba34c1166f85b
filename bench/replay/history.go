package replay

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpuadmit/gpuadmit/bench/packing"
)

// The target workload gpuadmit-scheduler is given (Options.SchedulerWorkload).
const (
	// WorkloadDerived leaves GPUAdmit's args as deploy/scheduler ships
	// them: the plugin derives its target workload from the GPU pods it
	// has seen so far.
	WorkloadDerived = "derived"
	// WorkloadListed fixes it to the trace's pod list, every kind with
	// the models its gpu_spec names: the history an operator would supply,
	// and what the simulator's policies learn before the first pod.
	WorkloadListed = "listed"
)

// listedKinds is pods as GPUAdmit's args spell a workload, one kind per
// distinct request (CPU, memory, GPU and gpu_spec), weighted by its pods,
// in a fixed order. A share is its milli-GPU in MiB of GPU memory, as the
// replay's nodes and claims represent it (one MiB per milli-GPU).
func listedKinds(pods []packing.Pod) []any {
	type key struct {
		cpu, mem, milli int64
		gpus            int
		models          string
	}
	count := map[key]int{}
	for _, p := range pods {
		k := key{cpu: p.MilliCPU, mem: p.MemoryMiB, gpus: p.GPUs}
		if p.GPUs > 0 {
			k.milli = p.GPUMilli
			ms := strings.Split(p.Spec, "|")
			slices.Sort(ms)
			k.models = strings.Join(slices.Compact(ms), "|")
		}
		count[k]++
	}
	keys := slices.SortedFunc(maps.Keys(count), func(a, b key) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		kind := map[string]any{"cpu": fmt.Sprintf("%dm", k.cpu), "memory": fmt.Sprintf("%dMi", k.mem), "weight": count[k]}
		switch {
		case k.gpus == 1 && k.milli < 1000:
			kind["gpuMemory"] = fmt.Sprintf("%dMi", k.milli)
		case k.gpus > 0:
			kind["gpus"] = k.gpus
		}
		if k.models != "" {
			kind["models"] = strings.Split(k.models, "|")
		}
		out = append(out, kind)
	}
	return out
}

// fixWorkload sets GPUAdmit's args in the profile's pluginConfig to the
// workload kinds.
func fixWorkload(config map[string]any, kinds []any) error {
	profiles, _ := config["profiles"].([]any)
	if len(profiles) != 1 {
		return fmt.Errorf("gpuadmit-scheduler's configuration has %d profiles, want 1", len(profiles))
	}
	profile, ok := profiles[0].(map[string]any)
	if !ok {
		return fmt.Errorf("gpuadmit-scheduler's profile is a %T", profiles[0])
	}
	pc, _ := profile["pluginConfig"].([]any)
	for _, c := range pc {
		if m, ok := c.(map[string]any); ok && m["name"] == "GPUAdmit" {
			return fmt.Errorf("gpuadmit-scheduler's profile already configures GPUAdmit")
		}
	}
	profile["pluginConfig"] = append(pc, map[string]any{"name": "GPUAdmit", "args": map[string]any{"workload": kinds}})
	return nil
}
