package fakegpu

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Majors of the fake device nodes: NVIDIA's GPUs and control device are
// 195; nvidia-uvm gets a dynamic major, 510 in NVIDIA's CI.
const (
	MajorGPU = 195
	MajorUVM = 510
)

// Root is a fake driver root, also the dev root. It follows the fake
// driver root of NVIDIA's k8s-dra-driver-gpu CPU-only CI (hack/ci/mock-nvml):
// real character device nodes and the driver's versioned libraries, whose
// suffix nvcdi takes as the driver version.
type Root struct {
	// Dir is the root.
	Dir string
	// LibDir is where the driver's libraries are, under Dir.
	LibDir string
	// HookPath is an executable nvidia-cdi-hook under Dir.
	HookPath string
}

// MakeRoot builds a driver root in dir (which must exist) with a device
// node dev/nvidia<m> for each minor m, dev/nvidiactl, dev/nvidia-uvm and
// dev/nvidia-uvm-tools, the driver's libraries, and usr/bin/nvidia-cdi-hook:
// a copy of the file at hook, or with hook empty a script that does
// nothing (enough for a spec that nothing runs). mknod needs root
// (CAP_MKNOD): without it the error wraps unix.EPERM.
func MakeRoot(dir string, hook string, minors ...int) (Root, error) {
	r := Root{Dir: dir}
	r.LibDir = filepath.Join(r.Dir, "usr", "lib64")
	r.HookPath = filepath.Join(r.Dir, "usr", "bin", "nvidia-cdi-hook")
	if err := r.devices(minors); err != nil {
		return r, err
	}
	if err := r.libraries(); err != nil {
		return r, err
	}
	return r, r.hook(hook)
}

// devices makes the device nodes nvcdi looks for under dev/.
func (r Root) devices(minors []int) error {
	dev := filepath.Join(r.Dir, "dev")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		return err
	}
	nodes := map[string][2]uint32{"nvidiactl": {MajorGPU, 255}, "nvidia-uvm": {MajorUVM, 0}, "nvidia-uvm-tools": {MajorUVM, 1}}
	for _, m := range minors {
		nodes[fmt.Sprintf("nvidia%d", m)] = [2]uint32{MajorGPU, uint32(m)}
	}
	for name, n := range nodes {
		p := filepath.Join(dev, name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(n[0], n[1]))); err != nil {
			return fmt.Errorf("mknod %s: %w", p, err)
		}
	}
	return nil
}

// libraries makes the driver's libraries (empty files do: nvcdi reads
// their names, not their contents) and their SONAME links.
func (r Root) libraries() error {
	if err := os.MkdirAll(r.LibDir, 0o755); err != nil {
		return err
	}
	for _, lib := range []string{"libcuda.so", "libnvidia-ml.so", "libnvidia-ptxjitcompiler.so"} {
		versioned := lib + "." + DriverVersion
		if err := os.WriteFile(filepath.Join(r.LibDir, versioned), nil, 0o755); err != nil {
			return err
		}
		if err := os.Symlink(versioned, filepath.Join(r.LibDir, lib+".1")); err != nil {
			return err
		}
	}
	return nil
}

// hook installs nvidia-cdi-hook: a copy of the file at from, or a script
// that does nothing.
func (r Root) hook(from string) error {
	if err := os.MkdirAll(filepath.Dir(r.HookPath), 0o755); err != nil {
		return err
	}
	b := []byte("#!/bin/sh\nexit 0\n")
	if from != "" {
		var err error
		if b, err = os.ReadFile(from); err != nil {
			return fmt.Errorf("nvidia-cdi-hook: %w", err)
		}
	}
	return os.WriteFile(r.HookPath, b, 0o755)
}

// Lib returns the host path of a driver library in the root: Lib("libcuda.so") is
// ".../usr/lib64/libcuda.so.<DriverVersion>".
func (r Root) Lib(name string) string {
	return filepath.Join(r.LibDir, name+"."+DriverVersion)
}
