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
	need := map[string]float64{}
	for _, t := range tasks {
		if t.Spec == "" || t.GPUs == 0 {
			continue
		}
		var accepted float64
		var takers []string // the models t accepts
		for _, m := range models {
			if ModelAllowed(t.Spec, m) {
				takers = append(takers, m)
				accepted += float64(supply[m])
			}
		}
		if accepted == 0 {
			continue
		}
		d := t.Weight * float64(t.GPUMilliTotal()) / demand * capacity
		for _, m := range takers {
			need[m] += d * float64(supply[m]) / accepted
		}
	}
	if len(need) == 0 {
		return nil
	}
	out := make(map[string]float64, len(need))
	for m, n := range need {
		out[m] = min(1, n/float64(supply[m]))
	}
	return out
}
