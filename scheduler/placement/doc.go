// Package placement is GPUAdmit, gpuadmit's placement plugin for
// kube-scheduler: it scores nodes with the placement cost of pkg/allocator
// (allocator.Placer, the policy the packing simulator measures as
// "gpuadmit"), over the node's GPUs as the scheduler sees them.
//
// # What a node's GPUs are
//
//   - In a DRA pool: the devices of type gpu in the node's ResourceSlices of
//     gpu.gpuadmit.io, each with what the claims of the node's pods (as the
//     scheduler's cache has them, assumed ones included) consumed of its
//     memory, allocated or in flight, from the scheduler's DRA claim
//     tracker (see heldOn). MIG instances are not shares and are left out.
//   - In a device-plugin pool: SharesPerGPU shares on each healthy GPU the
//     agent publishes (allocator.AnnotationGPUs, allocator.AnnotationShare),
//     less the shares of the pods bound to the node, packed by the agent's
//     best fit in the order the pods were created. Which GPU holds a running
//     container's devices only the kubelet knows; this is the layout unless
//     pods ended in between.
//
// # What a placement costs
//
// The plugin picks the node, not the GPU: DRA's allocator gives a share the
// first device in slice order with room, the device plugin the best fit. So
// the cost of a node is allocator.Placer.CostOn on the GPU the node side
// will pick, not the cheapest GPU, which is what the simulator's policy
// chooses. Each item of the pod (a container's shares, a claim's device) is
// placed in turn, the pod's CPU and memory with the first. A pod without
// GPU costs what its CPU and memory strand of the node's GPUs (whichever
// mode they are in), nothing on a node without GPUs: its CPU is what GPU
// pods run short of. To that each item adds the scarcity price of the
// node's GPU model per milli-GPU it takes: the share of that model's GPUs
// that the workload's pods pinned to few models are expected to need
// (allocator.Scarcity, as the simulator's gpuadmit policy prices it; see
// scarcity.go). It is zero where no pod of the workload is pinned, and for
// a pod pinned to one model it is the same on every node it may use; it
// moves a pod that accepts several models onto the one least needed. The
// raw score is minus the cost plus the simulator's best-fit tie-break.
//
// A pod whose claims list alternatives (firstAvailable subrequests, as
// gpuadmit's webhook writes them where several DRA pools may serve it) is
// priced, on each node, as the alternative DynamicResources' allocator
// will take there, which the plugin predicts, plus a small cost per step
// down the list (see alternatives.go). gpuadmit-scheduler's profile turns
// DynamicResources' own score off, so the order among nodes is GPUAdmit's.
//
// # The target workload
//
// Fragmentation is measured over a target workload: the kinds of request
// expected and their weights. By default it is the GPU pods of the profile
// that the scheduler knows, pending and running, counted as they come and
// go (Args.Workload may fix it instead: a history the operator supplies,
// each kind naming the GPU models it accepts where that is only some).
// Each kind is counted with the GPU models it accepts: those whose nodes
// its nodeSelector and required node affinity match, and those its DRA
// requests' model selectors name (models.go); a pod whose claim lists
// alternatives counts as its first alternative of shares or whole GPUs.
// The supply the price weighs them against is the cluster's GPUs per
// model, from the Nodes and gpuadmit's ResourceSlices, rebuilt when a
// Node's labels or gpuadmit's annotations or a slice change. That is the
// honest stand-in for
// the future the simulator knows from its trace: what is asked now is the
// best guess of what will be asked next. It leaves out pods without GPU.
// Its weakness is a cluster's first pods: until a few hundred have come,
// the share of pods pinned to a small model is a guess from a handful, and
// a price too low there lets pods that run anywhere fill that model (on
// the trace's gpuspec33 list this costs about 2 points of GPU left
// unallocated; docs/placement.md). A fixed workload has no such start.
// The plugin scores with the workload as of its last revision, and a new
// revision is taken once 5% of the pods counted came or went since and the
// distribution of kinds moved by 5% (total variation distance), so pods
// that keep coming in the same mix do not revise it, and at most once in
// as many cycles as it takes to refresh every node's score (one per 128
// nodes scored), so that a cold start, where every pod moves the mix,
// does not make every cycle recompute scores.
//
// # Per cycle
//
// PreScore reads the pod's request, picks the placer set of the workload's
// revision and scores every feasible node; Score only looks the node's
// score up. What a node's score needs is kept from one cycle to the next
// (nodeStates): its GPU views, with its fragmentation before the pod, and
// the score of every request placed on it. A node's entry ends when
// the scheduler's cache gives its NodeInfo a new generation (its pods or
// Node object changed) and when any of gpuadmit's ResourceSlices changes;
// so between two cycles only the node the last pod went to is scored
// afresh, plus every node for a request not seen before. A kept score is
// of the workload revision it was computed under, and is kept without the
// scarcity price, which each cycle adds at its own prices: after a
// revision (made off the scheduling cycle, by a goroutine of its own,
// except the first, which the first cycle needs) or a change
// of prices, a cycle computes at most 128 stale
// scores afresh and uses the others with their fragmentation as it was,
// so that a revision does not cost the next pod of every request a pass
// over every node (see nodeStates). Nodes to score afresh are
// spread over goroutines, the cycle's own taking its share (see spread);
// fragmentation is memoized by node state (allocator.FragMemo), which is
// not safe for concurrent use, so each goroutine takes a memo of its own
// from a list, and the memos live on while the workload's revision stays
// the same. NormalizeScore ranks nodes by their raw scores (see
// normalize). The plugin's placement time per pod is its PreScore, which
// gpuadmit_scheduler_placement_duration_seconds records every cycle.
//
// # Filter, requeueing, batching
//
// Filter refuses only what is certain: a container asking more shares than
// one GPU of a device-plugin node offers. EventsToRegister requeues such a
// pod when a share offer appears or changes. SignPod lets opportunistic
// batching reuse a cycle's scores only when the workload is fixed.
package placement
