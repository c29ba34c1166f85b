// Package packing replays the packing study of "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent"
// (Weng et al., USENIX ATC'23, "FGD") on the Alibaba openb trace, with
// pkg/allocator as the placement engine. It reads the trace where it lies
// (gpuadmit does not copy it; docs/trace.md says where it comes from), and
// Checksums checks its files against the published ones (openb.sha256).
//
// Protocol (the paper §6.1; the artifact
// github.com/hkust-adsl/kubernetes-scheduler-simulator, the code behind
// alibaba/clusterdata's cluster-trace-gpu-v2023):
//
//   - Cluster: openb_node_list_gpu_node.csv (1,213 nodes, 6,212 GPUs).
//   - Workload: a pod list, inflated by drawing its pods with replacement
//     until the GPU asked for passes 130% of capacity, then shuffled; both
//     seeded (Inflate). Pods arrive one by one and never leave; a pod that
//     fits no node fails and is not retried (Simulate).
//   - Fit: CPU, memory, GPU model (gpu_spec, models separated by '|') and
//     GPU: gpu_milli < 1000 is a share of one GPU with that much left,
//     num_gpu ≥ 1 whole GPUs fully idle.
//   - Arrived workload: GPU asked for by the pods arrived so far, failed or
//     not, over the cluster's GPU capacity.
//   - Allocated GPU %: GPU allocated over capacity when the arrived workload
//     first reaches a point; unallocated GPU % is 100 − allocated, as the
//     artifact's plot_openb_alloc.py draws it (alloc_rate_reverse) against
//     the ideal line 100 − arrived. At 100% arrived it is the capacity left
//     unallocated although as much GPU as the cluster has was asked for.
//   - Fragmentation (allocator.Fragmentation, the artifact's
//     NodeGpuShareFragAmount): for each kind of request of the target
//     workload (the most popular kinds covering 95% of its pods, CPU-only
//     pods included, weighted by popularity), the milli-GPU idle on the node
//     that the kind cannot use — all of it when the kind cannot run there
//     at all, else the GPUs with less left than it asks per GPU — summed
//     with the weights.
//
// Policies, each as the artifact scores a feasible node (integer scores
// 0…100; 128 CPUs and 8 GPUs are the artifact's normalisation constants).
// A tie goes to the first node of an order drawn once per run from the
// seed: the artifact vendors kube-scheduler with selectHost changed from a
// random pick among tied nodes to the smallest name "for reproducibility"
// (vendor/k8s.io/kubernetes/pkg/scheduler/core/generic_scheduler.go), and
// its simulator prefixes each node's name with its place in a seeded
// permutation (syncClusterResourceList). With scores this coarse most
// choices are ties, so this matters: with random ties Clustering, Packing
// and FGD end 3–5 points worse than the paper's.
//
//   - Random: any feasible node; a share on a random GPU that holds it.
//   - DotProd (Tetris): the least dot product of the node's free (CPU,
//     total GPU) and the pod's request, both normalised.
//   - Clustering (GPU Clustering): nodes holding only pods of the pod's
//     GPU-request class (share, n whole GPUs), then holding it among
//     others, then idle, then other classes; fuller first within a band.
//   - Packing (GPU Packing): shared GPUs first, then idle GPUs of used
//     nodes, then idle nodes.
//   - BestFit: the least CPU and GPU left after placing, half weight each.
//   - FGD: the node and GPU where the node's fragmentation grows the least,
//     scored ⌊100·sigmoid(−Δ/1000)⌋.
//   - gpuadmit: gpuadmit's own policy (allocator.Placer): the least growth
//     of fragmentation over every kind of the workload with its memory, plus
//     the GPU stranded for want of CPU, ties to the best fit (GPUAdmit).
//
// Whole GPUs are the node's first idle GPUs by index; a share goes on the
// best-fit GPU except under Random and FGD: the artifact's run scripts give
// Clustering, Packing and BestFit no -gpusel, so generate_config_and_run.py's
// default "best" applies. GPU Clustering counts only pods with GPU in a
// node's classes, as the artifact's GetNodeResourceViaNodeInfo does.
package packing
