package dra

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
)

// A GPU that discovery could not read stays unhealthy, so it is published
// in no ResourceSlice, even though the health watcher has nothing against
// it; the others are published.
func TestAGPUDiscoveryCouldNotReadIsNotPublished(t *testing.T) {
	server := dgxa100.New()
	server.DeviceGetCountFunc = func() (int, nvml.Return) { return 2, nvml.SUCCESS }
	server.Devices[1].(*dgxa100.Device).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
	}
	gpus, _, err := New(server, nil, nil, Options{NodeName: "n"}).gpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || !gpus[0].Healthy || gpus[1].Healthy {
		t.Fatalf("GPUs %+v: want GPU 0 healthy, GPU 1 not", gpus)
	}
	if devs := Devices(gpus, DeviceOptions{}); len(devs) != 1 || devs[0].Name != GPUDeviceName(0) {
		t.Errorf("published devices %v, want gpu-0 alone", devs)
	}
}
