//go:build tools

// Package node pins the node-side commands the real-node tests build:
// containerd, its runc shim and ctr, runc, the CNI loopback plugin, and
// NVIDIA's nvidia-container-runtime with the nvidia-cdi-hook its CDI
// specs' hooks run (the toolkit at the version gpuadmit's go.mod pins).
package node

import (
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-cdi-hook"
	_ "github.com/NVIDIA/nvidia-container-toolkit/cmd/nvidia-container-runtime"
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/opencontainers/runc"
)
