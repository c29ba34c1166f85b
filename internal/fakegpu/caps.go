package fakegpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A MIG device reaches a container as its parent GPU's device node and two
// nvidia-caps device nodes, /dev/nvidia-caps/nvidia-cap<minor>: the access
// capability of its GPU instance and that of its compute instance. nvcdi
// (v1.20.2, internal/platform-support/dgpu) reads their minors from the
// host's /proc/driver/nvidia-caps/mig-minors, whatever its driver root,
// and looks the nodes up under the dev root. This file makes both for fake
// GPUs: the nodes in a fake root (Root.MIGCaps), the minors file in a
// directory that stands for /proc/driver (WriteProcDriver), which the
// agent of the real-node tests mounts over its container's /proc/driver
// (MountProcDriver).

// MajorCaps is the major of the fake nvidia-caps device nodes. The driver
// registers nvidia-caps with a dynamic major (241 on the H200 of
// docs/hardware); nvcdi reads none, the runtime takes the node's own.
const MajorCaps = 241

// The driver's MIG capabilities per GPU: GPU instance IDs 0-14, each with
// compute instance IDs 0-7.
const (
	migGPUInstances     = 15
	migComputeInstances = 8
	capsPerGI           = 1 + migComputeInstances
	capsPerGPU          = migGPUInstances * capsPerGI
)

// GICapMinor is the minor of the access capability of GPU instance gi on
// the GPU of minor number gpu, numbered as the driver's mig-minors file
// lists them: config 1, monitor 2, then for each GPU each GPU instance's
// access followed by its compute instances'.
func GICapMinor(gpu, gi int) int { return 3 + gpu*capsPerGPU + gi*capsPerGI }

// CICapMinor is the minor of the access capability of compute instance ci
// of GPU instance gi on the GPU of minor number gpu.
func CICapMinor(gpu, gi, ci int) int { return GICapMinor(gpu, gi) + 1 + ci }

// CapPath is the device node of the nvidia-caps minor, as nvcdi names it.
func CapPath(minor int) string { return fmt.Sprintf("/dev/nvidia-caps/nvidia-cap%d", minor) }

// MIGMinors is /proc/driver/nvidia-caps/mig-minors of a driver with gpus
// GPUs, minors 0 to gpus-1: "config 1", "monitor 2", then
// "gpu<g>/gi<i>/access <minor>" and "gpu<g>/gi<i>/ci<c>/access <minor>"
// for every GPU and compute instance ID the driver knows.
func MIGMinors(gpus int) []byte {
	var b bytes.Buffer
	b.WriteString("config 1\nmonitor 2\n")
	for g := range gpus {
		for gi := range migGPUInstances {
			fmt.Fprintf(&b, "gpu%d/gi%d/access %d\n", g, gi, GICapMinor(g, gi))
			for ci := range migComputeInstances {
				fmt.Fprintf(&b, "gpu%d/gi%d/ci%d/access %d\n", g, gi, ci, CICapMinor(g, gi, ci))
			}
		}
	}
	return b.Bytes()
}

// MIGCaps makes the nvidia-caps device nodes of GPU instances gis (each
// with its compute instance 0, as this package's MIG devices have) on the
// GPU of minor number gpu, under dev/nvidia-caps of the root. mknod needs
// root (CAP_MKNOD).
func (r Root) MIGCaps(gpu int, gis ...uint32) error {
	dir := filepath.Join(r.Dir, "dev", "nvidia-caps")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, gi := range gis {
		for _, minor := range []int{GICapMinor(gpu, int(gi)), CICapMinor(gpu, int(gi), 0)} {
			p := filepath.Join(r.Dir, CapPath(minor))
			if err := unix.Mknod(p, unix.S_IFCHR|0o444, int(unix.Mkdev(MajorCaps, uint32(minor)))); err != nil {
				return fmt.Errorf("mknod %s: %w", p, err)
			}
		}
	}
	return nil
}

// WriteProcDriver makes dir stand for /proc/driver of a driver with gpus
// GPUs: dir/nvidia-caps/mig-minors (MIGMinors).
func WriteProcDriver(dir string, gpus int) error {
	caps := filepath.Join(dir, "nvidia-caps")
	if err := os.MkdirAll(caps, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(caps, "mig-minors"), MIGMinors(gpus), 0o444)
}

// procDriver is where the kernel shows the NVIDIA driver's files.
const procDriver = "/proc/driver"

// MountProcDriver bind-mounts dir (WriteProcDriver's) over /proc/driver,
// so that nvcdi finds the fake GPUs' MIG capabilities there. It is for the
// agent of the real-node tests, in its own container only: it refuses to
// run unless its process is the first of its PID namespace (PID 1: a
// container's entrypoint; on a host it would hide the host's
// /proc/driver), or where /proc/driver/nvidia-caps exists (a real driver).
// It makes the container's /proc a private mount first, so the bind
// propagates nowhere. It needs CAP_SYS_ADMIN: a privileged container.
func MountProcDriver(dir string) error {
	if pid := os.Getpid(); pid != 1 {
		return fmt.Errorf("mount the fake %s: the agent is process %d, not its container's first process; refusing to mount over the host's", procDriver, pid)
	}
	if _, err := os.Stat(filepath.Join(procDriver, "nvidia-caps")); err == nil {
		return fmt.Errorf("mount the fake %s: %s/nvidia-caps exists: a real NVIDIA driver is loaded", procDriver, procDriver)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("mount the fake %s: %w", procDriver, err)
	}
	if err := unix.Mount("", "/proc", "", unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make /proc a private mount: %w", err)
	}
	if err := unix.Mount(dir, procDriver, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s over %s: %w", dir, procDriver, err)
	}
	return nil
}
