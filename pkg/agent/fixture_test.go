package agent

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuadmit/gpuadmit/internal/fakegpu"
)

// readings are the NVML dumps taken on real GPUs (shared/data/nvml, copied
// byte for byte into pkg/allocator/testdata, whose tests check the copy).
var readings = filepath.Join("..", "allocator", "testdata", "nvml")

// device is a fake GPU answering as a real GPU's reading (fakegpu.Device).
type device = fakegpu.Device

// reading is a raw NVML probe dump, in NVML's own terms, so that a fake
// device can answer exactly what the real GPU answered.
type reading struct{ fakegpu.Reading }

// readReading reads a dump in testdata.
func readReading(t *testing.T, file string) reading {
	t.Helper()
	r, err := fakegpu.ReadReading(filepath.Join(readings, file))
	if err != nil {
		t.Fatal(err)
	}
	return reading{r}
}

func (r reading) device(uuid string) *device { return r.Device(uuid) }

// names is the ProfileNamer of the GPU the reading came from.
func (r reading) names(dev nvml.Device, index int) (string, nvml.Return) {
	return r.ProfileName(dev, index)
}

// fakeNVML is a node's NVML: its devices, and an event set whose events a
// test sends. Wait returns a timeout after a short real pause when nothing
// was sent, as NVML's blocking wait does after its timeout.
type fakeNVML struct {
	mock.Interface
	events chan nvml.EventData
	waits  atomic.Int64 // event waits begun: the health watcher's loop turns
}

func newFakeNVML(devs ...nvml.Device) *fakeNVML {
	f := &fakeNVML{events: make(chan nvml.EventData, 16)}
	f.DeviceGetCountFunc = func() (int, nvml.Return) { return len(devs), nvml.SUCCESS }
	f.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(devs) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return devs[i], nvml.SUCCESS
	}
	f.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
				f.waits.Add(1)
				select {
				case e := <-f.events:
					return e, nvml.SUCCESS
				case <-time.After(2 * time.Millisecond):
					return nvml.EventData{}, nvml.ERROR_TIMEOUT
				}
			},
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}, nvml.SUCCESS
	}
	return f
}

// xid sends a critical XID for dev.
func (f *fakeNVML) xid(dev nvml.Device, xid uint64) {
	f.events <- nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: xid}
}

// h100s returns n fake H100s answering as the H100 reading, UUIDs GPU-h100-<i>.
func h100s(t *testing.T, n int) []*device {
	r := readReading(t, "h100-80gb-hbm3-raw.txt")
	out := make([]*device, n)
	for i := range out {
		out[i] = r.device(fmt.Sprintf("GPU-h100-%d", i))
	}
	return out
}

func nvmlDevices(devs []*device) []nvml.Device {
	out := make([]nvml.Device, len(devs))
	for i, d := range devs {
		out[i] = d
	}
	return out
}
