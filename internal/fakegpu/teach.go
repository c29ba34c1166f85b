package fakegpu

import (
	"fmt"
	"reflect"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// DriverVersion is the fake driver's version: the suffix of its libraries
// (MakeRoot) and what the fake NVML's SystemGetDriverVersion answers.
const DriverVersion = "580.95.05"

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

// orDefault sets the mock's function f to def unless a test set it.
func orDefault[F any](f *F, def F) {
	if reflect.ValueOf(*f).IsNil() {
		*f = def
	}
}
