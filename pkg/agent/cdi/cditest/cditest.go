// Package cditest builds what CDI generation reads on a GPU node, for tests
// on machines without one: a fake driver root that nvcdi accepts and NVML
// answers for go-nvml's mock. It follows the fake driver root of NVIDIA's
// k8s-dra-driver-gpu CPU-only CI (hack/ci/mock-nvml): real character device
// nodes (major 195 for the GPUs and nvidiactl, another major for UVM) and
// the driver's versioned libraries, whose suffix nvcdi takes as the driver
// version.
package cditest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"golang.org/x/sys/unix"
)

// DriverVersion is the fake driver's version: the suffix of its libraries
// and what the fake NVML's SystemGetDriverVersion answers.
const DriverVersion = "580.95.05"

// Majors of the fake device nodes: NVIDIA's GPUs and control device are
// 195; nvidia-uvm gets a dynamic major, 510 in NVIDIA's CI.
const (
	MajorGPU = 195
	MajorUVM = 510
)

// RequireEnv makes a test that cannot build a fake driver root (not root)
// fail instead of skip when set to 1, as the e2e runs set it.
const RequireEnv = "GPUADMIT_REQUIRE_E2E"

// Root is a fake driver root, also the dev root.
type Root struct {
	// Dir is the root.
	Dir string
	// LibDir is where the driver's libraries are, under Dir.
	LibDir string
	// HookPath is an executable nvidia-cdi-hook under Dir.
	HookPath string
}

// NewRoot builds a driver root in a temporary directory with a device node
// /dev/nvidia<m> for each minor m. It needs root for mknod: without it the
// test is skipped, saying so, or fails under GPUADMIT_REQUIRE_E2E=1.
func NewRoot(t testing.TB, minors ...int) Root {
	t.Helper()
	r := Root{Dir: t.TempDir()}
	r.LibDir = filepath.Join(r.Dir, "usr", "lib64")
	r.HookPath = filepath.Join(r.Dir, "usr", "bin", "nvidia-cdi-hook")
	if err := r.devices(minors); err != nil {
		if errors.Is(err, unix.EPERM) && os.Getenv(RequireEnv) != "1" {
			t.Skipf("SKIPPED, NOT TESTED: a fake driver root needs mknod of character devices, which needs root (CAP_MKNOD): %v; run as root, or set %s=1 to fail instead", err, RequireEnv)
		}
		t.Fatalf("fake driver root: %v", err)
	}
	if err := r.files(); err != nil {
		t.Fatalf("fake driver root: %v", err)
	}
	return r
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

// files makes the driver's libraries (empty files do: nvcdi reads their
// names, not their contents), their SONAME links, and the hook.
func (r Root) files() error {
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
	if err := os.MkdirAll(filepath.Dir(r.HookPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(r.HookPath, []byte("#!/bin/sh\nexit 0\n"), 0o755)
}

// Lib returns the host path of a driver library in the root: Lib("libcuda.so") is
// ".../usr/lib64/libcuda.so.<DriverVersion>".
func (r Root) Lib(name string) string {
	return filepath.Join(r.LibDir, name+"."+DriverVersion)
}

// Teach makes lib and its GPUs answer every NVML call nvcdi and go-nvlib
// make for GPUs without MIG, leaving alone what is already set: the driver
// version, Init and Shutdown (nvcdi brackets each query with them), the
// symbol lookups go-nvlib guards MIG calls with, the handles by UUID, and
// each GPU's index, minor number (its index), PCI bus ID and MIG state.
// Each GPU must answer GetUUID.
func Teach(lib *mock.Interface, gpus ...*mock.Device) {
	orDefault(&lib.InitFunc, func() nvml.Return { return nvml.SUCCESS })
	orDefault(&lib.ShutdownFunc, func() nvml.Return { return nvml.SUCCESS })
	orDefault(&lib.SystemGetDriverVersionFunc, func() (string, nvml.Return) { return DriverVersion, nvml.SUCCESS })
	orDefault(&lib.ExtensionsFunc, func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
	})
	orDefault(&lib.DeviceGetHandleByUUIDFunc, func(uuid string) (nvml.Device, nvml.Return) {
		for _, g := range gpus {
			if u, _ := g.GetUUID(); u == uuid {
				return g, nvml.SUCCESS
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	})
	for i, g := range gpus {
		teachGPU(g, i)
	}
}

func teachGPU(g *mock.Device, i int) {
	orDefault(&g.GetIndexFunc, func() (int, nvml.Return) { return i, nvml.SUCCESS })
	orDefault(&g.GetMinorNumberFunc, func() (int, nvml.Return) { return i, nvml.SUCCESS })
	orDefault(&g.GetPciInfoFunc, func() (nvml.PciInfo, nvml.Return) { return PciInfo(i), nvml.SUCCESS })
	orDefault(&g.IsMigDeviceHandleFunc, func() (bool, nvml.Return) { return false, nvml.SUCCESS })
	orDefault(&g.GetNameFunc, func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS })
	orDefault(&g.GetMigModeFunc, func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED })
	orDefault(&g.GetMaxMigDeviceCountFunc, func() (int, nvml.Return) { return 0, nvml.SUCCESS })
}

// PciInfo is GPU i's PCI address, on a bus no machine running the tests
// has ("0000:e<i>:00.0"), so nvcdi finds no DRM nodes of a real GPU in /sys.
func PciInfo(i int) nvml.PciInfo {
	var info nvml.PciInfo
	for j, c := range fmt.Sprintf("00000000:E%X:00.0", i) {
		info.BusId[j] = int8(c)
	}
	return info
}

// UUID is fake GPU i's UUID. nvcdi takes only NVML's UUID format
// ("GPU-" and an RFC 4122 UUID) for a UUID.
func UUID(i int) string { return fmt.Sprintf("GPU-%08d-0000-4000-8000-000000000000", i) }

// GPUs returns n fake GPUs answering their UUIDs, UUID(i).
func GPUs(n int) []*mock.Device {
	out := make([]*mock.Device, n)
	for i := range out {
		uuid := UUID(i)
		out[i] = &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS }}
	}
	return out
}

// NVML is a node's NVML with gpus, taught by Teach.
func NVML(gpus ...*mock.Device) *mock.Interface {
	lib := &mock.Interface{
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(gpus), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(gpus) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return gpus[i], nvml.SUCCESS
		},
	}
	Teach(lib, gpus...)
	return lib
}

// orDefault sets the mock's function f to def unless a test set it.
func orDefault[F any](f *F, def F) {
	if reflect.ValueOf(*f).IsNil() {
		*f = def
	}
}
