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
	return nil
}

// gpuInstances answers GetGpuInstances: the live instances of the profile.
func (d *Device) gpuInstances(info *nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
	var out []nvml.GpuInstance
	for _, in := range d.mig.live() {
		if in.profileID != info.Id {
			continue
		}
		gii := nvml.GpuInstanceInfo{Device: d, Id: in.id, ProfileId: in.profileID, Placement: in.placement}
		out = append(out, &mock.GpuInstance{GetInfoFunc: func() (nvml.GpuInstanceInfo, nvml.Return) { return gii, nvml.SUCCESS }})
	}
	return out, nvml.SUCCESS
}

// migDevice answers GetMigDeviceHandleByIndex: the MIG device of the j-th
// live instance, or not found.
func (d *Device) migDevice(j int) (nvml.Device, nvml.Return) {
	live := d.mig.live()
	if j < 0 || j >= len(live) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	in := live[j]
	return &mock.Device{
		GetUUIDFunc:                            func() (string, nvml.Return) { return in.uuid, nvml.SUCCESS },
		GetGpuInstanceIdFunc:                   func() (int, nvml.Return) { return int(in.id), nvml.SUCCESS },
		IsMigDeviceHandleFunc:                  func() (bool, nvml.Return) { return true, nvml.SUCCESS },
		GetDeviceHandleFromMigDeviceHandleFunc: func() (nvml.Device, nvml.Return) { return d, nvml.SUCCESS },
	}, nvml.SUCCESS
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
