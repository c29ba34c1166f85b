package allocator

import "slices"

// Scarcity is, per GPU model, the share of the cluster's GPUs of that model
// that the workload's pinned kinds (a Spec naming some models only) are
// expected to need: each pinned kind's share of the workload's GPU demand,
// scaled to the cluster's GPU capacity (a workload that fills the cluster),
// spread over the models it accepts in proportion to their GPUs, and
// divided by the model's GPUs; at most 1. Kinds that accept any model add
// nothing. supply is the cluster's GPUs per model; models a pinned kind
// names that the cluster lacks take none of its demand.
//
// Why Placer prices it: fragmentation (FGD's measure) is a node's own
// business. It counts what a node's idle GPUs cannot serve, never what the
// cluster as a whole must keep for the kinds that can run on few models: a
// pod that could run anywhere, taking the last idle GPU of a model that
// pinned pods need, leaves no fragment behind, yet a pinned pod fails later
// while GPUs of other models stay idle. A GPU of model M taken by a pod
// that could have gone elsewhere is, with probability about Scarcity(M),
// one that a pinned pod would have used: that is its expected cost in
// milli-GPU left unallocated. docs/benchmarks.md (section 2) shows the
// gpuspec pod lists, where it decides.
func Scarcity(tasks []FragTask, supply map[string]int) map[string]float64 {
	var capacity, demand float64
	for _, n := range supply {
		capacity += float64(n)
	}
	for _, t := range tasks {
		demand += t.Weight * float64(t.GPUMilliTotal())
	}
	if capacity == 0 || demand == 0 {
		return nil
	}
	models := make([]string, 0, len(supply))
	for m, n := range supply {
		if n > 0 {
			models = append(models, m)
		}
	}
	slices.Sort(models) // a fixed order to walk them in, whatever the map's
	// The models each spec accepts (by index in models), and their GPUs: a
	// workload's hundreds of tasks name a few specs.
	type taking struct {
		models   []int
		accepted float64
	}
	bySpec := map[string]taking{}
	gpus := make([]float64, len(models))
	for i, m := range models {
		gpus[i] = float64(supply[m])
	}
	need, needed := make([]float64, len(models)), make([]bool, len(models))
	for _, t := range tasks {
		if t.Spec == "" || t.GPUs == 0 {
			continue
		}
		tk, ok := bySpec[t.Spec]
		if !ok {
			for i, m := range models {
				if ModelAllowed(t.Spec, m) {
					tk.models = append(tk.models, i)
					tk.accepted += gpus[i]
				}
			}
			bySpec[t.Spec] = tk
		}
		if tk.accepted == 0 {
			continue
		}
		d := t.Weight * float64(t.GPUMilliTotal()) / demand * capacity
		for _, i := range tk.models {
			need[i] += d * gpus[i] / tk.accepted
			needed[i] = true
		}
	}
	var out map[string]float64
	for i, m := range models {
		if needed[i] {
			if out == nil {
				out = map[string]float64{}
			}
			out[m] = min(1, need[i]/gpus[i])
		}
	}
	return out
}
