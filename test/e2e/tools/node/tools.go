//go:build tools

// Package node pins the node-side commands the real-node tests build:
// containerd, its runc shim and ctr, runc, and the CNI loopback plugin.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/opencontainers/runc"
)
