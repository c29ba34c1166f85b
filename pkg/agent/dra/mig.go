package dra

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuadmit/gpuadmit/pkg/agent"
)

// ReadMIGUUIDs reads the UUID of every MIG device on the node, by GPU and
// GPU instance: what a MIG instance's CDI edits are made for. NVIDIA's
// tools also take "<gpu index>:<mig index>", but the MIG index is NVML's
// MIG device index, not the GI id, and moves when instances change; the
// UUID does not. A GPU instance split into several
// compute instances is several MIG devices; the first one names it.
func ReadMIGUUIDs(nv agent.DeviceLister) (map[InstanceKey]string, error) {
	n, ret := nv.DeviceGetCount()
	if err := nvmlErr("device count", ret); err != nil {
		return nil, err
	}
	out := map[InstanceKey]string{}
	for i := range n {
		dev, ret := nv.DeviceGetHandleByIndex(i)
		if err := nvmlErr("device handle", ret); err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
		if err := readMIGDevices(dev, out); err != nil {
			return nil, fmt.Errorf("GPU %d: %w", i, err)
		}
	}
	return out, nil
}

func readMIGDevices(dev nvml.Device, out map[InstanceKey]string) error {
	if mode, _, ret := dev.GetMigMode(); ret != nvml.SUCCESS || mode != nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	parent, ret := dev.GetUUID()
	if err := nvmlErr("uuid", ret); err != nil {
		return err
	}
	count, ret := dev.GetMaxMigDeviceCount()
	if err := nvmlErr("MIG device count", ret); err != nil {
		return err
	}
	for j := range count {
		mig, ret := dev.GetMigDeviceHandleByIndex(j)
		if ret == nvml.ERROR_NOT_FOUND {
			continue
		}
		if err := nvmlErr(fmt.Sprintf("MIG device %d", j), ret); err != nil {
			return err
		}
		gi, ret := mig.GetGpuInstanceId()
		if err := nvmlErr(fmt.Sprintf("GPU instance of MIG device %d", j), ret); err != nil {
			return err
		}
		uuid, ret := mig.GetUUID()
		if err := nvmlErr(fmt.Sprintf("uuid of MIG device %d", j), ret); err != nil {
			return err
		}
		if key := (InstanceKey{GPU: parent, GI: gi}); out[key] == "" {
			out[key] = uuid
		}
	}
	return nil
}

// nvmlErr turns an nvml.Return into a Go error once, at the boundary.
func nvmlErr(op string, ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("nvml %s: %w", op, ret)
}
