package cdi

import (
	"os"
	"path/filepath"

	"github.com/go-logr/logr"
)

// Defaults of Options.
const (
	// DefaultDriverRoot is a driver installed on the host's own root.
	DefaultDriverRoot = "/"
	// DefaultHookPath is where NVIDIA's container toolkit packages install
	// nvidia-cdi-hook on the host.
	DefaultHookPath = "/usr/bin/nvidia-cdi-hook"
)

// Options say where the node's driver is. The zero value is a driver
// installed on the host's root, read by an agent that sees the host's
// root as its own, with the toolkit's nvidia-cdi-hook at /usr/bin.
type Options struct {
	// DriverRoot is the host path of the driver's root: "/" for a driver
	// installed from packages, "/run/nvidia/driver" under the GPU Operator,
	// "/usr/local/nvidia" on hosts that install it there read-only. Empty
	// means "/".
	DriverRoot string
	// ContainerDriverRoot is where the agent sees DriverRoot (a hostPath
	// mount in its pod, "/driver-root"); files are looked up there and
	// written as host paths under DriverRoot. Empty means DriverRoot: the
	// agent runs on the host, or the root is mounted at the same path.
	ContainerDriverRoot string
	// DevRoot is the host path of the root whose dev/ holds the NVIDIA
	// device nodes. Empty means the driver root when its dev/ holds
	// nvidiactl (a containerized driver), else "/". A DevRoot other than
	// the driver root is read at the same path in the agent's container.
	DevRoot string
	// HookPath is the host path of the nvidia-cdi-hook binary the spec's
	// hooks run; it is not read by the agent. Empty means
	// /usr/bin/nvidia-cdi-hook.
	HookPath string
	// Log receives nvcdi's messages: warnings at V(1), the rest at V(4)
	// and up. The zero logger discards them.
	Log logr.Logger
}

func (o *Options) defaults() {
	if o.DriverRoot == "" {
		o.DriverRoot = DefaultDriverRoot
	}
	o.DriverRoot = filepath.Clean(o.DriverRoot)
	if o.ContainerDriverRoot == "" {
		o.ContainerDriverRoot = o.DriverRoot
	}
	o.ContainerDriverRoot = filepath.Clean(o.ContainerDriverRoot)
	if o.DevRoot == "" {
		o.DevRoot = defaultDevRoot(o.DriverRoot, o.ContainerDriverRoot)
	}
	if o.HookPath == "" {
		o.HookPath = DefaultHookPath
	}
}

// defaultDevRoot is the driver root when its dev/ holds the driver's
// control node (a driver container's root), else the host's "/". A dev/
// alone does not decide it, as it does in NVIDIA's DRA driver: a driver
// installed read-only at /usr/local/nvidia can hold an empty dev/ while
// the device nodes are the host's (seen on an H200 machine).
func defaultDevRoot(host, container string) string {
	if st, err := os.Stat(filepath.Join(container, "dev", "nvidiactl")); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		return host
	}
	return "/"
}

// containerDevRoot is where the agent sees the dev root.
func (o *Options) containerDevRoot() string {
	if o.DevRoot == o.DriverRoot {
		return o.ContainerDriverRoot
	}
	return o.DevRoot
}

// AgentDriverRoot is where the agent sees the driver root: ContainerDriverRoot,
// or DriverRoot, or "/".
func (o Options) AgentDriverRoot() string {
	o.defaults()
	return o.ContainerDriverRoot
}

// NVMLLibrary is the driver's libnvidia-ml.so.1 in the agent's view of the
// driver root, found where NVIDIA's DRA driver looks; empty when the driver
// root is "/" (the dynamic loader finds it) or it is not there.
func (o Options) NVMLLibrary() string {
	o.defaults()
	if o.ContainerDriverRoot == "/" {
		return ""
	}
	for _, dir := range []string{"/usr/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
		"/lib64", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/lib", "/usr/lib"} {
		p := filepath.Join(o.ContainerDriverRoot, dir, "libnvidia-ml.so.1")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
