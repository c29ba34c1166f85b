// Package cditest builds what CDI generation reads on a GPU node, for tests
// on machines without one: a fake driver root that nvcdi accepts and NVML
// answers for go-nvml's mock. The pieces are package fakegpu's (which the
// real-node tests' agent links too); this package makes them a test's:
// temporary directories, a skip without root.
package cditest

import (
	"errors"
	"os"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"golang.org/x/sys/unix"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
)

// DriverVersion is the fake driver's version: the suffix of its libraries
// and what the fake NVML's SystemGetDriverVersion answers.
const DriverVersion = fakegpu.DriverVersion

// Majors of the fake device nodes (fakegpu's).
const (
	MajorGPU = fakegpu.MajorGPU
	MajorUVM = fakegpu.MajorUVM
)

// RequireEnv makes a test that cannot build a fake driver root (not root)
// fail instead of skip when set to 1, as the e2e runs set it.
const RequireEnv = "GPUADMIT_REQUIRE_E2E"

// Root is a fake driver root, also the dev root (fakegpu.MakeRoot's).
type Root = fakegpu.Root

// NewRoot builds a driver root in a temporary directory with a device node
// /dev/nvidia<m> for each minor m. It needs root for mknod: without it the
// test is skipped, saying so, or fails under GPUADMIT_REQUIRE_E2E=1.
func NewRoot(t testing.TB, minors ...int) Root {
	t.Helper()
	r, err := fakegpu.MakeRoot(t.TempDir(), "", minors...)
	if errors.Is(err, unix.EPERM) && os.Getenv(RequireEnv) != "1" {
		t.Skipf("SKIPPED, NOT TESTED: a fake driver root needs mknod of character devices, which needs root (CAP_MKNOD): %v; run as root, or set %s=1 to fail instead", err, RequireEnv)
	}
	if err != nil {
		t.Fatalf("fake driver root: %v", err)
	}
	return r
}

// Teach makes lib and its GPUs answer every NVML call nvcdi and go-nvlib
// make for GPUs without MIG, leaving alone what is already set: the driver
// version, Init and Shutdown (nvcdi brackets each query with them), the
// symbol lookups go-nvlib guards MIG calls with, the handles by UUID, and
// each GPU's index, minor number (its index), PCI bus ID and MIG state.
// Each GPU must answer GetUUID.
func Teach(lib *mock.Interface, gpus ...*mock.Device) { fakegpu.Teach(lib, gpus...) }

// PciInfo is GPU i's PCI address, on a bus no machine running the tests
// has ("0000:e<i>:00.0"), so nvcdi finds no DRM nodes of a real GPU in /sys.
func PciInfo(i int) nvml.PciInfo { return fakegpu.PciInfo(i) }

// UUID is fake GPU i's UUID. nvcdi takes only NVML's UUID format
// ("GPU-" and an RFC 4122 UUID) for a UUID.
func UUID(i int) string { return fakegpu.UUID(i) }

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
