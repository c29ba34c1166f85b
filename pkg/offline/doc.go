// Package offline runs gpuadmit's decision without a cluster: a pod, a
// stream of Nodes, an optional Namespace and a policy set in, the mutated pod,
// the patch and an explanation out. It is what `gpuadmit mutate` runs.
package offline
