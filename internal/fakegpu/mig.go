package fakegpu

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// instance is a GPU instance of a fake GPU in MIG mode.
type instance struct {
	id        uint32
	profileID uint32
	placement nvml.GpuInstancePlacement
	uuid      string // its MIG device's
}

// migState is a fake GPU's MIG instances, and which of them are gone.
type migState struct {
	mu        sync.Mutex
	instances []instance
	gone      map[uint32]bool
}

// live are the instances not gone, in ID order.
func (m *migState) live() []instance {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(m.instances), func(in instance) bool { return m.gone[in.id] })
}

// setGone marks the instances with the given IDs gone, the rest there.
func (m *migState) setGone(ids []uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gone = map[uint32]bool{}
	for _, id := range ids {
		m.gone[id] = true
	}
}

// MIGUUID is the UUID of the MIG device of GPU instance gi on GPU i, in
// NVML's format ("MIG-" and an RFC 4122 UUID).
func MIGUUID(i int, gi uint32) string {
	return fmt.Sprintf("MIG-%08d-%04d-4000-8000-000000000000", i, gi)
}

// enableMIG puts the device in MIG mode with a GPU instance of each named
// profile ("3g.40gb", as NVML names it without "MIG "), IDs 1, 2, … in
// order, each at the first placement of its profile that overlaps no
// earlier instance. It fails on a profile the reading lacks or that no
// longer fits.
func (d *Device) enableMIG(index int, profiles []string) error {
	var used []nvml.GpuInstancePlacement
	for n, name := range profiles {
		p, ok := d.reading.profileNamed(name)
		if !ok {
			return fmt.Errorf("%s has no MIG profile %q", d.reading.name, name)
		}
		pl, ok := firstFree(p.placements, used)
		if !ok {
			return fmt.Errorf("MIG profile %s (instance %d) does not fit beside the instances before it", name, n+1)
		}
		used = append(used, pl)
		gi := uint32(n + 1)
		d.mig.instances = append(d.mig.instances, instance{id: gi, profileID: p.info.Id, placement: pl, uuid: MIGUUID(index, gi)})
	}
	d.GetMigModeFunc = func() (int, int, nvml.Return) {
		return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
	}
	d.GetGpuInstancesFunc = d.gpuInstances
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return len(d.mig.instances), nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = d.migDevice
	d.GetGpuInstanceByIdFunc = d.gpuInstanceByID
	return nil
}

// gpuInstances answers GetGpuInstances: the live instances of the profile.
func (d *Device) gpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	var out []nvml.GpuInstance
	for _, in := range d.mig.live() {
		if in.profileID == info.Id {
			out = append(out, d.gpuInstance(in))
		}
	}
	return out, nvml.SUCCESS
}

// gpuInstanceByID answers GetGpuInstanceById: the live instance of that
// ID, or not found, as NVML answers for an ID no instance has.
func (d *Device) gpuInstanceByID(id int) (nvml.GpuInstance, nvml.Return) {
	for _, in := range d.mig.live() {
		if int(in.id) == id {
			return d.gpuInstance(in), nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// gpuInstance is a GPU instance with one compute instance, ID 0, that
// takes all of it (what `nvidia-smi mig -cgi <profile> -C` creates, and
// what each MIG device of this package stands for). It answers the compute
// instance profile of that compute instance and no other: go-nvlib's
// MigDevice.GetProfile, which nvcdi calls for a MIG device's edits, looks
// the MIG device's compute instance up by its profile.
func (d *Device) gpuInstance(in instance) nvml.GpuInstance {
	p, _ := d.reading.profileByID(in.profileID)
	gi := &mock.GpuInstance{}
	gii := nvml.GpuInstanceInfo{Device: d, Id: in.id, ProfileId: in.profileID, Placement: in.placement}
	ciProfile, ciInfo := fullComputeInstance(p.info)
	cii := nvml.ComputeInstanceInfo{Device: d, GpuInstance: gi, Id: 0, ProfileId: ciInfo.Id,
		Placement: nvml.ComputeInstancePlacement{Start: 0, Size: ciInfo.SliceCount}}
	ci := &mock.ComputeInstance{GetInfoFunc: func() (nvml.ComputeInstanceInfo, nvml.Return) { return cii, nvml.SUCCESS }}
	gi.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) { return gii, nvml.SUCCESS }
	gi.GetComputeInstanceByIdFunc = func(id int) (nvml.ComputeInstance, nvml.Return) {
		if id != 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return ci, nvml.SUCCESS
	}
	gi.GetComputeInstanceProfileInfoFunc = func(profile, engine int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		switch {
		case profile == ciProfile && engine == nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
			return ciInfo, nvml.SUCCESS
		case profile >= 0 && profile < nvml.COMPUTE_INSTANCE_PROFILE_COUNT && engine >= 0 && engine < nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT:
			return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	return gi
}

// ciProfiles are NVML's compute instance profiles by slice count.
var ciProfiles = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// fullComputeInstance is the compute instance profile (its index and
// info) that takes every slice of a GPU instance of profile gi. NVML gives
// a compute instance profile the ID of its index (nvidia-smi mig -lcip).
func fullComputeInstance(gi nvml.GpuInstanceProfileInfo) (int, nvml.ComputeInstanceProfileInfo) {
	index := ciProfiles[gi.SliceCount]
	return index, nvml.ComputeInstanceProfileInfo{
		Id: uint32(index), SliceCount: gi.SliceCount, InstanceCount: 1,
		MultiprocessorCount: gi.MultiprocessorCount, SharedCopyEngineCount: gi.CopyEngineCount,
	}
}

// migDevice answers GetMigDeviceHandleByIndex: the MIG device of the j-th
// live instance, or not found.
func (d *Device) migDevice(j int) (nvml.Device, nvml.Return) {
	live := d.mig.live()
	if j < 0 || j >= len(live) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return d.migHandle(j, live[j]), nvml.SUCCESS
}

// migByUUID is the MIG device of a live instance by its UUID.
func (d *Device) migByUUID(uuid string) (nvml.Device, bool) {
	for j, in := range d.mig.live() {
		if in.uuid == uuid {
			return d.migHandle(j, in), true
		}
	}
	return nil, false
}

// migHandle is the MIG device of instance in, the j-th live one: it
// answers what the agent's discovery, nvcdi and go-nvlib ask of a MIG
// device (its UUID, index, GPU and compute instance, parent, and
// attributes: the GPU instance's SMs, copy engines, slices and memory).
func (d *Device) migHandle(j int, in instance) nvml.Device {
	p, _ := d.reading.profileByID(in.profileID)
	attrs := nvml.DeviceAttributes{
		MultiprocessorCount: p.info.MultiprocessorCount, SharedCopyEngineCount: p.info.CopyEngineCount,
		GpuInstanceSliceCount: p.info.SliceCount, ComputeInstanceSliceCount: p.info.SliceCount,
		MemorySizeMB: p.info.MemorySizeMB,
	}
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return in.uuid, nvml.SUCCESS },
		GetIndexFunc:                           func() (int, nvml.Return) { return j, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return int(in.id), nvml.SUCCESS },
		GetComputeInstanceIdFunc:               func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		GetAttributesFunc:                      func() (nvml.DeviceAttributes, nvml.Return) { return attrs, nvml.SUCCESS },
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return d, nvml.SUCCESS },
	}
}

// profileByID is the reading's profile of that NVML profile ID.
func (r Reading) profileByID(id uint32) (profileReading, bool) {
	for _, p := range r.profiles {
		if p.info.Id == id {
			return p, true
		}
	}
	return profileReading{}, false
}

// profileNamed is the reading's profile of that name ("3g.40gb").
func (r Reading) profileNamed(name string) (profileReading, bool) {
	for _, index := range slices.Sorted(maps.Keys(r.profiles)) {
		if p := r.profiles[index]; p.name == "MIG "+name {
			return p, true
		}
	}
	return profileReading{}, false
}

// firstFree is the first placement that overlaps none of used.
func firstFree(placements, used []nvml.GpuInstancePlacement) (nvml.GpuInstancePlacement, bool) {
	for _, p := range placements {
		if !slices.ContainsFunc(used, func(u nvml.GpuInstancePlacement) bool {
			return p.Start < u.Start+u.Size && u.Start < p.Start+p.Size
		}) {
			return p, true
		}
	}
	return nvml.GpuInstancePlacement{}, false
}
