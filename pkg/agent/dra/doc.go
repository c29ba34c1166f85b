// Package dra is gpuadmit's node agent as a DRA driver, gpu.gpuadmit.io
// (the node side where the scheduler fits claims on GPUs, beside the
// device-plugin mode of package agent). It publishes the node's GPUs as
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
// An unhealthy GPU's devices are published with the device taint
// gpu.gpuadmit.io/unhealthy, NoSchedule (while its memory is known): no new
// claim gets them, and the pods on them keep running, as in device-plugin
// mode. A device that prepared claims hold but that is gone (a MIG instance
// deleted under its claim, a GPU no longer discovered) or whose name is now
// another GPU stays published with gpu.gpuadmit.io/gone, NoExecute: the
// scheduler allocates it to no claim, Prepare refuses it naming the taint,
// and the controller-manager's device-taint eviction controller
// (DRADeviceTaints, GA in 1.37) evicts the pods of its claims, so such a
// pod is replaced by its owner instead of waiting for ever on a Prepare
// that cannot succeed.
// The accounting capacity drops an unhealthy GPU's memory.
//
// Devices are ordered smallest memory first, then by GPU index, then by MIG
// placement. The scheduler's structured allocator tries a pool's slices by
// name and each slice's devices in order, and takes the first that fits; in
// this order a share fills one GPU before the next and picks the smallest
// GPU it fits on, so larger GPUs stay whole for whole-GPU claims.
//
// # Preparing claims
//
// Driver implements kubeletplugin.DRAPlugin. For each allocated device of a
// claim it writes one CDI device, "gpuadmit.io/gpu=<claim uid>-<request>-<device>",
// in one spec file per claim (<cdi dir>/gpuadmit.io-gpu_<claim uid>.json),
// complete as NVIDIA's own DRA driver writes it (package cdi, NVIDIA's
// nvcdi, from the driver root): the device carries the edits of its GPU,
// by UUID, or of its MIG device, by MIG UUID ("MIG-…", which unlike
// "<gpu index>:<mig index>" does not move when other instances change):
// that GPU's /dev/nvidiaN only (and a MIG device's capability nodes), its
// hooks, and GPUADMIT_MEMORY_LIMIT_MIB, the memory the claim consumed or
// the whole device's for a claim that asked for none. The spec's own edits
// are what every GPU needs, applied once however many of the claim's
// devices a container gets: /dev/nvidiactl, /dev/nvidia-uvm,
// /dev/nvidia-uvm-tools, the driver's libraries and binaries, the hooks
// that make their symlinks and update the container's ldcache, and
// NVIDIA_VISIBLE_DEVICES=void, so a legacy NVIDIA runtime adds nothing.
// A plain containerd 2.x with runc applies it. A device's CDI content
// depends only on its checkpoint entry and the published device
// (Driver.cdiDevice), so it can be written again from the checkpoint.
//
// Preparing is the last line of defence against the scheduler: a claim is
// refused (its own error; other claims of the call go on) when its memory
// and what is already prepared on the device exceed the device's memory,
// when it wants the whole device and another claim is prepared there, or
// when another claim already has the whole device. Prepared claims are
// recorded in <plugin data dir>/checkpoint.json (version 1: claims by UID,
// each with its devices, request, share ID, MiB held, exclusivity and CDI
// ID, and the GPU's UUID), written atomically, so preparing a claim again,
// also after the agent restarted, returns what it returned before. Preparing
// again also writes the claim's CDI spec again from the devices as
// discovered now: after a reboot the kubelet prepares every claim again, the
// checkpoint (under /var/lib/kubelet) survived and the specs (/var/run/cdi,
// a tmpfs) did not. A device that is gone, or whose name is now another GPU,
// fails the claim with its name. Unpreparing removes the CDI file and the
// entry; an unknown claim is unprepared already. Claims deleted from the API
// while the agent was down, whose Unprepare never came, are released when it
// starts and every tenth resync (Driver.ReleaseDeleted: a claim that is not
// found, or whose name now has another UID), as NVIDIA's DRA driver does.
//
// # Memory is not enforced
//
// In DRA mode, as in device-plugin mode without MPS, nothing on the GPU
// stops a container from using more memory than it was given:
// GPUADMIT_MEMORY_LIMIT_MIB is advisory, for the workload (or a framework's
// allocator) to honour. The scheduler and this driver make sure the limits
// of the claims on a GPU add up to no more than its memory. Enforcement
// needs MPS (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), which this mode does not set up yet.
//
// # Running
//
// Node runs the driver behind kubeletplugin's helper (registration with
// the kubelet, the DRA gRPC service) and publishes on every discovery or
// health change: the ResourceSlices through the helper's ResourceSlice
// controller, and, as in device-plugin mode, the gpuadmit.io/gpus
// annotation and the accounting capacity on the Node, which the inventory
// and quotas read in both modes.
package dra
