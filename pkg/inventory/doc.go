// Package inventory builds the cluster's GPU pools from Node objects.
//
// A pool is a set of GPU nodes with the same GPU model and the same mode
// (mig-mixed, mig-single, shared, whole). Pools are read from what the nodes
// say about themselves: GPU Feature Discovery labels (nvidia.com/gpu.product,
// nvidia.com/gpu.memory, nvidia.com/gpu.count, nvidia.com/mig.strategy,
// nvidia.com/mig-<profile>.memory), allocatable GPU resources, taints, and the
// operator's gpuadmit.io/pool label. Where a node's labels report a MIG
// profile's memory, that reading wins over the allocator's catalog.
//
// The same code serves the webhook (nodes from an informer) and the offline
// CLI (nodes from a YAML stream, see ReadNodes).
package inventory
