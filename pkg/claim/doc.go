// Package claim is how a memory share reaches a GPU on a DRA pool: a pod-level
// resource claim made from a ResourceClaimTemplate that asks gpuadmit's
// share DeviceClass for the share's memory as consumable capacity. The stock
// scheduler then allocates the share on one GPU with that much room, so no
// share is ever bound to a node whose room is spread over several GPUs.
//
// It is also how a pod that accepts several DRA pools gets its GPU without
// being pinned to one: a template whose one request lists the pod's
// alternatives (a MIG device, a share, whole GPUs, each of one model) as
// firstAvailable subrequests, in the policy's order (alternatives.go).
//
// The webhook names the template and has no side effects; the
// leader-elected Reconciler creates each named template in the pod's
// namespace on demand, and deletes a template once no pod references it. A
// template's spec is immutable, so its name carries a hash of the spec: a
// spec gpuadmit writes differently in a later version gets a new name.
package claim
