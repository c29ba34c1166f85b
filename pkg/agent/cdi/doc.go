// Package cdi generates the Container Device Interface specs that give a
// container its GPU on a node, the way NVIDIA's own stack (the DRA driver,
// the device plugin's cdi-cri strategy, nvidia-ctk cdi generate) does: with
// the container toolkit's nvcdi library, from the node's driver root.
//
// A spec made here is complete: each GPU's device carries its own device
// node (/dev/nvidiaN, or a MIG device's parent node and capability nodes)
// and the toolkit's per-device hooks; the spec-level edits carry what every
// GPU needs (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools, the
// driver's libraries and binaries, the nvidia-cdi-hook hooks that create the
// library symlinks and update the container's ldcache) and
// NVIDIA_VISIBLE_DEVICES=void, so that an NVIDIA runtime in legacy mode that
// also sees the container injects nothing more. A plain containerd 2.x with
// runc applies it: nothing else of NVIDIA's runtime is needed on the node but
// the nvidia-cdi-hook binary the hooks name.
//
// The agent may run in a container that sees the host's driver root at
// another path (Options.ContainerDriverRoot): paths are looked up there and
// written as the host sees them, since the container runtime reads the spec
// on the host.
//
// The package is the agent's only importer of the toolkit; the webhook and
// the command line link neither (cmd/webhook and cmd/gpuadmit test it).
package cdi
