package fakegpu

import (
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/gpuadmit/gpuadmit/internal/nvmlreading"
)

// Reading is an NVML probe dump taken on a real GPU, in NVML's own terms,
// so that a fake device answers exactly what the real GPU answered.
type Reading struct {
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

// ReadReading reads a dump (package nvmlreading parses it) into NVML's terms.
func ReadReading(path string) (Reading, error) {
	in, err := nvmlreading.Read(path)
	if err != nil {
		return Reading{}, err
	}
	r := Reading{name: in.Name, memoryMiB: in.MemoryMiB, profiles: map[int]profileReading{}, rets: map[int]nvml.Return{}}
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
	return r, nil
}

func placements(ps []nvmlreading.Placement) []nvml.GpuInstancePlacement {
	out := make([]nvml.GpuInstancePlacement, len(ps))
	for i, p := range ps {
		out[i] = nvml.GpuInstancePlacement{Start: uint32(p.Start), Size: uint32(p.Size)}
	}
	return out
}

// Device is a fake GPU that answers as the GPU of its reading did. Lost
// makes it answer ERROR_GPU_IS_LOST, as a GPU fallen off the bus does.
type Device struct {
	*mock.Device
	// UUID is what GetUUID answers.
	UUID string
	// Lost says the GPU has fallen off the bus.
	Lost    atomic.Bool
	reading Reading
	mig     migState
}

// Device is a fake GPU answering as the reading's GPU, with the given UUID.
// It answers discovery's and health's calls; Teach adds nvcdi's.
func (r Reading) Device(uuid string) *Device {
	d := &Device{Device: &mock.Device{}, UUID: uuid, reading: r}
	d.GetUUIDFunc = func() (string, nvml.Return) { return uuid, nvml.SUCCESS }
	d.GetNameFunc = func() (string, nvml.Return) { return r.name, nvml.SUCCESS }
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		if d.Lost.Load() {
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
func (r Reading) profileInfo(index int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
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
func (r Reading) possiblePlacements(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstancePlacement, nvml.Return) {
	for _, p := range r.profiles {
		if p.info.Id == info.Id {
			return p.placements, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_INVALID_ARGUMENT
}

// ProfileName is the name NVML gives profile index on the reading's GPU
// ("MIG 1g.10gb"): the agent's ProfileNamer for devices of this reading,
// as go-nvml's mock cannot serve the V2 query real hardware answers.
func (r Reading) ProfileName(_ nvml.Device, index int) (string, nvml.Return) {
	if p, ok := r.profiles[index]; ok {
		return p.name, nvml.SUCCESS
	}
	return "", nvml.ERROR_NOT_SUPPORTED
}

// ProfileName is the ProfileNamer of a node of fake GPUs of any readings:
// each Device's own reading names its profiles.
func ProfileName(dev nvml.Device, index int) (string, nvml.Return) {
	d, ok := dev.(*Device)
	if !ok {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	return d.reading.ProfileName(dev, index)
}

// Name is the GPU's name as NVML reported it ("NVIDIA H100 80GB HBM3").
func (r Reading) Name() string { return r.name }

// MemoryMiB is the GPU's total memory as NVML reported it.
func (r Reading) MemoryMiB() int64 { return r.memoryMiB }

// ProfileMiB is the memory NVML reported for the MIG profile of that name
// ("3g.40gb"), and whether the reading has it.
func (r Reading) ProfileMiB(name string) (int64, bool) {
	p, ok := r.profileNamed(name)
	return int64(p.info.MemorySizeMB), ok
}
