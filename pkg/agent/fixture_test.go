package agent

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuadmit/gpuadmit/internal/nvmlreading"
)

// readings are the NVML dumps taken on real GPUs (shared/data/nvml, copied
// byte for byte into pkg/allocator/testdata, whose tests check the copy).
var readings = filepath.Join("..", "allocator", "testdata", "nvml")

// reading is a raw NVML probe dump, in NVML's own terms, so that a fake
// device can answer exactly what the real GPU answered.
type reading struct {
	name                   string
	memoryMiB              int64
	migRet                 nvml.Return
	migCurrent, migPending int
	profiles               map[int]profileReading // by profile index
	rets                   map[int]nvml.Return    // indices the GPU refused
}

type profileReading struct {
	name       string // as NVML names it: "MIG 1g.10gb"
	info       nvml.GpuInstanceProfileInfo
	placements []nvml.GpuInstancePlacement
}

// readReading reads a dump in testdata (package nvmlreading parses it) into NVML's terms.
func readReading(t *testing.T, file string) reading {
	t.Helper()
	in, err := nvmlreading.Read(filepath.Join(readings, file))
	if err != nil {
		t.Fatal(err)
	}
	r := reading{name: in.Name, memoryMiB: in.MemoryMiB, profiles: map[int]profileReading{}, rets: map[int]nvml.Return{}}
	if in.MIG != nil {
		r.migRet, r.migCurrent, r.migPending = nvml.Return(in.MIG.Return), in.MIG.Current, in.MIG.Pending
	}
	for index, ret := range in.Refused {
		r.rets[index] = nvml.Return(ret)
	}
	for _, p := range in.Profiles {
		r.profiles[p.Index] = profileReading{
			name: "MIG " + p.Name,
			info: nvml.GpuInstanceProfileInfo{
				Id: uint32(p.ID), SliceCount: uint32(p.Slices), InstanceCount: uint32(p.Instances),
				MultiprocessorCount: uint32(p.SMs), CopyEngineCount: uint32(p.CopyEngines), MemorySizeMB: uint64(p.MemoryMiB),
			},
			placements: placements(p.Placements),
		}
	}
	return r
}

func placements(ps []nvmlreading.Placement) []nvml.GpuInstancePlacement {
	out := make([]nvml.GpuInstancePlacement, len(ps))
	for i, p := range ps {
		out[i] = nvml.GpuInstancePlacement{Start: uint32(p.Start), Size: uint32(p.Size)}
	}
	return out
}

// device is a fake GPU that answers as the GPU of the reading did. Lost
// makes it answer ERROR_GPU_IS_LOST, as a GPU fallen off the bus does.
type device struct {
	*mock.Device
	uuid string
	lost atomic.Bool
}

func (r reading) device(uuid string) *device {
	d := &device{Device: &mock.Device{}, uuid: uuid}
	d.GetUUIDFunc = func() (string, nvml.Return) { return uuid, nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return r.name, nvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if d.lost.Load() {
			return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
		}
		return nvml.Memory{Total: uint64(r.memoryMiB) << 20}, nvml.SUCCESS
	}
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return r.migCurrent, r.migPending, r.migRet }
	d.GetGpuInstanceProfileInfoFunc = r.profileInfo
	d.GetGpuInstancePossiblePlacementsFunc = r.possiblePlacements
	d.GetGpuInstancesFunc = func(*nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) { return nil, nvml.SUCCESS }
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, nvml.SUCCESS }
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	return d
}

// profileInfo answers as the reading: what it read, the return code it got,
// and for indices it did not list (the H200 dump lists only supported ones)
// what NVML answers there: not supported below the profile count, an
// invalid argument from it on.
func (r reading) profileInfo(index int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if p, ok := r.profiles[index]; ok {
		return p.info, nvml.SUCCESS
	}
	if ret, ok := r.rets[index]; ok {
		return nvml.GpuInstanceProfileInfo{}, ret
	}
	if index < nvml.GPU_INSTANCE_PROFILE_COUNT {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
}

// possiblePlacements answers by profile id, as NVML does.
func (r reading) possiblePlacements(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
	for _, p := range r.profiles {
		if p.info.Id == info.Id {
			return p.placements, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_INVALID_ARGUMENT
}

// names is the ProfileNamer of the GPU the reading came from.
func (r reading) names(_ nvml.Device, index int) (string, nvml.Return) {
	if p, ok := r.profiles[index]; ok {
		return p.name, nvml.SUCCESS
	}
	return "", nvml.ERROR_NOT_SUPPORTED
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
