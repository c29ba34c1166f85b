package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// Discoverer reads a node's GPUs from NVML.
type Discoverer struct {
	// NVML finds the GPUs; required.
	NVML DeviceLister
	// Catalog names the models; nil means allocator.Default().
	Catalog *allocator.Catalog
	// Names reads profile names from NVML; nil names them from the catalog.
	Names ProfileNamer
}

// Discover returns every GPU NVML sees, in index order. A GPU that does not
// answer is kept, unhealthy, with what could be read and why the rest could
// not (GPU.Error), and the others are served: one bad GPU must not take the
// node's good ones out of service. Only a failed device count fails
// discovery, since then no GPU is known at all.
func (d Discoverer) Discover() ([]GPU, error) {
	n, ret := d.NVML.DeviceGetCount()
	if err := nvmlError("device count", ret); err != nil {
		return nil, err
	}
	gpus := make([]GPU, 0, n)
	for i := range n {
		gpus = append(gpus, d.discoverGPU(i))
	}
	return gpus, nil
}

// discoverGPU reads GPU i, marking it unhealthy when NVML does not answer.
func (d Discoverer) discoverGPU(i int) GPU {
	dev, ret := d.NVML.DeviceGetHandleByIndex(i)
	if err := nvmlError("device handle", ret); err != nil {
		return unreadable(GPU{Index: i}, err)
	}
	g, err := d.readGPU(i, dev)
	if err != nil {
		return unreadable(g, err)
	}
	return g
}

// unreadable marks a GPU discovery could not read.
func unreadable(g GPU, err error) GPU {
	g.Healthy, g.Error = false, err.Error()
	return g
}

func (d Discoverer) catalog() *allocator.Catalog {
	if d.Catalog == nil {
		return allocator.Default()
	}
	return d.Catalog
}

// readGPU reads one GPU. On an error the GPU holds what was read before it:
// a UUID, a product, a memory size are each set only when NVML gave them.
func (d Discoverer) readGPU(index int, dev nvml.Device) (GPU, error) {
	g := GPU{Index: index, Healthy: true}
	err := readIdentity(&g, dev)
	model, known := d.catalog().ByProduct(g.Product)
	if g.Product != "" {
		g.Model, g.Known = modelName(g.Product, model, known), known
	}
	if err != nil {
		return g, err
	}
	return g, d.readMIG(&g, dev, model)
}

// readIdentity reads the UUID, the product name and the memory, all three
// even when one fails, so an unhealthy GPU is published with what is known.
func readIdentity(g *GPU, dev nvml.Device) error {
	uuid, uret := dev.GetUUID()
	product, pret := dev.GetName()
	mem, mret := dev.GetMemoryInfo()
	errs := []error{nvmlError("uuid", uret), nvmlError("name", pret), nvmlError("memory", mret)}
	if uret == nvml.SUCCESS {
		g.UUID = uuid
	}
	if pret == nvml.SUCCESS {
		g.Product = product
	}
	if mret == nvml.SUCCESS {
		g.MemoryMiB = int64(mem.Total >> 20)
	}
	return errors.Join(errs...)
}

// modelName is the catalog's name, or the product as GPU Feature Discovery's
// label spells it, which is what pkg/inventory falls back to.
func modelName(product string, m allocator.Model, known bool) string {
	if known {
		return m.Name
	}
	return strings.Join(strings.Fields(product), "-")
}

// readMIG fills the MIG mode, the profiles and the existing instances.
// Profiles are read even with MIG off (NVML answers either way), so the
// annotation tells what the GPU could be partitioned into.
func (d Discoverer) readMIG(g *GPU, dev nvml.Device, model allocator.Model) error {
	current, pending, ret := dev.GetMigMode()
	if absent(ret) {
		g.MIGMode = MIGUnsupported
		return nil
	}
	if err := nvmlError("MIG mode", ret); err != nil {
		return err
	}
	g.MIGMode = migMode(current)
	if p := migMode(pending); p != g.MIGMode {
		g.MIGPending = p
	}
	infos, err := d.readProfiles(g, dev, model)
	if err != nil || g.MIGMode != MIGEnabled {
		return err
	}
	g.Instances, err = readInstances(dev, g.Profiles, infos)
	return err
}

func migMode(m int) string {
	if m == nvml.DEVICE_MIG_ENABLE {
		return MIGEnabled
	}
	return MIGDisabled
}

// readProfiles reads every GPU instance profile index NVML knows and keeps
// those the GPU supports, in catalog order. It returns NVML's infos by
// profile name, which instance enumeration needs.
func (d Discoverer) readProfiles(g *GPU, dev nvml.Device, model allocator.Model) (map[string]nvml.GpuInstanceProfileInfo, error) {
	infos := map[string]nvml.GpuInstanceProfileInfo{}
	for index := range nvml.GPU_INSTANCE_PROFILE_COUNT {
		info, ret := dev.GetGpuInstanceProfileInfo(index)
		if absent(ret) {
			continue
		}
		if err := nvmlError(fmt.Sprintf("profile %d", index), ret); err != nil {
			return nil, err
		}
		p, err := d.readProfile(dev, index, info, model)
		if err != nil {
			return nil, err
		}
		infos[p.Name] = info
		g.Profiles = append(g.Profiles, p)
	}
	slices.SortFunc(g.Profiles, func(a, b allocator.Profile) int {
		return cmp.Or(cmp.Compare(a.MemoryMiB, b.MemoryMiB), cmp.Compare(a.ComputeSlices, b.ComputeSlices),
			strings.Compare(a.Name, b.Name))
	})
	return infos, nil
}

// readProfile converts one profile. NVML's SliceCount is the compute slices;
// the memory slices are the size of its placements.
func (d Discoverer) readProfile(dev nvml.Device, index int, info nvml.GpuInstanceProfileInfo, model allocator.Model) (allocator.Profile, error) {
	placements, ret := dev.GetGpuInstancePossiblePlacements(&info)
	if err := nvmlError(fmt.Sprintf("placements of profile %d", index), ret); err != nil {
		return allocator.Profile{}, err
	}
	p := allocator.Profile{
		ID: int(info.Id), ComputeSlices: int(info.SliceCount), MemoryMiB: int64(info.MemorySizeMB),
		SMs: int(info.MultiprocessorCount), MaxInstances: int(info.InstanceCount),
	}
	for _, pl := range placements {
		p.Placements = append(p.Placements, allocator.Placement{Start: int(pl.Start), Size: int(pl.Size)})
	}
	if len(p.Placements) > 0 {
		p.MemorySlices = p.Placements[0].Size
	}
	p.Name = d.profileName(dev, index, p, model)
	return p, nil
}

// profileName is NVML's name for the profile when the namer reads one, else
// the catalog model's profile with the same compute and memory slices and
// the same engine extension, else "<g>g.<GiB rounded up>gb" — a guess, and
// only for GPUs neither NVML's v2 query nor the catalog can name.
func (d Discoverer) profileName(dev nvml.Device, index int, p allocator.Profile, model allocator.Model) string {
	if d.Names != nil {
		if name, ret := d.Names(dev, index); ret == nvml.SUCCESS && trimMIG(name) != "" {
			return allocator.NormalizeProfile(trimMIG(name))
		}
	}
	ext := profileExtension(index)
	for _, c := range model.Profiles {
		if c.ComputeSlices == p.ComputeSlices && c.MemorySlices == p.MemorySlices && extension(c.Name) == ext {
			return c.Name
		}
	}
	return fmt.Sprintf("%dg.%dgb%s", p.ComputeSlices, allocator.ShareUnits(p.MemoryMiB, 1024), ext)
}

// extension is the engine suffix of a profile name: "+me" of "1g.10gb+me".
func extension(name string) string {
	if i := strings.IndexAny(name, "+-"); i >= 0 {
		return name[i:]
	}
	return ""
}

// readInstances lists the GPU instances of every profile.
func readInstances(dev nvml.Device, profiles []allocator.Profile, infos map[string]nvml.GpuInstanceProfileInfo) ([]Instance, error) {
	var out []Instance
	for _, p := range profiles {
		info := infos[p.Name]
		gis, ret := dev.GetGpuInstances(&info)
		if err := nvmlError("GPU instances of "+p.Name, ret); err != nil {
			return nil, err
		}
		for _, gi := range gis {
			gii, ret := gi.GetInfo()
			if err := nvmlError("GPU instance info", ret); err != nil {
				return nil, err
			}
			out = append(out, Instance{
				ID: int(gii.Id), Profile: p.Name, MemoryMiB: p.MemoryMiB,
				Placement: allocator.Placement{Start: int(gii.Placement.Start), Size: int(gii.Placement.Size)},
			})
		}
	}
	slices.SortFunc(out, func(a, b Instance) int { return cmp.Compare(a.Placement.Start, b.Placement.Start) })
	return out, nil
}
