package node

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Paths and ports a node owns on this machine: one node at a time.
const (
	// KubeletDir is the kubelet's root directory. It stays the default,
	// because device plugins (device-plugins/kubelet.sock) and DRA drivers
	// (plugins_registry/) find the kubelet there.
	KubeletDir = "/var/lib/kubelet"
	// ContainerdRunDir holds containerd's socket, its shims' sockets (s/)
	// and runc's state (runc/): paths containerd v2.4 fixes.
	ContainerdRunDir = "/run/containerd"
	// ContainerdSocket is containerd's gRPC socket, the kubelet's CRI endpoint.
	ContainerdSocket = ContainerdRunDir + "/containerd.sock"
	// ContainerLogLinks is where the kubelet links each container's log
	// (fixed in the kubelet, whatever podLogsDir says).
	ContainerLogLinks = "/var/log/containers"
)

var kubeletPorts = []string{"10250", "10248"} // API (logs, exec), healthz

// binaries are the files BinDir must hold: the node's from
// hack/node-binaries.sh, the control plane's from hack/e2e-binaries.sh.
var binaries = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "cni/loopback", "pause", "nvidia-cdi-hook", "kube-apiserver", "kube-controller-manager", "etcd", "cert-manager-crds"}

// busyboxPath is Debian's busybox-static, the test image's one binary;
// $GPUADMIT_BUSYBOX names another static busybox (a GPU machine's image
// may have none, and the hardware bundle brings Debian's).
var busyboxPath = cmp.Or(os.Getenv("GPUADMIT_BUSYBOX"), "/bin/busybox")

// ErrUnavailable says this machine cannot run a node now; Check wraps it
// with the reason, and tests skip on it.
var ErrUnavailable = errors.New("real node unavailable")

// Check says whether a node can start here: as root, with every binary in
// binDir, and with the kubelet's and containerd's paths and ports free. Its
// error names what is missing and how to get it.
func Check(binDir string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (mounts, cgroups, runc): run the tests as root; this is uid %d", ErrUnavailable, os.Geteuid())
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return fmt.Errorf("%w: %s missing in %s; build with hack/e2e-binaries.sh and hack/node-binaries.sh (make test runs both)", ErrUnavailable, b, binDir)
		}
	}
	if _, err := os.Stat(busyboxPath); err != nil {
		return fmt.Errorf("%w: %s missing; hack/node-binaries.sh installs Debian's busybox-static", ErrUnavailable, busyboxPath)
	}
	return inUse()
}

// inUse refuses a machine where another kubelet or containerd runs, or a
// run that did not clean up left its directories.
func inUse() error {
	for _, dir := range []string{KubeletDir, ContainerdRunDir} {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return fmt.Errorf("%w: %s is in use (another kubelet or containerd, or a run that did not clean up); stop it, unmount what is mounted under it and remove it", ErrUnavailable, dir)
		}
	}
	for _, port := range kubeletPorts {
		l, err := net.Listen("tcp", ":"+port)
		if err != nil {
			return fmt.Errorf("%w: kubelet port %s is in use: %w", ErrUnavailable, port, err)
		}
		l.Close()
	}
	return nil
}
