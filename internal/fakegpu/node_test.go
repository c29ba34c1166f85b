package fakegpu

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// A node read from its configuration answers as the readings' GPUs, and
// the control file, edited while it runs, loses a GPU: one critical XID 79
// for it, its queries answer ERROR_GPU_IS_LOST, and it answers again once
// it leaves the list.
func TestControlFileLosesAGPU(t *testing.T) {
	dir := t.TempDir()
	readings, err := filepath.Abs(filepath.Join("..", "..", "pkg", "allocator", "testdata", "nvml"))
	if err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "control.json")
	n, err := New(Config{
		Readings: readings,
		GPUs:     []GPUConfig{{Reading: "h100-80gb-hbm3-raw.txt"}, {Reading: "h200.txt", UUID: "GPU-h200"}},
		Control:  control,
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	n.poll = time.Millisecond
	if c, _ := n.DeviceGetCount(); c != 2 {
		t.Fatalf("DeviceGetCount = %d, want 2", c)
	}
	h200, _ := n.DeviceGetHandleByUUID("GPU-h200")
	if name, _ := h200.GetName(); name != "NVIDIA H200" {
		t.Errorf("GPU-h200 is %q, want NVIDIA H200", name)
	}
	set, _ := n.EventSetCreate()
	if _, ret := set.Wait(1); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait without a control file = %v, want a timeout", ret)
	}
	if err := WriteControl(control, Control{Lost: []string{"GPU-h200"}}); err != nil {
		t.Fatal(err)
	}
	ev, ret := set.Wait(1)
	if ret != nvml.SUCCESS || ev.EventType != nvml.EventTypeXidCriticalError || ev.EventData != XidFallenOffTheBus || ev.Device != h200 {
		t.Errorf("Wait after losing GPU-h200 = %+v, %v; want XID 79 of GPU-h200", ev, ret)
	}
	if _, ret := set.Wait(1); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("second Wait = %v, want a timeout: the loss is reported once", ret)
	}
	if _, ret := h200.GetMemoryInfo(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("lost GPU's GetMemoryInfo = %v, want ERROR_GPU_IS_LOST", ret)
	}
	if err := WriteControl(control, Control{Failed: []string{"GPU-h200"}}); err != nil {
		t.Fatal(err)
	}
	ev, ret = set.Wait(1)
	if ret != nvml.SUCCESS || ev.EventData != XidDoubleBitECC || ev.Device != h200 {
		t.Errorf("Wait after GPU-h200 failed = %+v, %v; want XID 48 of GPU-h200", ev, ret)
	}
	if _, ret := h200.GetMemoryInfo(); ret != nvml.SUCCESS {
		t.Errorf("GetMemoryInfo of a failed GPU that came back from the bus = %v, want success", ret)
	}
	if err := WriteControl(control, Control{}); err != nil {
		t.Fatal(err)
	}
	if _, ret := set.Wait(1); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait once every GPU is well = %v, want a timeout", ret)
	}
}

// A configuration without GPUs is refused, naming what is missing.
func TestConfigNeedsGPUs(t *testing.T) {
	if _, err := New(Config{Readings: "x"}, t.TempDir()); err == nil {
		t.Error("New accepted a configuration without GPUs")
	}
}
