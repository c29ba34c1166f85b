// Package dra is gpuadmit's node agent as a DRA driver, gpu.gpuadmit.io
// (DESIGN.md, "Node side: two modes"). It publishes the node's GPUs as
// ResourceSlice devices and prepares the claims the scheduler allocated on
// them as CDI devices.
//
// # Devices
//
// Devices turns discovery (pkg/agent) into resource.k8s.io/v1 devices, one
// pool per node named after it:
//
//   - one device per healthy GPU without MIG, "gpu-<index>", with a memory
//     capacity in real bytes that claims share (allowMultipleAllocations):
//     its request policy rounds a request up to whole share units (1 GiB by
//     default) and gives a claim that asks for no memory every whole unit
//     (min + ⌊(capacity − min)/step⌋·step, since the API server wants the
//     default on the step grid), which leaves less than one unit: that claim
//     is exclusive. A GPU smaller than two units is not shared.
//   - one device per existing MIG instance of a healthy GPU,
//     "gpu-<index>-mig-<profile>-<gi>" ("1g.10gb+me" written "1g-10gb-me"),
//     with its memory as capacity, used by one claim at a time.
//
// Attributes are unqualified, so in the driver's domain: type ("gpu" or
// "mig"), uuid (the GPU's, or the MIG device's), product, model (the
// catalog's), index (the GPU's, the parent's for MIG), and for MIG profile
// and parentUUID. A DeviceClass selects with
// device.attributes["gpu.gpuadmit.io"].profile == "3g.40gb".
//
// Unhealthy GPUs are not published (rather than tainted): the accounting
// capacity drops their memory too, and claims already prepared on them keep
// their CDI files.
//
// Devices are ordered smallest memory first, then by GPU index, then by MIG
// placement. The scheduler's structured allocator tries a pool's slices by
// name and each slice's devices in order, and takes the first that fits; in
// this order a share fills one GPU before the next and picks the smallest
// GPU it fits on, so larger GPUs stay whole for whole-GPU claims.
package dra
