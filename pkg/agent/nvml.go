package agent

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// DeviceLister is the part of NVML that finds GPUs. go-nvml's library
// (nvml.New()) and its mocks (mock/dgxa100) satisfy it; the devices it hands
// out are nvml.Device, whose methods this package calls only in the files
// nvml.go, discover.go and health.go, each result checked through nvmlError.
type DeviceLister interface {
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return)
}

// EventSetCreator is the part of NVML health watching needs.
type EventSetCreator interface {
	EventSetCreate() (nvml.EventSet, nvml.Return)
}

// ProfileNamer reads the name NVML gives a GPU instance profile ("MIG
// 1g.10gb"). Discovery uses it when set; without it, names come from the
// catalog (see profileName).
type ProfileNamer func(dev nvml.Device, index int) (string, nvml.Return)

// NVMLProfileName is the ProfileNamer of real hardware: the name field of
// GetGpuInstanceProfileInfoV's version 2. go-nvml's mocks cannot serve it
// (the V handler calls the C library), which is why it is optional.
func NVMLProfileName(dev nvml.Device, index int) (string, nvml.Return) {
	info, ret := dev.GetGpuInstanceProfileInfoV(index).V2()
	if ret != nvml.SUCCESS {
		return "", ret
	}
	b := make([]byte, 0, len(info.Name))
	for _, c := range info.Name {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b), nvml.SUCCESS
}

// nvmlError turns an nvml.Return into a Go error, nil on success, once, at the
// boundary: callers test it with errors.Is(err, nvml.ERROR_NOT_SUPPORTED),
// since nvml.Return is itself an error.
func nvmlError(op string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("nvml %s: %w", op, ret)
}

// absent reports whether ret says a query does not apply to this GPU (a
// profile index the GPU or driver lacks, MIG on a GPU without it), which
// discovery records as "not there" rather than as a failure.
func absent(ret nvml.Return) bool {
	return ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT
}

// profileExtension is the name suffix nvidia-smi gives the GPU instance
// profiles whose index says they differ from the plain one only in engines:
// media extensions ("+me"), graphics, none or all media engines.
func profileExtension(index int) string {
	switch index {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		return "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX:
		return "+gfx"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		return "-me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		return "+me.all"
	}
	return ""
}

// trimMIG drops the "MIG " NVML puts before a profile name.
func trimMIG(name string) string {
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), "MIG "))
}
