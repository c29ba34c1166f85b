package dra

import (
	"fmt"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi"
	"github.com/gpuadmit/gpuadmit/pkg/agent/cdi/cditest"
	"github.com/gpuadmit/gpuadmit/pkg/allocator"
)

// model returns a catalog model by name.
func model(t testing.TB, name string) allocator.Model {
	t.Helper()
	m, ok := allocator.Default().Model(name)
	if !ok {
		t.Fatalf("no catalog model %s", name)
	}
	return m
}

// wholeGPU is GPU i of model m with MIG off, as discovery reports it.
func wholeGPU(m allocator.Model, i int) allocator.NodeGPU {
	mode := allocator.MIGUnsupported
	if len(m.Profiles) > 0 {
		mode = allocator.MIGDisabled
	}
	return allocator.NodeGPU{
		Index: i, UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), Product: m.Products[len(m.Products)-1],
		Model: m.Name, Known: true, MemoryMiB: m.MemoryMiB, MIGMode: mode, Profiles: m.Profiles, Healthy: true,
	}
}

// migGPU is GPU i of model m with MIG on and one instance per profile
// given, at that profile's placements in turn; GI ids count from 1.
func migGPU(m allocator.Model, i int, profiles ...string) allocator.NodeGPU {
	g := wholeGPU(m, i)
	g.MIGMode = allocator.MIGEnabled
	used := map[string]int{}
	for n, name := range profiles {
		p, _ := m.Profile(name)
		pl := p.Placements[used[name]%len(p.Placements)]
		used[name]++
		g.Instances = append(g.Instances, allocator.MIGInstance{ID: n + 1, Profile: p.Name, Placement: pl, MemoryMiB: p.MemoryMiB})
	}
	return g
}

// migUUID is the fake MIG device UUID of an instance.
func migUUID(g allocator.NodeGPU, gi int) string {
	return fmt.Sprintf("MIG-%08d-%04d-0000-0000-000000000000", g.Index, gi)
}

// migUUIDs names every instance of gpus.
func migUUIDs(gpus ...allocator.NodeGPU) map[InstanceKey]string {
	out := map[InstanceKey]string{}
	for _, g := range gpus {
		for _, in := range g.Instances {
			out[InstanceKey{GPU: g.UUID, GI: in.ID}] = migUUID(g, in.ID)
		}
	}
	return out
}

// standInEdits stands in for the node's CDI generator where a test is
// about what preparing decides, not what a container gets
// (TestPrepareWritesCompleteCDI uses the real one): a device's edits name
// the UUID they were made for.
type standInEdits struct{}

func (standInEdits) CommonEdits() (cdispec.ContainerEdits, error) {
	return cdispec.ContainerEdits{Env: []string{"TEST_COMMON=1"}}, nil
}

func (standInEdits) DeviceEdits(uuid string) (cdispec.ContainerEdits, error) {
	return cdispec.ContainerEdits{Env: []string{"TEST_DEVICE=" + uuid}}, nil
}

func (standInEdits) Forget() {}

// realEdits is NVIDIA's nvcdi over a fake driver root with a device node
// per GPU (minor = index) and a fake NVML answering for gpus as whole GPUs.
func realEdits(t *testing.T, gpus ...allocator.NodeGPU) (*cdi.Generator, cditest.Root) {
	t.Helper()
	minors := make([]int, len(gpus))
	devs := make([]*mock.Device, len(gpus))
	for i, g := range gpus {
		uuid := g.UUID
		minors[i], devs[i] = g.Index, &mock.Device{GetUUIDFunc: func() (string, nvml.Return) { return uuid, nvml.SUCCESS }}
	}
	root := cditest.NewRoot(t, minors...)
	gen, err := cdi.New(cditest.NVML(devs...), cdi.Options{DriverRoot: root.Dir, HookPath: root.HookPath})
	if err != nil {
		t.Fatal(err)
	}
	return gen, root
}
