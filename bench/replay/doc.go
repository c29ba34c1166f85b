// Package replay replays a workload of the Alibaba openb trace through a
// real kube-apiserver and a real scheduler, on the trace's nodes as fake
// nodes, and measures what bench/packing measures in its simulator: the GPU
// left unallocated when as much GPU as the cluster has was asked for.
//
// # What runs
//
// One fresh control plane per scheduler configuration: etcd and
// kube-apiserver v1.37 (test/e2e/cluster), the scheduler under test and
// nothing else (no controller-manager, no kwok, no gpuadmit webhook: pods
// are created as the bench writes them and bound pods never run; the
// scheduler does not care whether a kubelet reports); the product's path
// (below) adds gpuadmit and the controller-manager. Every scheduler runs
// without leader election and with its client's rate limits raised from
// 50 to 2,000 queries per second (see clientQPS), which changes how fast
// pods are bound, not where. Configurations:
//
//   - default: the stock kube-scheduler, default profile (it scores a
//     sample of 50 − ⌊nodes/125⌋ percent of the feasible nodes).
//   - mostallocated: the stock kube-scheduler with NodeResourcesFit scoring
//     MostAllocated, weights cpu 1, memory 1 and the GPU resource 3 (the
//     pattern of Kubernetes' "Resource Bin Packing" page), scoring every
//     node (percentageOfNodesToScore 100, as gpuadmit's profile does),
//     everything else stock.
//   - gpuadmit: gpuadmit-scheduler with deploy/scheduler's profile (leader
//     election off, the one change).
//
// # Representation
//
// Every node of the trace is a Node with its CPU and memory, and a
// ResourceSlice of gpu.gpuadmit.io with one device per GPU, built by the DRA
// agent's own code (pkg/agent/dra.Devices): each GPU's memory capacity is
// 1000 MiB, shared in steps of 1 MiB, so one MiB is one milli-GPU of the
// trace and every share is represented exactly. A GPU pod has a
// ResourceClaim, created before it: a share (gpu_milli < 1000) asks class
// gpu-share.gpuadmit.io for gpu_milli MiB of one device; whole GPUs ask
// class gpu.gpuadmit.io for num_gpu devices, each of which then takes its
// device's whole capacity. The scheduler's DRA allocator picks the devices,
// first fit in slice order (GPU 0 first), for every configuration alike.
//
// The GPU resource NodeResourcesFit can score: it sees no DRA device, only
// node resources. gpuadmit's webhook adds the accounting resource
// gpuadmit.io/gpu-memory-mib (the GPU memory a container gets) to every GPU
// container, and the agent advertises the node's GPU memory as its
// capacity, so a cluster running gpuadmit has exactly one GPU resource a
// stock profile can weigh; here it counts milli-GPU (1000 per GPU).
//
// Each GPU node also carries the labels GPU Feature Discovery would set
// (product: the trace's model; count; memory: 1000), by which gpuadmit's
// inventory puts it in a DRA pool of its model; each GPU pod carries
// gpuadmit's label gpuadmit.io/managed, as the webhook sets it; a pod whose
// trace row names GPU models (gpu_spec) has a required node affinity to
// nodes of those models. None of this changes where a scheduler may put a
// pod but the affinity, which the simulator's fit has too.
//
// # Measure
//
// Pods are the workload bench/packing simulates (the pod list inflated to
// 130% of capacity and shuffled by the seed), cut after the pod at which
// the GPU asked for first reaches 100% of capacity: pods never leave, so
// the pods after it cannot change the allocation at 100% arrived. They are
// created one at a time, in trace order, each after its claim; the
// scheduler's queue takes them in that order. A pod that fits nowhere stays
// Pending and counts as unplaced, as a failed pod of the simulator does
// (resources only shrink, so its retries never succeed). Once every pod is
// bound or unschedulable, the placements are read back: each pod's node
// and its claim's allocation (which device, how much of it), replayed onto
// bench/packing's cluster model (which refuses an overcommitted GPU) and
// counted by packing.Tally.
//
// The simulator's figures for the same nodes, workload and seed come from
// packing.Simulate: gpuadmit (its own GPU choice), gpuadmit-firstfit (the
// GPU the DRA allocator picks: what gpuadmit-scheduler can do), FGD,
// bestfit and bestfit-firstfit.
//
// # The product's path
//
// The configurations above create the pods as the bench writes them,
// claims included, and run no gpuadmit webhook. The product-path
// configurations (ProductConfigurations) replay the same nodes and pods
// the way a cluster running gpuadmit sees them:
//
//   - webhook-gpuadmit: gpuadmit's webhook with DRA alternatives, and
//     gpuadmit-scheduler with deploy/scheduler's profile, leader election
//     on (gpuadmit's controller gives it the pools only while its leader
//     holds the Lease; only then does the webhook name it in GPU pods),
//     the Lease 120s renewed within 100s instead of 15s and 10s, so that a
//     slow API server on a loaded machine does not end its leadership.
//   - webhook-default: the same webhook, the stock kube-scheduler.
//   - webhook-onepool: the webhook with --no-dra-alternatives, placing
//     every pod on one pool as it did before alternatives, the first with
//     room in the policy's order (--pool-pick=order), and the stock
//     kube-scheduler: the webhook before alternatives.
//   - webhook-pick: the same with --pool-pick=expected, the pick of one
//     pool by the expected demand of the pods only some models can serve
//     (what the webhook does on device-plugin pools).
//
// Each runs gpuadmit's webhook and controller in this process (the e2e
// harness's cluster.StartWebhook: deploy/base's RBAC, the embedded default
// policies, the MutatingWebhookConfiguration at a loopback URL, the claim
// template reconciler) and kube-controller-manager's default controllers,
// whose resourceclaim controller makes each pod's claims from gpuadmit's
// templates. Nodes are ProductNode: the GFD labels and the accounting
// capacity gpuadmit's DRA agent advertises (gpuadmit.io/gpu-memory-mib
// quota-only, the model's gpuadmit.io/<model>-mib at 1000 per GPU), with
// the same ResourceSlices. The trace's models (A10, G2, G3, P100, T4,
// V100M16, V100M32; G2 and G3 anonymised) are not in gpuadmit's catalog:
// the inventory makes a DRA pool of each from the product label, with the
// memory label's 1000 MiB per GPU and the slices' 1 MiB share step, so a
// fraction f of a GPU is a share of exactly 1000·f MiB. With every GPU of
// equal memory, the default policy's "smallest GPU first" order ties and
// falls back to the pools' names (a10, g2, g3, p100, t4, v100m16, v100m32).
//
// Pods are ProductPod, as a user writes them: gpuadmit.io/gpu: 460m for a
// share, gpuadmit.io/gpu: N for whole GPUs, and the trace's gpu_spec as a
// model hint: gpuadmit.io/model where it names one model (that hint names
// one only), HAMi's nvidia.com/use-gputype list, which gpuadmit reads as a
// hint, where it names several. No claim, no accounting resource, no
// scheduler on GPU pods: the webhook writes them. gpuadmit gives
// gpuadmit-scheduler only pods a controller creates (they are replaced
// should it go away), so every pod names one ConfigMap as its controller,
// which nothing acts on, in all three configurations alike. A pod the
// webhook denies (a model no sampled node has) is not created and counts
// as unplaced, as the simulator counts a pod that fits nowhere.
//
// Before the first pod, the replay waits until the webhook admits, in a
// dry run, a whole-GPU pod of each model to the configuration's scheduler
// and a pod of any model with alternatives over every pool (one pool for
// webhook-onepool). After settling, checkProduct refuses the run unless
// every GPU pod carries gpuadmit's decision record and label, no longer
// asks for gpuadmit.io/gpu, gets its GPU only from gpuadmit's claim
// templates or nvidia.com/gpu (a one-pool whole GPU, which the scheduler
// allocates as a claim through gpuadmit's DeviceClass), names the
// configuration's scheduler, and, with alternatives, at least one pod has
// a claim of alternatives (none without). Placements are read from the
// claims the pod's status names. The usage trace is not computed on this
// path.
//
// # Usage trace
//
// Once the pods have settled, the replay reads the nodes and slices back
// and computes gpuadmit's usage figures — stranded, fragmentation,
// capacity, allocated, free and pending, pkg/usage's Compute on the
// input pkg/report builds from the objects, as the webhook's leader
// builds it from its caches — at every 2% of arrival (UsageTrace): at a
// point, the pods arrived so far, each bound where it was bound or pending
// as it stayed, with their claims. The scheduler takes pods in creation
// order and resources only shrink, so that is the cluster as it stood once
// the pods up to that point were scheduled; the 100% point is the cluster
// as read back. The typical sizes of the stranded figure are the distinct
// GPU requests of the trace's pod list (TypicalSizes): free GPU memory that
// no pod of the list and no pending pod could use is stranded. Each point
// is computed twice: as the leader sees it (gpuadmit's pods only) and with
// the CPU and memory of the pods without GPU taken too (Input.Others), to
// show how far the leader's figure falls below.
//
// # Placement time
//
// GPUAdmit's placement time per pod is its PreScore, which scores every
// node; the plugin records it every cycle in
// gpuadmit_scheduler_placement_duration_seconds. Next to it, the
// scheduler's own scheduler_plugin_execution_duration_seconds for plugin
// GPUAdmit, both scraped from the scheduler's metrics port. The scheduler records
// plugin durations in 10% of its cycles, and for Filter and Score once per
// node, into a buffer of 1,000 observations flushed every second that drops
// what does not fit; so the sample counts are reported with the quantiles.
package replay
